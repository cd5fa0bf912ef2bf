"""Resolved chatbots -> what ``botctl render`` prints: each chatbot as one fully resolved
``Chatbot`` document (sets and defaults applied, variables interpolated, secrets masked), every
value annotated with the document and line it came from; or the same as JSON, for tools.

The YAML is a valid configuration: loading it gives the same chatbots (except that a value
holding a ``${secret:...}`` shows ``(secret)``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from botctl.config.export import BlockStringDumper, literal
from botctl.config.resolve import Origin, ResolvedBot
from botctl.config.yamlnodes import Path as NodePath
from botctl.resources.registry import kinds
from botctl.values import JsonValue, mask_secrets

FORMAT_VERSION = 1
BOTCTL_DEFAULT = "botctl default"
_ALIGN_MAX = 56  # annotations line up at this column at most, so long values do not push them


class _IndentedDumper(BlockStringDumper):
    """Lists indented under their key, as the examples write them."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def _dump(value: Any, *, flow: bool = False) -> list[str]:
    text = yaml.dump(
        value,
        Dumper=_IndentedDumper,
        sort_keys=False,
        allow_unicode=True,
        width=1_000_000,
        default_flow_style=flow,
    )
    return text.removesuffix("...\n").rstrip("\n").split("\n")


def _where(origin: Origin | None) -> str:
    if origin is None:
        return BOTCTL_DEFAULT
    source, path = origin
    return f"from {source.doc.file}:{source.line(path)}"


class _Document:
    """Lines of one annotated document; annotations aligned when the document is done."""

    def __init__(self, bot: ResolvedBot) -> None:
        self.bot = bot
        self.lines: list[tuple[str, str]] = []  # (text, annotation or "")

    def plain(self, text: str) -> None:
        self.lines.append((text, ""))

    def leaf(self, indent: str, key: str, value: Any, path: NodePath) -> None:
        first, *rest = _dump({key: self.mask(value)})
        self.lines.append((indent + first, _where(self.bot.origin(path))))
        self.lines += [(indent + line, "") for line in rest]

    def entry(self, indent: str, key: str, value: Any, path: NodePath) -> None:
        """One key of a section: a mapping field by field, a list item by item (a mapping
        item on one line), each with where it came from; an empty mapping or list left out."""
        if isinstance(value, dict | list) and not value:
            return
        if isinstance(value, dict):
            self.plain(f"{indent}{key}:")
            self.mapping(indent + "  ", value, path)
        elif isinstance(value, list):
            self.plain(f"{indent}{key}:")
            for i, item in enumerate(value):
                flow = isinstance(item, dict)
                (line,) = _dump(self.mask(item) if flow else [self.mask(item)], flow=flow)
                shown = f"- {line}" if flow else line
                self.lines.append((f"{indent}  {shown}", _where(self.bot.origin((*path, i)))))
        else:
            self.leaf(indent, key, value, path)

    def mapping(self, indent: str, values: Mapping[str, Any], path: NodePath) -> None:
        for key, value in values.items():
            if isinstance(value, dict):
                self.plain(f"{indent}{key}:")
                self.mapping(indent + "  ", value, (*path, key))
            else:
                self.leaf(indent, key, value, (*path, key))

    def mask(self, value: Any) -> Any:
        """As written back: secrets masked, and ``${`` as ``$${`` (export's rule), so that the
        document loads as the value, never as a variable of whoever loads it."""
        return literal(mask_secrets(value, self.bot.spec.secret_values))

    def text(self) -> str:
        widths = [len(text) for text, note in self.lines if note and len(text) <= _ALIGN_MAX]
        column = max(widths, default=0) + 2
        out = []
        for text, note in self.lines:
            if note:
                text = f"{text.ljust(max(column, len(text) + 2))}# {note}"
            out.append(text)
        return "\n".join(out) + "\n"


def _header(bot: ResolvedBot) -> str:
    parts = [f"# chatbot {bot.spec.name} ({bot.spec.source})"]
    if bot.defaults:
        parts.append(f"defaults: {', '.join(bot.defaults)}")
    if bot.sets:
        parts.append(f"attribute sets: {', '.join(bot.sets)}")
    return "; ".join(parts)


