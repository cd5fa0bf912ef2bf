"""Stored conversations made "in the dashboard" (a seed file, the admin API): the traffic a
chatbot had before anyone tested it, for ``GET /get-conversations`` (4.6) to list.

``{"conversations": [{"id": "c-1", "source": "Widget or Iframe",
"created_at": "2025-05-02T09:30:00Z", "messages": [{"role": "user", "content": "..."}, ...]}]}``
on a chatbot of the seed or of ``POST``/``PATCH /_sandbox/chatbots``. The contract shows
neither the roles nor the types a stored message may have: a seed may give any non-empty
``role`` and ``type`` (default ``text``), so a client can be shown what it does with one it
does not know. ``created_at`` defaults to now; a conversation of the same id is replaced.
"""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any

from botctl.sandbox import validation as v
from botctl.sandbox.store import Store
from botctl.sandbox.views import iso

JSON = dict[str, Any]
MAX_SEEDED_MESSAGES = 1000


def _word(value: Any, where: str) -> str:
    text = v.string(value, where)
    if not text:
        raise v.Invalid(f"{where}: must not be empty")
    return text


def _timestamp(value: Any, where: str) -> float:
    text = v.string(value, where)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise v.Invalid(f"{where}: must be an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise v.Invalid(f"{where}: must name its time zone (e.g. Z)")
    return moment.timestamp()


def _message(value: Any, where: str) -> JSON:
    fields = v.obj(value, where, {"role": _word, "content": v.string, "type": _word})
    for required in ("role", "content"):
        if required not in fields:
            raise v.Invalid(f"{where}.{required}: required")
    return fields


def _messages(value: Any, where: str) -> list[JSON]:
    if not isinstance(value, list) or not 1 <= len(value) <= MAX_SEEDED_MESSAGES:
        raise v.Invalid(f"{where}: must be an array of 1 to {MAX_SEEDED_MESSAGES} messages")
    return [_message(m, f"{where}[{i}]") for i, m in enumerate(value)]


def _conversation(value: Any, where: str) -> tuple[JSON, float]:
    checks: dict[str, v.Check] = {
        "id": _word,
        "source": _word,
        "created_at": _timestamp,
        "messages": _messages,
    }
    fields = v.obj(value, where, checks)
    for required in ("id", "source", "messages"):
        if required not in fields:
            raise v.Invalid(f"{where}.{required}: required")
    created = fields.get("created_at", time.time())
    conv_id = fields["id"]
    record = {
        "id": conv_id,
        "chatbot_id": "",
        "created_at": iso(created),
        "updated_at": iso(created),
        "source": fields["source"],
        "messages": [
            {
                "role": m["role"],
                "content": m["content"],
                "id": f"{conv_id}-{i}",
                "type": m.get("type", "text"),
            }
            for i, m in enumerate(fields["messages"])
        ],
        "_created": created,
    }
    return record, created


def conversation_list(value: Any, where: str) -> list[tuple[JSON, float]]:
    """A seed's or an admin call's ``conversations``, validated."""
    if not isinstance(value, list):
        raise v.Invalid(f"{where}: must be an array")
    return [_conversation(c, f"{where}[{i}]") for i, c in enumerate(value)]


def add_conversations(store: Store, chatbot_id: str, found: list[tuple[JSON, float]]) -> None:
    for record, created in found:
        store.put_conversation(chatbot_id, {**record, "chatbot_id": chatbot_id}, created)
