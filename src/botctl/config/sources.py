"""One document as the loader holds it (``Source``: located, interpolated, with its own
``spec.lint.disable``), and the problems found about the documents (``Findings``), where
warnings are coded, silenced or made errors (``--strict``) as they are found."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from botctl import lint
from botctl.config.yamlnodes import LocatedDocument
from botctl.config.yamlnodes import Path as NodePath
from botctl.errors import Problem
from botctl.sealing import Secret


@dataclass(eq=False)
class Source:
    doc: LocatedDocument
    data: dict[str, Any]  # the document's values, ${VAR}s interpolated
    secrets: frozenset[Secret] = frozenset()  # its ${secret:...}s, resolved
    secret_texts: frozenset[str] = frozenset()  # the whole strings that resolved one
    disabled: frozenset[str] = frozenset()  # warning codes its spec.lint.disable silences

    @property
    def kind(self) -> str:
        kind = self.data.get("kind")
        return kind if isinstance(kind, str) else ""

    @property
    def name(self) -> str:
        metadata = self.data.get("metadata")
        name = metadata.get("name") if isinstance(metadata, dict) else None
        return name if isinstance(name, str) else ""

    @property
    def spec(self) -> dict[str, Any]:
        spec = self.data.get("spec")
        return spec if isinstance(spec, dict) else {}

    def line(self, path: NodePath) -> int:
        return self.doc.mark(path, key=True)[0]

    def where(self, path: NodePath = ()) -> str:
        """``file:line`` of ``path`` (of the document when empty), for messages."""
        line = self.line(path) if path else self.doc.start[0]
        return f"{self.doc.file}:{line}"


@dataclass
class Findings:
    """Every problem found, errors and warnings, until the loader reports them all at once."""

    disabled: frozenset[str] = frozenset()  # by botctl.yaml and --disable-warning
    strict: bool = False  # warnings are errors (validate --strict)
    problems: list[Problem] = field(default_factory=list)
    # Problems found before validation (YAML, ${VAR}): the value there has no usable form (a
    # failed ${VAR} keeps its raw text, one the YAML could not give is None), so any later
    # problem at the same place would only repeat, in other words, the one already reported.
    early: list[Problem] = field(default_factory=list)

    def add(self, problem: Problem) -> None:
        self.problems.append(problem)

    def error(self, source: Source, path: NodePath, message: str, *, key: bool = False) -> None:
        self.problems.append(source.doc.problem(path, message, key=key))

    def warn(
        self,
        source: Source,
        code: lint.WarningCode,
        path: NodePath,
        message: str,
        *,
        key: bool = False,
    ) -> None:
        """A warning located in ``source``, unless silenced there, by the project or the run."""
        if code.code in self.disabled or code.code in source.disabled:
            return
        problem = source.doc.problem(path, message, key=key, warning=not self.strict)
        self.problems.append(replace(problem, code=code.code))

    def add_early(self, problem: Problem) -> None:
        self.early.append(problem)

    def mark(self) -> int:
        return len(self.problems)

    def errors_since(self, mark: int) -> bool:
        return any(p.severity == "error" for p in self.problems[mark:])

    @property
    def has_errors(self) -> bool:
        return bool(self.early) or any(p.severity == "error" for p in self.problems)

    def final(self) -> list[Problem]:
        """Sorted, each once (a value shared through an alias, "<<" or a shared document is
        checked once per use but written once), without repeats of early problems."""
        early = {(p.file, p.line, p.col) for p in self.early}
        kept = [p for p in self.problems if (p.file, p.line, p.col) not in early]
        return sorted(dict.fromkeys(self.early + kept))
