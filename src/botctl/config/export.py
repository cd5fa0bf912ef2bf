"""Live chatbots -> YAML documents of botctl's format, so a team can adopt bots that exist.

It formats what was read, and names the documents' files (checked before anything is
written; ``store.files.write_new_files`` writes them all or none). Settings the service does
not let botctl read are listed in a comment of each document, so nobody mistakes "not
exported" for "not set". A value the service holds but `botctl validate` refuses (a negative
ipLimit, a model newer than this botctl) is written in a comment too, never as a setting: an
exported file always validates. Text is exported literally: ``${`` is written ``$${``, so
nothing the service holds is read back as a variable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from botctl.config.document import HANDLE_MAX_LENGTH
from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.errors import BotctlError
from botctl.models import LiveBot
from botctl.resources.registry import kinds

# Where a configuration repository keeps the documents' JSON Schema (``botctl init`` and
# ``export --out`` write it there), and the first line naming it, relative to the document.
DOCUMENTS_SCHEMA = "schemas/botctl.schema.json"


def schema_line(path: str) -> str:
    """The first line that points yaml-language-server (VS Code's YAML extension, Neovim,
    JetBrains) at a schema, by a path relative to the file."""
    return f"# yaml-language-server: $schema={path}"


SCHEMA_LINE = schema_line(f"../{DOCUMENTS_SCHEMA}")  # a document in bots/ of the repository


# Of a handle made from a name: room left for "-<n>" within HANDLE_MAX_LENGTH.
HANDLE_BASE_LENGTH = HANDLE_MAX_LENGTH - 10


def handle_for(chatbot_id: str, name: str | None, taken: set[str]) -> str:
    """A metadata.name from the chatbot's name (or id), unique among ``taken``; always one
    `botctl validate` accepts (a name of 300 characters makes a handle of 90)."""
    base = _slug(str(name or chatbot_id)) or _slug(chatbot_id) or "chatbot"
    if not base[0].isalnum():
        base = f"bot-{base}"
    handle, n = base, 2
    while handle in taken:
        handle, n = f"{base}-{n}", n + 1
    taken.add(handle)
    return handle


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower())[:HANDLE_BASE_LENGTH].strip("-")


def literal(value: Any) -> Any:
    """``value`` with every ``${`` of its strings written ``$${``: the loader interpolates
    ``${VAR}`` in every string it reads, so a dashboard text holding ``${BOTCTL_API_KEY}``
    would come back as the key (printed, stored, sent). Escaped, it comes back as written."""
    if isinstance(value, str):
        return value.replace("${", "$${")
    if isinstance(value, list | tuple):
        return [literal(item) for item in value]
    if isinstance(value, dict):
        return {key: literal(item) for key, item in value.items()}
    return value


class BlockStringDumper(yaml.SafeDumper):
    """Multi-line strings as ``|`` blocks, as a person writes instructions."""


# Line breaks YAML knows besides \n: PyYAML writes them raw in a plain, quoted or block
# scalar, where reading folds them into a space or a \n. Only a double-quoted scalar escapes
# them (\N, \L, \P, \r), so a text holding one is written that way and reads back exact.
_OTHER_BREAKS = ("\r", "\x85", "\u2028", "\u2029")


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = None
    if any(mark in value for mark in _OTHER_BREAKS):
        style = '"'
    elif "\n" in value:
        style = "|"
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


BlockStringDumper.add_representer(str, _str)


def export_document(bot: LiveBot, handle: str, api_key_env: str) -> str:
    """One chatbot's document: each kind's keys (``ResourceKind.export``), and comments naming
    what the service holds that the document does not declare."""
    spec: dict[str, Any] = {"chatbotId": bot.chatbot_id}
    if api_key_env != DEFAULT_API_KEY_ENV:
        spec["apiKeyEnv"] = api_key_env
    lines = [SCHEMA_LINE, f"# Exported from chatbot {bot.chatbot_id}."]
    for kind in kinds():
        section = kind.export(bot)
        spec.update(literal(section.values))
        lines += [f"# {note}" for note in section.notes]
    document = {
        "apiVersion": "botctl/v1",
        "kind": "Chatbot",
        "metadata": {"name": handle},
        "spec": spec,
    }
    body = yaml.dump(
        document, Dumper=BlockStringDumper, sort_keys=False, allow_unicode=True, width=100
    )
    return "\n".join(lines) + "\n" + body


@dataclass(frozen=True)
class Exported:
    """One chatbot's exported document."""

    handle: str  # its metadata.name, and the name of its file
    bot: LiveBot
    text: str

    @property
    def file_name(self) -> str:
        return f"{self.handle}.yaml"


def export_documents(
    bots: Sequence[LiveBot], names: Mapping[str, str], api_key_env: str
) -> list[Exported]:
    """A document per chatbot, each with a handle unique among them, made from its name in
    the chatbot list (``names``, by id), else its id."""
    taken: set[str] = set()
    exported = []
    for bot in bots:
        handle = handle_for(bot.chatbot_id, names.get(bot.chatbot_id), taken)
        exported.append(Exported(handle, bot, export_document(bot, handle, api_key_env)))
    return exported


def document_files(out: Path, exported: Sequence[Exported]) -> list[tuple[Path, str]]:
    """Each document's file in ``out`` and its text, checked before anything is written:
    a file that exists is never overwritten, so one is an error naming every such file."""
    files = [(out / doc.file_name, doc.text) for doc in exported]
    clashing = [str(path) for path, _ in files if path.exists() or path.is_symlink()]
    if clashing:
        raise BotctlError(
            f"{', '.join(clashing)} already exist(s): not overwritten, and nothing was written "
            "(remove them or choose another --out)"
        )
    return files


def with_schema(doc: Exported, path: str) -> Exported:
    """``doc`` naming the schema at ``path`` (relative to its file) on its first line."""
    text = schema_line(path) + "\n" + doc.text.removeprefix(SCHEMA_LINE + "\n")
    return replace(doc, text=text)
