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

from botctl.diff import compute_plan, same_value
from botctl.masking import mask_secrets
from botctl.models import BotSpec, Desired, JsonValue, Live, LiveBot, flatten
from botctl.plan import BotRef, Change, Unmanaged, change_to_dict
from botctl.state import BotRecord, State


@dataclass(frozen=True)
class OutsideChange:
    chatbot_id: str
    bot: str
    resource: str  # "settings" | "attribute"
    key: str
    last_applied: JsonValue
    live: JsonValue

    def to_dict(self) -> dict[str, Any]:
        return {
            "chatbotId": self.chatbot_id,
            "bot": self.bot,
            "resource": self.resource,
            "key": self.key,
            "last_applied": self.last_applied,
            "live": self.live,
        }


@dataclass(frozen=True)
class DriftReport:
    changed_outside: tuple[OutsideChange, ...]
    pending: tuple[Change, ...]
    unmanaged: tuple[Unmanaged, ...]
    unverified: int
    bots: tuple[BotRef, ...]

    @property
    def has_drift(self) -> bool:
        return bool(self.changed_outside or self.pending or self.unmanaged)

    def summary(self) -> dict[str, int]:
        return {
            "changed_outside": len(self.changed_outside),
            "pending": len(self.pending),
            "unmanaged": len(self.unmanaged),
            "unverified": self.unverified,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": 1,
            "drift": self.has_drift,
            "changed_outside": [c.to_dict() for c in self.changed_outside],
            "pending": [change_to_dict(c) for c in self.pending],
            "unmanaged": [
                {"chatbotId": u.chatbot_id, "bot": u.bot, "name": u.name} for u in self.unmanaged
            ],
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
        changed_outside=tuple(sorted(outside, key=lambda c: (c.bot, c.resource, c.key))),
        pending=pending.changes,
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
    declared = flatten(bot.settings.to_json())
    if live.settings_readable:
        observed = flatten(live.settings)
        for key, last in flatten(record.settings).items():
            if key in declared and key in observed and not same_value(observed[key], last):
                found.append(_outside(bot, "settings", key, last, observed[key]))
    if live.attributes is not None:
        for name, last_attr in record.attributes.items():
            live_attr = live.attributes.get(name)
            now = live_attr.to_json() if live_attr is not None else None
            if now is None or any(not same_value(now.get(k), v) for k, v in last_attr.items()):
                found.append(_outside(bot, "attribute", name, last_attr, now))
    return found


def _outside(
    bot: BotSpec, resource: str, key: str, last: JsonValue, now: JsonValue
) -> OutsideChange:
    return OutsideChange(
        chatbot_id=bot.chatbot_id,
        bot=bot.name,
        resource=resource,
        key=key,
        last_applied=mask_secrets(last, bot.secret_values),
        live=mask_secrets(now, bot.secret_values),
    )
