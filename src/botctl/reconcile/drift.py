"""Drift: how the service, the configuration and botctl's record (what it last applied or
verified) disagree, value by value.

Drift is computed from the very plan ``botctl plan`` makes, so the two always agree: every
change of that plan whose current value is known is classified by the record of it:

=================  ===================================================================
class              meaning
=================  ===================================================================
changed outside    the service moved away from the recorded value (a dashboard edit)
pending            the configuration moved from the recorded value; the service still holds
                   it (a merge not yet applied); also a change botctl can only assume
conflict           both moved
unknown origin     the service differs from the configuration and nothing is recorded to
                   tell who moved (adopt with ``botctl refresh`` once they agree)
missing            the service no longer lists a chatbot of the configuration
unmanaged          a live item (an attribute) botctl never managed, the configuration does
                   not declare
=================  ===================================================================

A value whose current value cannot be read and whose record matches the configuration is
in sync as far as anyone can tell (it is counted as unverified). Chatbots an account lists
that no document declares are reported, never counted: they are not botctl's.

Read-only and pure: it takes what was read and never writes state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from botctl.models import BotRecord, BotSpec, Desired, Live, State
from botctl.plan import (
    OUTPUT_FORMAT_VERSION,
    BotRef,
    Change,
    ItemChange,
    Resource,
    Scope,
    Unmanageable,
    bot_document,
    change_document,
    detail_documents,
    unmanageable_document,
)
from botctl.reconcile.detail import item_changes
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.sealed import recorded_view
from botctl.resources.kind import Basis
from botctl.resources.registry import kind_of
from botctl.sealing import mask_beside
from botctl.store.acknowledgements import Acknowledgement
from botctl.values import JsonValue, mask_secrets, same_value

DriftClass = Literal[
    "changed_outside", "pending", "conflict", "unknown_origin", "missing", "unmanaged"
]
CLASSES: tuple[DriftClass, ...] = (
    "changed_outside",
    "pending",
    "conflict",
    "unknown_origin",
    "missing",
    "unmanaged",
)


@dataclass(frozen=True)
class DriftItem:
    """One managed value (or chatbot, or unmanaged attribute) that is not in sync."""

    bot: BotRef
    drift_class: DriftClass
    resource: Resource | Literal["chatbot"]
    path: str  # settings leaf, attribute name (the kind's path), or the chatbot id for "missing"
    live: JsonValue = None  # what the service holds now (masked); None: absent or unknown
    desired: JsonValue = None  # what the configuration declares (masked)
    last_applied: JsonValue = None  # what the state records (masked)
    basis: Basis | None = None  # how the recorded value is known
    change: Change | None = None  # the plan's change, for pending items
    detail: tuple[ItemChange, ...] = ()  # items of a list setting that moved

    @property
    def key(self) -> tuple[str, str, str]:
        """What an acknowledgement names: chatbot, resource, path."""
        return (self.bot.chatbot_id, self.resource, self.path)

    def to_document(self) -> dict[str, Any]:
        if self.drift_class == "pending" and self.change is not None:
            return change_document(self.bot, self.change)
        if self.drift_class == "missing":
            return bot_document(self.bot)
        document: dict[str, Any] = {
            "chatbotId": self.bot.chatbot_id,
            "bot": self.bot.name,
            "resource": self.resource,
            "key": self.path,
        }
        if self.drift_class in ("changed_outside", "conflict"):
            document["last_applied"] = self.last_applied
            document["basis"] = self.basis
        document["live"] = self.live
        if self.drift_class in ("conflict", "unknown_origin"):
            document["desired"] = self.desired
        if self.detail:
            document["detail"] = detail_documents(self.detail)
        return document


@dataclass(frozen=True)
class UnmanagedChatbot:
    chatbot_id: str
    name: str
    api_key_env: str


@dataclass(frozen=True)
class DriftReport:
    items: tuple[DriftItem, ...]  # every item not in sync, acknowledged ones included
    unverified: int
    bots: tuple[BotRef, ...]
    unmanaged_chatbots: tuple[UnmanagedChatbot, ...] = ()
    # Live attribute records outside the contract's rules: reported, never drift botctl can
    # act on (not counted).
    unmanageable: tuple[Unmanageable, ...] = ()
    acknowledged: frozenset[tuple[str, str, str]] = frozenset()  # item keys skipped
    expired: tuple[DriftItem, ...] = ()  # items whose acknowledgement has expired
    warnings: tuple[str, ...] = field(default=())
    scope: Scope | None = None  # --changed-since: the chatbots checked, and why

    def of(self, drift_class: DriftClass) -> tuple[DriftItem, ...]:
        return tuple(i for i in self.counted if i.drift_class == drift_class)

    @property
    def counted(self) -> tuple[DriftItem, ...]:
        return tuple(i for i in self.items if i.key not in self.acknowledged)

    @property
    def has_drift(self) -> bool:
        return bool(self.counted)

    def summary(self) -> dict[str, int]:
        counts: dict[str, int] = {
            ("conflicts" if name == "conflict" else name): len(self.of(name)) for name in CLASSES
        }
        counts["unverified"] = self.unverified
        counts["unmanaged_chatbots"] = len(self.unmanaged_chatbots)
        counts["unmanageable"] = len(self.unmanageable)
        counts["acknowledged"] = len(self.items) - len(self.counted)
        counts["expired_acknowledgements"] = len(self.expired)
        return counts

    def to_document(self) -> dict[str, Any]:
        """The published JSON contract of ``botctl drift --format json``."""
        docs = {name: [i.to_document() for i in self.of(name)] for name in CLASSES}
        return {
            "format_version": OUTPUT_FORMAT_VERSION,
            "drift": self.has_drift,
            "changed_outside": docs["changed_outside"],
            "pending": docs["pending"],
            "conflicts": docs["conflict"],
            "unknown_origin": docs["unknown_origin"],
            "missing": docs["missing"],
            "unmanaged": [unmanaged_document_of(i) for i in self.of("unmanaged")],
            "unmanageable": [unmanageable_document(u) for u in self.unmanageable],
            "unmanaged_chatbots": [
                {"chatbotId": c.chatbot_id, "name": c.name, "apiKeyEnv": c.api_key_env}
                for c in self.unmanaged_chatbots
            ],
            "acknowledged": [
                {
                    "chatbotId": i.bot.chatbot_id,
                    "bot": i.bot.name,
                    "resource": i.resource,
                    "key": i.path,
                    "class": i.drift_class,
                }
                for i in self.items
                if i.key in self.acknowledged
            ],
            "expired_acknowledgements": [
                {
                    "chatbotId": i.bot.chatbot_id,
                    "bot": i.bot.name,
                    "resource": i.resource,
                    "key": i.path,
                }
                for i in self.expired
            ],
            "summary": self.summary(),
            "warnings": list(self.warnings),
            **({"scope": self.scope.to_document()} if self.scope is not None else {}),
        }


def unmanaged_document_of(item: DriftItem) -> dict[str, Any]:
    return {"chatbotId": item.bot.chatbot_id, "bot": item.bot.name, "name": item.path}


def compute_drift(desired: Desired, live: Live, state: State) -> DriftReport:
    plan = compute_plan(desired, live, state)
    specs = {bot.chatbot_id: bot for bot in desired.bots}
    items: list[DriftItem] = [
        DriftItem(bot, "missing", "chatbot", bot.chatbot_id) for bot in plan.missing
    ]
    for bot, change in plan.changes():
        spec = specs[bot.chatbot_id]
        seen = live.bots.get(bot.chatbot_id)
        record = recorded_view(
            state.record_for(bot.chatbot_id), spec, seen, state.known_fingerprint_key()
        )
        item = _classify(spec, change, live, record)
        if item is not None:
            items.append(item)
    items += [
        DriftItem(
            u.bot,
            "unmanaged",
            u.resource,
            u.name,
            live=mask_secrets(
                kind_of(u.resource).unmanaged_value(live.bots.get(u.bot.chatbot_id), u.name),
                specs[u.bot.chatbot_id].secret_values,
            ),
        )
        for u in plan.unmanaged
    ]
    return DriftReport(
        items=tuple(sorted(items, key=_order)),
        unverified=plan.unverified,
        bots=plan.bots,
        unmanaged_chatbots=_unmanaged_chatbots(desired, live),
        unmanageable=plan.unmanageable,
        warnings=plan.warnings,
    )


def _order(item: DriftItem) -> tuple[str, int, str, str]:
    return (item.bot.name, CLASSES.index(item.drift_class), item.resource, item.path)


def _classify(
    spec: BotSpec, change: Change, live: Live, record: BotRecord | None
) -> DriftItem | None:
    bot = spec.ref
    if change.action == "reassert" or change.confidence == "unknown":
        return None  # nothing known to compare: counted as unverified
    if change.confidence == "assumed":
        return DriftItem(
            bot,
            "pending",
            change.resource,
            change.path,
            change=change,
            last_applied=change.before,
            desired=change.after,
            basis="sent",
        )
    kind, seen = kind_of(change.resource), live.bots[spec.chatbot_id]
    now, want, recorded, basis = kind.drift_values(spec, change, seen, record)
    shown_now, shown_want, shown_recorded = kind.drift_shown(spec, change, seen, record)
    # Wholly masked where the configuration holds a secret: a value read or recorded there
    # may hold another one (rotated since), which masking by value cannot know.
    secrets = spec.secret_values
    masked = [
        mask_beside(shown_now, shown_want, secrets),
        mask_secrets(shown_want, secrets),
        mask_beside(shown_recorded, shown_want, secrets),
    ]
    if basis is None:
        # Nothing recorded. An attribute that does not exist was declared since: attributes
        # are never deleted, so the configuration moved (a rename too: it declares a new
        # attribute). Any other value: nobody can tell.
        if change.action in ("create", "rename"):
            return DriftItem(bot, "pending", change.resource, change.path, change=change)
        return DriftItem(
            bot, "unknown_origin", change.resource, change.path, live=masked[0], desired=masked[1]
        )
    if same_value(recorded, now):
        return DriftItem(
            bot,
            "pending",
            change.resource,
            change.path,
            change=change,
            last_applied=masked[2],
            basis=basis,
        )
    drift_class: DriftClass = "changed_outside" if same_value(recorded, want) else "conflict"
    # Which items of a list setting moved since it was recorded (only these classes show it).
    detail = item_changes(masked[2], masked[0]) if kind.item_detail else ()
    return DriftItem(
        bot,
        drift_class,
        change.resource,
        change.path,
        live=masked[0],
        desired=masked[1],
        last_applied=masked[2],
        basis=basis,
        detail=detail,
    )


def _unmanaged_chatbots(desired: Desired, live: Live) -> tuple[UnmanagedChatbot, ...]:
    declared = desired.declared_ids | {bot.chatbot_id for bot in desired.bots}
    found: dict[str, UnmanagedChatbot] = {}
    for env, listing in live.listed.items():
        for chatbot_id, name in listing.items():
            if chatbot_id not in declared:
                found.setdefault(chatbot_id, UnmanagedChatbot(chatbot_id, name, env))
    return tuple(sorted(found.values(), key=lambda c: (c.api_key_env, c.chatbot_id)))


def acknowledge(
    report: DriftReport, entries: Iterable[Acknowledgement], now: datetime
) -> DriftReport:
    """The report with the items an unexpired acknowledgement of the same live value covers
    left uncounted; items whose acknowledgement has expired are listed as such."""
    by_key = {entry.key: entry for entry in entries}
    skipped: set[tuple[str, str, str]] = set()
    expired = []
    for item in report.items:
        entry = by_key.get(item.key)
        if entry is None or not same_value(entry.live, item.live):
            continue
        if entry.until > now:
            skipped.add(item.key)
        else:
            expired.append(item)
    return DriftReport(
        items=report.items,
        unverified=report.unverified,
        bots=report.bots,
        unmanaged_chatbots=report.unmanaged_chatbots,
        unmanageable=report.unmanageable,
        acknowledged=frozenset(skipped),
        expired=tuple(expired),
        warnings=report.warnings,
        scope=report.scope,
    )


def acknowledgements_for(report: DriftReport, until: datetime) -> list[Acknowledgement]:
    """Every drift item of ``report``, accepted until ``until``."""
    return [
        Acknowledgement(i.bot.chatbot_id, i.resource, i.path, i.live, until) for i in report.items
    ]
