"""YAML files -> the resolved chatbots (``Fleet``) and ``Desired``: every problem of every file
at once, each as file:line:col.

Order of work: parse each document (located) -> interpolate ``${VAR}`` in its strings -> read
its ``spec.lint.disable`` -> resolve the kinds (``config.resolve``: AttributeSets, Defaults,
then each Chatbot, validated once merged) -> duplicates across documents. Never touches the
network. Files named ``botctl.yaml``/``botctl.yml`` are project files (``config.project``),
never configuration documents.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from botctl import lint
from botctl.config.checks import disabled_codes
from botctl.config.document import may_hold_secret, secret_places
from botctl.config.interpolate import Interpolator, interpolate_tree
from botctl.config.project import PROJECT_FILE_NAMES, repository_root, within
from botctl.config.resolve import Fleet, resolve
from botctl.config.sources import Findings, Source
from botctl.config.yamlnodes import FILE_TOO_LARGE, MAX_FILE_BYTES, LocatedDocument, parse_documents
from botctl.config.yamlnodes import Path as NodePath
from botctl.errors import ConfigError, Problem
from botctl.models import Desired
from botctl.trust import exposure_of
from botctl.values import MIN_MASKED_LENGTH, mask_secrets_in_text

SUFFIXES = (".yaml", ".yml")


def load_desired(
    paths: Sequence[Path],
    *,
    environ: Mapping[str, str],
    allow_unknown_models: bool = False,
    disabled_warnings: frozenset[str] = frozenset(),
    strict: bool = False,
) -> Desired:
    return load_fleet(
        paths,
        environ=environ,
        allow_unknown_models=allow_unknown_models,
        disabled_warnings=disabled_warnings,
        strict=strict,
    ).desired


def load_fleet(
    paths: Sequence[Path],
    *,
    environ: Mapping[str, str],
    allow_unknown_models: bool = False,
    disabled_warnings: frozenset[str] = frozenset(),
    strict: bool = False,
) -> Fleet:
    """The configuration, resolved and validated; raises ConfigError with every problem.
    ``disabled_warnings`` (codes) are not reported; ``strict`` makes warnings errors."""
    found = Findings(disabled=disabled_warnings, strict=strict)
    files = _files(paths, found.early)
    return _load(
        [(str(file), _read(file, found.early)) for file in files],
        environ,
        allow_unknown_models,
        found,
    )


def load_fleet_from(
    files: Sequence[tuple[str, bytes]],
    *,
    environ: Mapping[str, str],
    allow_unknown_models: bool = False,
) -> Fleet:
    """The configuration of files given as (name, content), as ``load_fleet`` resolves files
    on disk: the configuration at a git revision (``config.gitref``). A configuration
    without any chatbot is no error here: at an earlier revision there may have been none."""
    found = Findings(disabled=frozenset(), strict=False)
    return _load(files, environ, allow_unknown_models, found, empty_ok=True)


def _load(
    files: Sequence[tuple[str, bytes | None]],
    environ: Mapping[str, str],
    allow_unknown_models: bool,
    found: Findings,
    *,
    empty_ok: bool = False,
) -> Fleet:
    sources = [
        source
        for name, data in files
        if data is not None
        for doc in _parse(name, data, found.early)
        if (source := _source(doc, environ, found)) is not None
    ]
    fleet = resolve(sources, found, allow_unknown_models)
    if files and not fleet.bots and not found.has_errors and not empty_ok:
        found.add(Problem(files[0][0], 1, 1, "no chatbot documents found"))
    # A message may quote a value resolved from ${secret:...}: never its text, in any spelling.
    secrets = {secret.value for source in sources for secret in source.secrets}
    final = [replace(p, message=mask_secrets_in_text(p.message, secrets)) for p in found.final()]
    if any(p.severity == "error" for p in final):
        raise ConfigError(final)
    return Fleet(fleet.bots, tuple(str(p) for p in final), fleet.declared_ids, fleet.tests)


def _files(paths: Sequence[Path], problems: list[Problem]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            matches = sorted(
                p
                for p in path.rglob("*")
                if p.suffix in SUFFIXES and p.name not in PROJECT_FILE_NAMES and p.is_file()
            )
            if not matches:
                problems.append(Problem(str(path), 1, 1, "no *.yaml or *.yml files in directory"))
            found += _inside(path, matches, problems)
        elif path.is_file() and path.name in PROJECT_FILE_NAMES:
            problems.append(
                Problem(
                    str(path),
                    1,
                    1,
                    "a project file, not a configuration document: botctl reads it from the "
                    "working directory (or --config); give the configuration's files or "
                    "directories",
                )
            )
        elif path.is_file():
            found.append(path)
        elif path.exists():  # a FIFO or a device: never opened (a FIFO would block the run)
            problems.append(Problem(str(path), 1, 1, "not a file or a directory"))
        else:
            problems.append(Problem(str(path), 1, 1, "no such file or directory"))
    return list(dict.fromkeys(found))


def _inside(directory: Path, files: list[Path], problems: list[Problem]) -> list[Path]:
    """The ``files`` found in ``directory`` that are inside its repository once symbolic
    links are followed; each other one is a problem, never read (a committed link to
    ``/etc/passwd`` or another team's files)."""
    boundary = repository_root(directory)
    real = os.path.realpath(boundary)
    kept = []
    for file in files:
        if within(os.path.realpath(file), real):
            kept.append(file)
        else:
            problems.append(
                Problem(
                    str(file),
                    1,
                    1,
                    f"a symbolic link leading out of the repository ({boundary}): not read",
                )
            )
    return kept


def _read(file: Path, problems: list[Problem]) -> bytes | None:
    try:
        with file.open("rb") as handle:  # never more than the limit, however large the file
            return handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        problems.append(Problem(str(file), 1, 1, f"cannot read: {exc.strerror}"))
        return None


# Files parsed in this process, by name and content: the configuration at a git revision
# (--changed-since) is mostly the same files as the working tree's, parsed once. Parsed
# documents are never changed (interpolation and resolution build new values).
_PARSED: dict[tuple[str, bytes], tuple[list[LocatedDocument], list[Problem]]] = {}
_PARSED_MAX = 20_000


def _parse(file: str, data: bytes, problems: list[Problem]) -> list[LocatedDocument]:
    key = (file, data)
    hit = _PARSED.get(key)
    if hit is None:
        found: list[Problem] = []
        hit = (_parse_new(file, data, found), found)
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[key] = hit
    problems += hit[1]
    return hit[0]


def _parse_new(file: str, data: bytes, problems: list[Problem]) -> list[LocatedDocument]:
    if len(data) > MAX_FILE_BYTES:
        problems.append(Problem(file, 1, 1, FILE_TOO_LARGE))
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Located at the first bad byte: the text before it decodes, so columns are characters.
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        line = before.count(b"\n") + 1
        col = len(before[line_start:].decode("utf-8")) + 1
        problems.append(Problem(file, line, col, f"not UTF-8 text (byte {exc.start})"))
        return []
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() does
    documents, yaml_problems = parse_documents(text, file)
    problems += yaml_problems
    return documents


def _check_key_variable(
    doc: LocatedDocument, data: dict[str, object], environ: Mapping[str, str], found: Findings
) -> None:
    """A chatbot's ``apiKeyEnv`` names a variable the operator exposes (``botctl.trust``):
    a commit cannot have botctl send another secret as a bearer key."""
    spec = data.get("spec")
    name = spec.get("apiKeyEnv") if isinstance(spec, dict) else None
    if isinstance(name, str):
        refusal = exposure_of(environ).refusal(name, "key")
        if refusal is not None:
            found.add_early(doc.problem(("spec", "apiKeyEnv"), refusal))


def _source(doc: LocatedDocument, environ: Mapping[str, str], found: Findings) -> Source | None:
    if not isinstance(doc.value, dict):
        found.error(
            Source(doc, {}),
            (),
            "a document must be a mapping with apiVersion, kind, metadata and spec",
        )
        return None
    interpolate = Interpolator(environ)
    short: dict[str, NodePath] = {}  # variable -> the first place its short value is used

    def secret_at(path: NodePath) -> None:
        if not may_hold_secret(path):
            found.add_early(doc.problem(path, secret_places()))
        for secret in interpolate.last_secrets:
            if len(secret.value) < MIN_MASKED_LENGTH:
                short.setdefault(secret.variable, path)

    data = interpolate_tree(
        doc.value,
        interpolate,
        lambda path, message: found.add_early(doc.problem(path, message)),
        on_secret=secret_at,
    )
    source = Source(doc, data, frozenset(interpolate.secrets), frozenset(interpolate.texts))
    _check_key_variable(doc, data, environ, found)
    source.disabled = disabled_codes(source, found)
    for variable, path in short.items():
        found.warn(
            source,
            lint.SHORT_SECRET,
            path,
            f"${{secret:{variable}}} is shorter than {MIN_MASKED_LENGTH} characters: a value "
            "that short is guessable by whoever holds the state key and a fingerprint of it, "
            "and it is masked only where it stands (in text it would mangle other words); "
            "use a longer secret",
        )
    return source
