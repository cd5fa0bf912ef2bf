"""What ``apply --test --rollback-on-failure`` sends back: what a chatbot had before the apply,
for the chatbots whose conversation tests failed.

Each kind says what it knew before the apply and how to put it back (``ResourceKind.previous``
and ``restore``): for settings, a previous value is known when the plan read it from the
service (verified) or, failing that, the state recorded it (assumed), as the diff knew it; a
top-level field is restored whole (as apply sends it), only when every leaf the apply sent
under it has a known previous value; otherwise it is *not restorable* and named with the
reason (a value botctl never knew, or one the state keeps only as a fingerprint). A kind that
knows nothing to restore (``previous`` None: attributes) is never rolled back: an archive or a
new attribute is not undone behind a reviewer's back; the report names its changes as kept.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from botctl.models import Live, State
from botctl.plan import BotRef, Operation, Plan
from botctl.reconcile.apply import ApplyReport
from botctl.resources.registry import kind_of

# What each kind knew of a chatbot before the apply, by (chatbot id, kind name).
Before = Mapping[tuple[str, str], Any]


@dataclass(frozen=True)
class NotRestorable:
    bot: BotRef
    field: str
    why: str
    resource: str = ""  # the kind whose value it is (``Change.resource``)


@dataclass(frozen=True)
class Rollback:
    operations: tuple[Operation, ...] = ()
    not_restorable: tuple[NotRestorable, ...] = ()
    # Operations applied to the chatbots rolled back, of kinds never rolled back: named.
    kept: tuple[Operation, ...] = ()


def previous_values(plan: Plan, live: Live, state: State) -> dict[tuple[str, str], Any]:
    """Before the apply, for each chatbot and kind the plan writes to: what the kind knew
    (``ResourceKind.previous``: from the service first, then from the state); None for a
    kind never rolled back."""
    found: dict[tuple[str, str], Any] = {}
    for op in plan.operations:
        key = (op.bot.chatbot_id, op.resource)
        if key not in found:
            found[key] = kind_of(op.resource).previous(
                live.bots.get(op.bot.chatbot_id), state.record_for(op.bot.chatbot_id)
            )
    return found


def plan_rollback(report: ApplyReport, failed: Iterable[str], previous: Before) -> Rollback:
    """The requests that put back what the apply changed on the chatbots of ``failed``
    (chatbot ids), and what cannot be put back."""
    failed = set(failed)
    operations: list[Operation] = []
    missing: list[NotRestorable] = []
    kept: list[Operation] = []
    for result in report.results:
        op = result.operation
        if result.status != "applied" or op.bot.chatbot_id not in failed:
            continue
        before = previous.get((op.bot.chatbot_id, op.resource))
        if before is None:
            kept.append(op)
            continue
        restored, unknown = kind_of(op.resource).restore(op, before)
        missing += [NotRestorable(op.bot, name, why, op.resource) for name, why in unknown]
        if restored is not None:
            operations.append(restored)
    return Rollback(tuple(operations), tuple(missing), tuple(kept))
