"""What ``apply --test --rollback-on-failure`` sends back: the settings a chatbot had before
the apply, for the chatbots whose conversation tests failed.

A previous value is known when the plan read it from the service (verified) or, failing that,
the state recorded it (assumed), as the diff knew it. A top-level field is restored whole (as
apply sends it): only when every leaf the apply sent under it has a known previous value.
Otherwise the field is *not restorable* and named with the reason: a value botctl never knew,
or one the state keeps only as a fingerprint (a secret). Only settings are rolled back (the
settings kind's operations, ``resources.settings.KIND``): attributes, and any other kind, are
never: an archive or a new attribute is not undone behind a reviewer's back; the report says so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from botctl.models import Live, State
from botctl.plan import BotRef, Change, Operation, Plan
from botctl.reconcile.apply import ApplyReport
from botctl.resources.settings import KIND as SETTINGS
from botctl.sealing import Sealed
from botctl.values import JsonValue, flatten, unflatten


@dataclass(frozen=True)
class Previous:
    """One chatbot's settings leaves before the apply, by dotted path (read from the service,
    else as the state recorded them); ``sealed``: the leaves recorded only as a secret's
    fingerprint, whose value is not held."""

    values: dict[str, JsonValue]
    sealed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class NotRestorable:
    bot: BotRef
    field: str
    why: str


@dataclass(frozen=True)
class Rollback:
    operations: tuple[Operation, ...] = ()
    not_restorable: tuple[NotRestorable, ...] = ()
    # Attribute operations applied to the chatbots rolled back: never undone, named.
    attributes_kept: tuple[Operation, ...] = ()


def previous_settings(plan: Plan, live: Live, state: State) -> dict[str, Previous]:
    """Before the apply, for each chatbot the plan updates settings of: what was known of
    its settings, from the service first, then from the state."""
    found: dict[str, Previous] = {}
    for op in plan.operations:
        if op.resource != SETTINGS.name:
            continue
        chatbot_id = op.bot.chatbot_id
        values: dict[str, JsonValue] = {}
        sealed: set[str] = set()
        record = state.record_for(chatbot_id)
        if record is not None:
            values.update(record.settings.leaves)
            sealed.update(record.sealed_settings)
        observed = live.bots.get(chatbot_id)
        if observed is not None and observed.settings is not None:
            read = observed.settings.leaves
            values.update(read)
            sealed.difference_update(read)
        found[chatbot_id] = Previous(values, frozenset(sealed))
    return found


def plan_rollback(
    report: ApplyReport, failed: Iterable[str], previous: Mapping[str, Previous]
) -> Rollback:
    """The requests that put back the settings the apply changed on the chatbots of
    ``failed`` (chatbot ids), and what cannot be put back."""
    failed = set(failed)
    operations: list[Operation] = []
    missing: list[NotRestorable] = []
    kept: list[Operation] = []
    for result in report.results:
        op = result.operation
        if result.status != "applied" or op.bot.chatbot_id not in failed:
            continue
        if op.resource != SETTINGS.name:
            kept.append(op)
            continue
        before = previous.get(op.bot.chatbot_id, Previous({}))
        body: dict[str, JsonValue] = {}
        changes: list[Change] = []
        for field_name, sent in sorted(op.body.items()):
            restored, why = _restore(field_name, sent, before)
            if why is not None:
                missing.append(NotRestorable(op.bot, field_name, why))
                continue
            body[field_name] = restored
            changes.append(Change(op.resource, field_name, "update", sent, restored, "verified"))
        if body:
            operations.append(Operation(op.bot, op.kind, op.subject, body, body, tuple(changes)))
    return Rollback(tuple(operations), tuple(missing), tuple(kept))


def _restore(name: str, sent: JsonValue, before: Previous) -> tuple[JsonValue, str | None]:
    """The previous value of the top-level field ``name`` (sent as ``sent``), or why not."""
    for path in flatten({name: sent}):
        if path in before.sealed or isinstance(before.values.get(path), Sealed):
            return None, "held a secret: botctl keeps only its fingerprint"
        if path not in before.values:
            return None, "its previous value was never read nor recorded by botctl"
    # A nested object is sent whole: the whole previous object, as far as it was known.
    known = {
        path: value
        for path, value in before.values.items()
        if path == name or path.startswith(name + ".")
    }
    if any(isinstance(value, Sealed) for value in known.values()):
        return None, "held a secret: botctl keeps only its fingerprint"
    return unflatten(known)[name], None
