"""YAML files -> Desired: every problem of every file at once, each as file:line:col.

Order of work per document: parse (located) -> interpolate ``${VAR}`` in strings -> validate
against the document model -> policy checks (model list, attribute names) -> BotSpec. Then
across documents: duplicate ``metadata.name`` and ``chatbotId``. Never touches the network.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from botctl import contract
from botctl.config.document import Document
from botctl.config.interpolate import InterpolationError, Interpolator
from botctl.config.messages import did_you_mean, located_errors
from botctl.config.yamlnodes import LocatedDocument, parse_documents
from botctl.config.yamlnodes import Path as NodePath
from botctl.errors import ConfigError, Problem
from botctl.models import BotSpec, Desired

SUFFIXES = (".yaml", ".yml")


def load_desired(
    paths: Sequence[Path], *, environ: Mapping[str, str], allow_unknown_models: bool = False
) -> Desired:
    problems: list[Problem] = []
    bots: list[tuple[BotSpec, LocatedDocument]] = []
    files = _files(paths, problems)
    for file in files:
        for doc in _documents(file, problems):
            bot = _bot(doc, environ, allow_unknown_models, problems)
            if bot is not None:
                bots.append((bot, doc))
    if files and not bots and not problems:
        problems.append(Problem(str(files[0]), 1, 1, "no chatbot documents found"))
    problems += _duplicates(bots)
    # A value shared through an alias or "<<" is checked once per use but written once.
    problems = list(dict.fromkeys(problems))
    if any(p.severity == "error" for p in problems):
        raise ConfigError(problems)
    warnings = tuple(str(p) for p in sorted(problems))
    return Desired(
        bots=tuple(bot for bot, _ in bots),
        warnings=warnings,
        declared_ids=frozenset(bot.chatbot_id for bot, _ in bots),
    )


def _files(paths: Sequence[Path], problems: list[Problem]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            matches = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            if not matches:
                problems.append(Problem(str(path), 1, 1, "no *.yaml or *.yml files in directory"))
            found += matches
        elif path.is_file():
            found.append(path)
        else:
            problems.append(Problem(str(path), 1, 1, "no such file or directory"))
    return list(dict.fromkeys(found))


def _documents(file: Path, problems: list[Problem]) -> list[LocatedDocument]:
    try:
        data = file.read_bytes()
    except OSError as exc:
        problems.append(Problem(str(file), 1, 1, f"cannot read: {exc.strerror}"))
        return []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Located at the first bad byte: the text before it decodes, so columns are characters.
        before = data[: exc.start]
        line_start = before.rfind(b"\n") + 1
        line = before.count(b"\n") + 1
        col = len(before[line_start:].decode("utf-8")) + 1
        problems.append(Problem(str(file), line, col, f"not UTF-8 text (byte {exc.start})"))
        return []
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as read_text() does
    documents, yaml_problems = parse_documents(text, str(file))
    problems += yaml_problems
    return documents


def _interpolate(
    value: Any,
    doc: LocatedDocument,
    path: NodePath,
    interpolate: Interpolator,
    problems: list[Problem],
) -> Any:
    if isinstance(value, str):
        try:
            return interpolate(value)
        except InterpolationError as exc:
            problems.append(doc.problem(path, str(exc)))
            return value
    if isinstance(value, dict):
        return {
            k: _interpolate(v, doc, (*path, k), interpolate, problems) for k, v in value.items()
        }
    if isinstance(value, list):
        # Lists become tuples: the models hold immutable sequences.
        return tuple(
            _interpolate(v, doc, (*path, i), interpolate, problems) for i, v in enumerate(value)
        )
    return value


def _bot(
    doc: LocatedDocument,
    environ: Mapping[str, str],
    allow_unknown_models: bool,
    problems: list[Problem],
) -> BotSpec | None:
    if not isinstance(doc.value, dict):
        problems.append(
            doc.problem((), "a document must be a mapping with apiVersion, kind, metadata and spec")
        )
        return None
    interpolate = Interpolator(environ)
    before = len(problems)
    data = _interpolate(doc.value, doc, (), interpolate, problems)
    # A value whose ${VAR} failed keeps its raw text (one the YAML could not give is None):
    # checks of it would only repeat, in other words, a problem already reported at its place.
    failed = {(p.file, p.line, p.col) for p in problems}
    found = _policy(data, doc, allow_unknown_models)
    document = None
    try:
        document = Document.model_validate(data)
    except ValidationError as exc:
        found += located_errors(doc, (), Document, exc)
    problems += [p for p in found if (p.file, p.line, p.col) not in failed]
    if document is None:
        return None
    if any(p.severity == "error" for p in problems[before:]):
        return None
    spec = document.spec
    return BotSpec(
        name=document.metadata.name,
        chatbot_id=spec.chatbotId,
        labels=document.metadata.labels,
        api_key_env=spec.apiKeyEnv,
        settings=spec.settings,
        attributes=spec.customAttributes,
        prune=spec.prune,
        ignore_attributes=spec.ignoreAttributes,
        max_archive_percent=spec.safety.maxArchivePercent if spec.safety else None,
        source=f"{doc.file}:{doc.start[0]}",
        secret_values=frozenset(interpolate.secrets),
    )


def _policy(data: Any, doc: LocatedDocument, allow_unknown_models: bool) -> list[Problem]:
    """Checks beyond the types, on the raw data so they report alongside type errors."""
    spec = data.get("spec") if isinstance(data, dict) else None
    if not isinstance(spec, dict):
        return []
    settings = spec.get("settings")
    found = []
    model = settings.get("model") if isinstance(settings, dict) else None
    # A model of the wrong shape is the document model's error; the list is checked after.
    if (
        isinstance(model, str)
        and model not in contract.SETTINGS_MODELS
        and re.match(contract.MODEL_ID_PATTERN, model)
    ):
        path: NodePath = ("spec", "settings", "model")
        message = f"model: {model!r} is not a known model" + did_you_mean(
            model, contract.SETTINGS_MODELS
        )
        if allow_unknown_models:
            found.append(doc.problem(path, message, warning=True))
        else:
            found.append(
                doc.problem(
                    path,
                    message + "; if the service released it after this "
                    "botctl, pass --allow-unknown-models",
                )
            )
    attributes = spec.get("customAttributes")
    seen: dict[str, int] = {}
    for i, attr in enumerate(attributes if isinstance(attributes, tuple) else ()):
        name = attr.get("name") if isinstance(attr, dict) else None
        if not isinstance(name, str):
            continue
        path = ("spec", "customAttributes", i, "name")
        if name in seen:
            found.append(
                doc.problem(
                    path,
                    f"duplicate attribute name {name!r} (also item "
                    f"{seen[name] + 1} of customAttributes)",
                )
            )
        seen.setdefault(name, i)
        valid = re.match(contract.ATTRIBUTE_NAME_PATTERN, name)
        if valid and not re.match(contract.ATTRIBUTE_NAME_STRICT_PATTERN, name):
            found.append(
                doc.problem(
                    path,
                    f"attribute name {name!r}: a guide of the service allows only lowercase "
                    "letters, digits and '_' (starting with a letter)",
                    warning=True,
                )
            )
    return found


def _duplicates(bots: list[tuple[BotSpec, LocatedDocument]]) -> list[Problem]:
    problems = []
    keys: list[tuple[str, NodePath, Callable[[BotSpec], str]]] = [
        ("metadata.name", ("metadata", "name"), lambda b: b.name),
        ("chatbotId", ("spec", "chatbotId"), lambda b: b.chatbot_id),
    ]
    for field, path, key in keys:
        first: dict[str, LocatedDocument] = {}
        for bot, doc in bots:
            value = key(bot)
            if value in first:
                other = first[value]
                line = other.mark(path)[0]
                problems.append(
                    doc.problem(path, f"duplicate {field} {value!r} (also in {other.file}:{line})")
                )
                problems.append(
                    other.problem(
                        path,
                        f"duplicate {field} {value!r} (also in {doc.file}:{doc.mark(path)[0]})",
                    )
                )
            else:
                first[value] = doc
    return problems
