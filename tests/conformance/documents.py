"""The document corpus: YAML cases, each a snippet of botctl's format with the verdict every
encoding must give it, and the two judges (the validator, the JSON Schema).

A case file (``documents/*.yaml``) is a list of cases::

    - id: temp-above-one                 # unique in its file; the test id is FILE/ID
      about: contract 2.1, temp is 0 to 1  # why the case exists (optional)
      settings: "temp: 1.5"              # YAML placed under spec.settings; or
      # spec: "...", placed under spec; or document: "...", the whole text (--- for several)
      expect: error                      # valid | warning | error, the validator's verdict
      message: "temp: must be at most 1" # for error/warning: part of the validator's message
      path: spec.settings.temp           # for error/warning: where it must be located
      line: 9                            # instead of path, where no path names the place
      env: {VAR: value}                  # environment for ${VAR} (default: empty)
      allow_unknown_models: true         # validate --allow-unknown-models (default false)
      json_schema:                       # only where the schema's verdict differs, with why
        expect: valid
        because: "..."

The JSON Schema has no warnings: a document the validator accepts with a warning must be
valid under it. An encoding that cannot express a rule says so case by case (``because``):
nothing is skipped silently.
"""

from __future__ import annotations

import json
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import jsonschema
import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

from botctl.config.loader import load_desired
from botctl.config.yamlnodes import parse_documents
from botctl.errors import ConfigError

_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # as botctl.config.yamlnodes
HERE = Path(__file__).parent
SCHEMA = HERE.parents[1] / "schemas" / "botctl.schema.json"
Verdict = Literal["valid", "warning", "error"]

BASE = """\
apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: case
spec:
  chatbotId: bot-1
"""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Override(_Strict):
    """Another encoding's verdict where it differs from the validator's, and why."""

    expect: Verdict
    because: str = Field(min_length=20)


class DocumentCase(_Strict):
    id: str = Field(pattern=r"^[a-z0-9][a-z0-9.-]*$")
    about: str = ""
    settings: str | None = None
    spec: str | None = None
    document: str | None = None
    expect: Verdict
    message: str | None = None
    path: str | None = None
    line: int | None = None
    env: dict[str, str] = Field(default_factory=dict)
    allow_unknown_models: bool = False
    json_schema: Override | None = None

    @model_validator(mode="after")
    def _complete(self) -> DocumentCase:
        if self.document is not None and (self.settings is not None or self.spec is not None):
            raise ValueError("document excludes settings and spec")
        if self.expect != "valid" and (not self.message or not (self.path or self.line)):
            raise ValueError("an error or a warning needs its message and path (or line)")
        if self.json_schema is not None and self.json_schema.expect == self.schema_default:
            raise ValueError("json_schema repeats the verdict it would have anyway")
        return self

    @property
    def schema_default(self) -> Verdict:
        return "error" if self.expect == "error" else "valid"

    @property
    def schema_expect(self) -> Verdict:
        return self.json_schema.expect if self.json_schema else self.schema_default

    def text(self) -> str:
        if self.document is not None:
            return self.document
        text = BASE
        if self.settings is not None:
            text += "  settings:\n" + _indent(self.settings, 4)
        if self.spec is not None:
            text += _indent(self.spec, 2)
        return text


def _indent(snippet: str, spaces: int) -> str:
    return "".join(" " * spaces + line + "\n" for line in snippet.splitlines())


@dataclass(frozen=True)
class Finding:
    """One encoding's verdict on a case, and the messages (with their line) behind it."""

    verdict: Verdict
    messages: tuple[tuple[int, str], ...] = ()  # (line, message); line 0 when unknown


def load_cases(folder: Path = HERE / "documents") -> list[tuple[str, DocumentCase]]:
    cases: list[tuple[str, DocumentCase]] = []
    for file in sorted(folder.glob("*.yaml")):
        items = yaml.safe_load(file.read_text(encoding="utf-8"))
        ids = [item.get("id") for item in items]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        assert not duplicates, f"{file.name}: duplicate case ids {duplicates}"
        cases += [
            (f"{file.stem}/{item['id']}", DocumentCase.model_validate(item)) for item in items
        ]
    return cases


