"""Read shapes derived from the stored (camelCase, contract 2.1) settings.

`documented`: the eight fields API-NOTES documents for GET /get-chatbots; a field never set
on the chatbot reads as null (strict: the sandbox invents no defaults the service might not
have). `extended`: the snake_case record seen live, carrying only what has been set.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from botctl.sandbox.store import Chatbot

JSON = dict[str, Any]
STATUS = "ready"  # the sandbox trains nothing: every chatbot is ready at once


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def documented(bot: Chatbot) -> JSON:
    s = bot.settings
    return {
        "id": bot.id,
        "name": s.get("name"),
        "status": STATUS,
        "model": s.get("model"),
        "instructions": s.get("instructions"),
        "visibility": s.get("visibility"),
        "created_at": iso(bot.created_at),
        "updated_at": iso(bot.updated_at),
    }


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def _snake_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {snake(k): _snake_keys(v) for k, v in value.items()}
    return value


def extended(bot: Chatbot) -> JSON:
    record: JSON = {"id": bot.id, "status": STATUS}
    record.update(_snake_keys(bot.settings))
    record["created_at"] = iso(bot.created_at)
    record["updated_at"] = iso(bot.updated_at)
    return record