def _sections(bot: ResolvedBot) -> dict[str, JsonValue]:
    """Each kind's keys of the resolved ``spec`` (``ResourceKind.section``), in kind order."""
    return {key: value for kind in kinds() for key, value in kind.section(bot.spec).items()}


def annotated_document(bot: ResolvedBot) -> str:
    spec = bot.spec
    doc = _Document(bot)
    doc.plain(_header(bot))
    doc.plain("apiVersion: botctl/v1")
    doc.plain("kind: Chatbot")
    doc.plain("metadata:")
    doc.leaf("  ", "name", spec.name, ("metadata", "name"))
    if spec.labels:
        doc.plain("  labels:")
        doc.mapping("    ", spec.labels, ("metadata", "labels"))
    doc.plain("spec:")
    doc.leaf("  ", "chatbotId", spec.chatbot_id, ("spec", "chatbotId"))
    doc.leaf("  ", "apiKeyEnv", spec.api_key_env, ("spec", "apiKeyEnv"))
    for key, value in _sections(bot).items():
        doc.entry("  ", key, value, ("spec", key))
    return doc.text()


def annotated_yaml(bots: Sequence[ResolvedBot]) -> str:
    """Every chatbot as an annotated YAML document, in configuration order."""
    return "".join(f"---\n{annotated_document(bot)}" for bot in bots)


def _origin_json(origin: Origin | None) -> dict[str, JsonValue] | None:
    if origin is None:
        return None
    source, path = origin
    return {
        "file": source.doc.file,
        "line": source.line(path),
        "kind": source.kind or "Chatbot",
        "name": source.name,
    }


def _leaf_paths(values: Mapping[str, Any], path: NodePath) -> list[NodePath]:
    paths: list[NodePath] = []
    for key, value in values.items():
        if isinstance(value, dict):
            paths += _leaf_paths(value, (*path, key))
        else:
            paths.append((*path, key))
    return paths


def _dotted(path: NodePath) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def resolved_json(bots: Sequence[ResolvedBot], warnings: Sequence[str]) -> dict[str, JsonValue]:
    """``botctl render --format json``: each chatbot's resolved document and, by dotted path
    (``spec.settings.styles.theme``, ``spec.customAttributes[0]``), where each value came from
    (null: botctl's default)."""
    chatbots: list[JsonValue] = [
        {
            "name": bot.spec.name,
            "source": bot.spec.source,
            "defaults": list(bot.defaults),
            "attributeSets": list(bot.sets),
            "document": _resolved_document(bot),
            "origins": _origins(bot),
        }
        for bot in bots
    ]
    return {"format_version": FORMAT_VERSION, "chatbots": chatbots, "warnings": list(warnings)}


def _resolved_document(bot: ResolvedBot) -> dict[str, JsonValue]:
    spec = bot.spec
    body: dict[str, JsonValue] = {"chatbotId": spec.chatbot_id, "apiKeyEnv": spec.api_key_env}
    body.update(mask_secrets(_sections(bot), spec.secret_values))
    metadata: dict[str, JsonValue] = {"name": spec.name}
    if spec.labels:
        metadata["labels"] = dict(spec.labels)
    return {"apiVersion": "botctl/v1", "kind": "Chatbot", "metadata": metadata, "spec": body}


def _origins(bot: ResolvedBot) -> dict[str, JsonValue]:
    """Where each value came from: every leaf of a mapping, every item of a list."""
    spec = bot.spec
    paths: list[NodePath] = [("metadata", "name")]
    paths += [("metadata", "labels", k) for k in spec.labels]
    paths += [("spec", "chatbotId"), ("spec", "apiKeyEnv")]
    for key, value in _sections(bot).items():
        if isinstance(value, dict):
            paths += _leaf_paths(value, ("spec", key))
        elif isinstance(value, list):
            paths += [("spec", key, i) for i in range(len(value))]
        else:
            paths.append(("spec", key))
    return dict(sorted((_dotted(p), _origin_json(bot.origin(p))) for p in paths))
