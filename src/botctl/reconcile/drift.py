"""Drift: how the service, the YAML and botctl's record of what it last applied disagree.

* changed outside: a value read from the service now differs from what botctl last applied
  (someone edited the bot in the dashboard);
* pending: the YAML differs from what was last applied (a merge that was never applied);
* unmanaged: live attributes botctl never managed and the YAML does not declare;
* unverified: managed values the service does not let botctl read.

Read-only and pure: it takes what was read and never writes state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from botctl.models import BotRecord, BotSpec, Desired, Live, LiveBot, State
from botctl.plan import (
    OUTPUT_FORMAT_VERSION,
    BotRef,
    ItemChange,
    Operation,
    Resource,
    Unmanaged,
    change_document,
    detail_documents,
    unmanaged_document,
)
from botctl.reconcile.detail import item_changes
from botctl.reconcile.diff import compute_plan
from botctl.values import JsonValue, mask_secrets, same_value


@dataclass(frozen=True)
class OutsideChange:
    bot: BotRef
    resource: Resource
    path: str
    last_applied: JsonValue
    live: JsonValue
    detail: tuple[ItemChange, ...] = ()  # the items of a list setting that moved

    def to_document(self) -> dict[str, Any]:
        document = {
            "chatbotId": self.bot.chatbot_id,
            "bot": self.bot.name,
            "resource": self.resource,
            "key": self.path,
            "last_applied": self.last_applied,
            "live": self.live,
        }
        if self.detail:
            document["detail"] = detail_documents(self.detail)
        return document


@dataclass(frozen=True)
class DriftReport:
    changed_outside: tuple[OutsideChange, ...]
    pending: tuple[Operation, ...]
    unmanaged: tuple[Unmanaged, ...]
    unverified: int
    bots: tuple[BotRef, ...]

    @property
    def has_drift(self) -> bool:
        return bool(self.changed_outside or self.pending or self.unmanaged)

    def summary(self) -> dict[str, int]:
        return {
            "changed_outside": len(self.changed_outside),
            "pending": sum(len(op.changes) for op in self.pending),
            "unmanaged": len(self.unmanaged),
            "unverified": self.unverified,
        }

    def to_document(self) -> dict[str, Any]:
        """The published JSON contract of ``botctl drift --format json``."""
        return {
            "format_version": OUTPUT_FORMAT_VERSION,
            "drift": self.has_drift,
            "changed_outside": [c.to_document() for c in self.changed_outside],
            "pending": [change_document(op.bot, c) for op in self.pending for c in op.changes],
            "unmanaged": [unmanaged_document(u) for u in self.unmanaged],
            "summary": self.summary(),
        }


def compute_drift(desired: Desired, live: Live, state: State) -> DriftReport:
    # Pending is the plan botctl would make if the service were exactly as last applied.
    pending = compute_plan(desired, Live(), state)
    current = compute_plan(desired, live, state)
    outside = [
        change
        for bot in desired.bots
        for change in _outside_changes(
            bot, live.bots.get(bot.chatbot_id), state.record_for(bot.chatbot_id)
        )
    ]
    return DriftReport(
        changed_outside=tuple(sorted(outside, key=lambda c: (c.bot.name, c.resource, c.path))),
        pending=pending.operations,
        unmanaged=current.unmanaged,
        unverified=current.unverified,
        bots=current.bots,
    )


def _outside_changes(
    bot: BotSpec, live: LiveBot | None, record: BotRecord | None
) -> list[OutsideChange]:
    if live is None or record is None:
        return []
    found: list[OutsideChange] = []
    declared = bot.settings.leaves
    if live.settings is not None:
        observed = live.settings.leaves
        for path, last in record.settings.leaves.items():
            if path in declared and path in observed and not same_value(observed[path], last):
                found.append(_outside(bot, "settings", path, last, observed[path]))
    if live.attributes is not None:
        for name, recorded in record.attributes.items():
            last_applied = recorded.to_json()
            live_attribute = live.attributes.get(name)
            now = live_attribute.to_json() if live_attribute is not None else None
            if now is None or any(not same_value(now.get(k), v) for k, v in last_applied.items()):
                found.append(_outside(bot, "attribute", name, last_applied, now))
    return found


def _outside(
    bot: BotSpec, resource: Resource, path: str, last: JsonValue, now: JsonValue
) -> OutsideChange:
    last_applied = mask_secrets(last, bot.secret_values)
    live = mask_secrets(now, bot.secret_values)
    return OutsideChange(
        bot=bot.ref,
        resource=resource,
        path=path,
        last_applied=last_applied,
        live=live,
        detail=item_changes(last_applied, live) if resource == "settings" else (),
    )