# -- the validator: botctl's own loader, as `botctl validate` runs it ----------------------

_WARNING = re.compile(r"^.*:(\d+):\d+: warning(?:\[BC\d+\])?: (.*)$", re.DOTALL)  # coded (README)


def run_validator(case: DocumentCase) -> Finding:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "case.yaml"
        path.write_text(case.text(), encoding="utf-8")
        try:
            desired = load_desired(
                [path], environ=case.env, allow_unknown_models=case.allow_unknown_models
            )
        except ConfigError as exc:
            found = [(p.line, p.message) for p in exc.problems if p.severity == "error"]
            return Finding("error", tuple(found))
    warnings = [m.groups() for m in map(_WARNING.match, desired.warnings) if m]
    assert len(warnings) == len(desired.warnings), desired.warnings
    if warnings:
        return Finding("warning", tuple((int(line), text) for line, text in warnings))
    return Finding("valid")


def lines_of(case: DocumentCase) -> set[int]:
    """The lines where ``case.path`` is written (its key and its value), or ``case.line``."""
    if case.line is not None:
        return {case.line}
    assert case.path is not None
    documents, _ = parse_documents(case.text(), "case")
    path = tuple(int(p) if p.isdigit() else p for p in case.path.split("."))
    return {doc.mark(path, key=key)[0] for doc in documents[:1] for key in (True, False)}


def judge_validator(case: DocumentCase, found: Finding) -> list[str]:
    """What is wrong with the validator's finding for ``case`` (empty: it conforms)."""
    if found.verdict != case.expect:
        return [f"validator: expected {case.expect}, got {found.verdict}: {found.messages}"]
    if case.expect == "valid":
        return []
    assert case.message is not None
    lines = lines_of(case)
    if not any(case.message in text and line in lines for line, text in found.messages):
        return [
            f"validator: no {case.expect} containing {case.message!r} at line "
            f"{sorted(lines)} ({case.path or 'line'}); got {list(found.messages)}"
        ]
    return []


# -- the JSON Schema, as an editor or the `jsonschema` package reads the file --------------


def schema_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )


def run_json_schema(case: DocumentCase, validator: jsonschema.Draft202012Validator) -> Finding:
    """Every document of the text against the schema, read as botctl's loader reads it
    (PyYAML, YAML 1.1, on libyaml when present). A text that is not YAML is valid under no
    schema."""
    try:
        documents = [d for d in yaml.load_all(case.text(), Loader=_LOADER) if d is not None]
    except yaml.YAMLError as exc:
        return Finding("error", ((0, f"(document): not YAML: {exc}"),))
    errors = [
        (0, f"{'.'.join(map(str, e.absolute_path)) or '(document)'}: {e.message}")
        for doc in documents
        for e in validator.iter_errors(doc)
    ]
    return Finding("error", tuple(errors)) if errors else Finding("valid")


def judge_json_schema(case: DocumentCase, found: Finding) -> list[str]:
    expected = case.schema_expect
    if found.verdict != expected:
        why = f" ({case.json_schema.because})" if case.json_schema else ""
        return [f"JSON Schema: expected {expected}{why}, got {found.verdict}: {found.messages}"]
    if expected == "error" and case.path is not None and case.json_schema is None:
        # The error must be about the case's place (or a mapping that holds it).
        wanted = case.path
        if not any(_within(wanted, text.split(":", 1)[0]) for _, text in found.messages):
            return [f"JSON Schema: no error at {wanted} or above it; got {list(found.messages)}"]
    return []


def _within(path: str, error_path: str) -> bool:
    return error_path == "(document)" or path == error_path or path.startswith(error_path + ".")


def opposite(verdict: Verdict) -> Verdict:
    return "valid" if verdict == "error" else "error"
