"""What each chatbot would be sent, or what drifted, as ``/status`` and the page show it: one
entry per value (its resource, path, drift class, the live, desired and last applied values),
from the drift report and the plan of a cycle: in plan-only mode too.

Bounded: at most ``limit`` entries per chatbot (the number left out is said), each value's
JSON text at most ``VALUE_CHARS`` characters. The values come masked from the drift and the
plan (a ``${secret:}`` value, or a value where the configuration declares one, is
``(secret)``; the state holds only fingerprints); each is passed through the agent's redactor
*before* it is shortened, so that a cut never leaves half a key that no mask recognises.

Classes: drift's (``changed_outside``, ``pending``, ``conflict``, ``unknown_origin``,
``missing``, ``unmanaged``), and two of the plan's: ``unreadable`` (a value no read can see and
nothing records: the next apply sends it) and ``unmanageable`` (a live attribute outside the
contract: reported with its reason, never written).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from botctl.plan import Plan
from botctl.reconcile.drift import CLASSES, DriftItem, DriftReport
from botctl.resources.attributes import KIND as ATTRIBUTES
from botctl.values import JsonValue

ITEMS = 25  # entries per chatbot in /status
VALUE_CHARS = 400  # a value's JSON text, beyond which it is shortened
ORDER = (*CLASSES, "unreadable", "unmanageable")


@dataclass(frozen=True)
class BotDiff:
    entries: tuple[dict[str, Any], ...]  # at most the limit, in ORDER then resource and path
    omitted: int  # entries left out

    def to_document(self) -> dict[str, Any]:
        return {"items": list(self.entries), "omitted": self.omitted}


def shown(value: JsonValue, redact: Callable[[str], str]) -> JsonValue:
    """``value`` redacted, or, when its JSON text is longer than ``VALUE_CHARS``, that text
    redacted and cut, saying how much is left out."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    if len(text) <= VALUE_CHARS:
        masked = redact(text)
        return value if masked == text else json.loads(masked)
    text = redact(text)
    return f"{text[:VALUE_CHARS]}… ({len(text) - VALUE_CHARS} more characters)"


def _entry(item: DriftItem, redact: Callable[[str], str]) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "class": item.drift_class,
        "resource": item.resource,
        "path": item.path,
    }
    change = item.change
    if item.drift_class == "pending" and change is not None:
        entry["action"] = change.action
        entry["confidence"] = change.confidence
        live = change.before if change.confidence == "verified" else None
        values = {"live": live, "desired": change.after, "lastApplied": item.last_applied}
    elif item.drift_class == "missing":
        values = {}
    else:
        values = {"live": item.live, "desired": item.desired, "lastApplied": item.last_applied}
    for key, value in values.items():
        entry[key] = shown(value, redact)
    return entry


def diffs(
    report: DriftReport, plan: Plan, redact: Callable[[str], str], *, limit: int = ITEMS
) -> dict[str, BotDiff]:
    """Each chatbot's entries (by chatbot id): the drift items counted (acknowledged ones are
    not), the plan's unreadable changes, the unmanageable records."""
    found: dict[str, list[tuple[tuple[int, str, str], Any]]] = {}

    def add(chatbot_id: str, drift_class: str, resource: str, path: str, make: Any) -> None:
        key = (ORDER.index(drift_class), resource, path)
        found.setdefault(chatbot_id, []).append((key, make))

    for item in report.counted:
        add(item.bot.chatbot_id, item.drift_class, item.resource, item.path, item)
    for bot, change in plan.changes():
        if change.confidence == "unknown" and change.action != "reassert":
            add(bot.chatbot_id, "unreadable", change.resource, change.path, (change, None))
    for record in report.unmanageable:
        name = record.name or "(no name)"
        add(record.bot.chatbot_id, "unmanageable", ATTRIBUTES.name, name, (None, record.reason))
    result: dict[str, BotDiff] = {}
    for chatbot_id, entries in found.items():
        entries.sort(key=lambda pair: pair[0])
        kept = [_made(key, made, redact) for key, made in entries[:limit]]
        result[chatbot_id] = BotDiff(tuple(kept), max(0, len(entries) - limit))
    return result


def _made(key: tuple[int, str, str], made: Any, redact: Callable[[str], str]) -> dict[str, Any]:
    """An entry, built only for the entries kept (a large fleet's drift is not rendered whole
    to be cut)."""
    if isinstance(made, DriftItem):
        return _entry(made, redact)
    change, reason = made
    entry: dict[str, Any] = {"class": ORDER[key[0]], "resource": key[1], "path": key[2]}
    if change is not None:
        entry["action"] = change.action
        entry["confidence"] = change.confidence
        entry["live"] = None
        entry["desired"] = shown(change.after, redact)
    else:
        entry["reason"] = redact(str(reason))
    return entry
