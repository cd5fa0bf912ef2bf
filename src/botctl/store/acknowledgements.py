"""Acknowledgement files (``botctl drift --accept FILE``): drift a team knows about and leaves
alone for a while. JSON, meant to be committed beside the configuration::

    {"entries": [{"chatbotId": "...", "resource": "attribute", "key": "legacy_flag",
                  "live": {...}, "until": "2026-12-01T00:00:00+00:00"}]}

An entry covers its drift item while the live value is the one accepted and ``until`` has
not passed (see ``reconcile.drift.acknowledge``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from botctl.errors import BotctlError
from botctl.store.files import first_problem, read_text, write_atomically
from botctl.values import JsonValue


@dataclass(frozen=True)
class Acknowledgement:
    """A drift item accepted until ``until`` while its live value stays as it was."""

    chatbot_id: str
    resource: str
    path: str
    live: JsonValue
    until: datetime

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.chatbot_id, self.resource, self.path)


class _Entry(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    chatbot_id: str = Field(alias="chatbotId")
    resource: str
    key: str
    live: Any = None
    until: datetime


class _File(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entries: list[_Entry]


def read_acknowledgements(path: Path) -> list[Acknowledgement]:
    text = read_text(path, "acknowledgements", BotctlError)
    try:
        data = _File.model_validate_json(text)
    except ValidationError as exc:
        raise BotctlError(
            f"acknowledgements {path} are not valid ({first_problem(exc)}); expected "
            '{"entries": [{"chatbotId", "resource", "key", "live", "until"}]}'
        ) from None
    for entry in data.entries:
        if entry.until.tzinfo is None:
            raise BotctlError(
                f"acknowledgements {path}: until {entry.until.isoformat()} needs a time zone "
                "(e.g. 2026-12-01T00:00:00Z)"
            )
    return [Acknowledgement(e.chatbot_id, e.resource, e.key, e.live, e.until) for e in data.entries]


def write_acknowledgements(path: Path, entries: list[Acknowledgement]) -> None:
    document = {
        "entries": [
            {
                "chatbotId": e.chatbot_id,
                "resource": e.resource,
                "key": e.path,
                "live": e.live,
                "until": e.until.isoformat(timespec="seconds"),
            }
            for e in sorted(entries, key=lambda e: e.key)
        ]
    }
    try:
        write_atomically(path, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    except OSError as exc:
        raise BotctlError(f"cannot write acknowledgements {path}: {exc.strerror}") from None
