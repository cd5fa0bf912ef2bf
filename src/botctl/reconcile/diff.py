"""Desired + Live + last-applied State -> Plan. Pure: no I/O, deterministic.

Each resource kind of the registry (``resources.registry``) plans its own slice of every
chatbot; this module walks the chatbots, hands each kind the chatbot's parts, adds
item-level detail for reviewers, and checks the safety caps.
"""

from __future__ import annotations

from dataclasses import replace

from botctl.errors import ImpossibleChangeError, PlanError
from botctl.models import BotSpec, Desired, Live, LiveBot, State
from botctl.plan import Change, Operation, Plan
from botctl.reconcile.detail import has_items, item_changes
from botctl.reconcile.freshness import state_premises
from botctl.reconcile.safety import SafetyPolicy, safety_violations
from botctl.reconcile.sealed import recorded_view
from botctl.resources.base import BotPlan
from botctl.resources.registry import kind_of, kinds
from botctl.sealing import FingerprintKey


def compute_plan(
    desired: Desired,
    live: Live,
    state: State,
    policy: SafetyPolicy | None = None,
    *,
    reassert: bool = False,
) -> Plan:
    """The plan that makes the service match ``desired``; raises ImpossibleChangeError listing
    every change the API cannot make (an attribute's type). A chatbot the service does not
    list is in ``Plan.missing`` and the others are planned as usual. Safety caps the plan
    exceeds are recorded in ``Plan.violations`` (the caller refuses it)."""
    parts = [
        plan_bot(bot, live.bots.get(bot.chatbot_id), state, reassert=reassert)
        for bot in desired.bots
    ]
    problems = [
        f"{bot.name} ({bot.source}): {problem}"
        for bot, part in zip(desired.bots, parts, strict=True)
        for problem in part.problems
    ]
    if problems:
        raise ImpossibleChangeError(
            "the plan cannot be made:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    # A saved plan relies on what it knew of the chatbots it writes to, and nothing else: an
    # edit to another chatbot (on the service, or recorded by another apply) leaves it true.
    written = {op.bot.chatbot_id for part in parts for op in part.operations}
    plan = Plan(
        operations=tuple(_with_detail(op) for part in parts for op in part.operations),
        unmanaged=tuple(u for part in parts for u in part.unmanaged),
        unmanageable=tuple(u for part in parts for u in part.unmanageable),
        unverified=sum(part.unverified for part in parts),
        depends_on=(
            *(d for part in parts for d in part.depends_on if d.chatbot_id in written),
            *(
                premise
                for bot in desired.bots
                if bot.chatbot_id in written
                for premise in state_premises(
                    bot, live.bots.get(bot.chatbot_id), state.record_for(bot.chatbot_id)
                )
            ),
        ),
        state_serial=state.serial if state.lineage else None,
        state_lineage=state.lineage,
        fingerprints=_plan_key(state),
        state_key=state.state_key,
        warnings=(*desired.warnings, *(w for part in parts for w in part.warnings)),
        bots=tuple(bot.ref for bot in desired.bots),
        secrets=frozenset(secret for bot in desired.bots for secret in bot.secrets),
        missing=tuple(
            bot.ref for bot, part in zip(desired.bots, parts, strict=True) if part.missing
        ),
    )
    violations = safety_violations(
        plan,
        {bot.name: part.active_attributes for bot, part in zip(desired.bots, parts, strict=True)},
        policy or SafetyPolicy(),
        {b.name: b.max_archive_percent for b in desired.bots if b.max_archive_percent is not None},
    )
    return replace(plan, violations=violations) if violations else plan


PLANNED_AS_USUAL = "the other chatbots were planned as usual"
NOTHING_APPLIED = "nothing was applied (--skip-missing applies the others)"
SKIPPED = "the others are applied as usual (--skip-missing)"


def missing_error(plan: Plan, then: str = PLANNED_AS_USUAL) -> PlanError | None:
    """The error a plan with chatbots the service does not list makes: the first thing a
    command says of it (``then``: what becomes of the others)."""
    if not plan.missing:
        return None
    lines = [
        f"{bot.name}: chatbot {bot.chatbot_id} does not exist in the account of "
        f"${bot.api_key_env} (the chatbot list does not contain it)"
        for bot in plan.missing
    ]
    return PlanError("\n".join(lines) + f"\nFix its chatbotId or remove its document; {then}.")


def _plan_key(state: State) -> FingerprintKey | None:
    """The key of the fingerprints of the state the plan is made against (a plan file's
    fingerprints then use it), when the state has a salt and its key is known."""
    return state.known_fingerprint_key() if state.lineage is not None else None


def plan_bot(bot: BotSpec, live: LiveBot | None, state: State, *, reassert: bool) -> BotPlan:
    """One chatbot's part of the plan: each resource kind plans its own slice."""
    out = BotPlan()
    if live is not None and not live.exists:
        out.missing = True
        return out
    record = recorded_view(
        state.record_for(bot.chatbot_id), bot, live, state.known_fingerprint_key()
    )
    ref, secrets = bot.ref, bot.secret_values
    for kind in kinds():
        kind.plan(ref, bot, live, record, secrets=secrets, reassert=reassert, out=out)
    return out


def _with_detail(op: Operation) -> Operation:
    """Item-level detail on changes between two known lists (greetings, domains) of the kinds
    that show it; only those pay for it. An attribute's detail is its fields, which renderers
    show."""
    if not kind_of(op.resource).item_detail or not any(_detailed(c) for c in op.changes):
        return op
    changes = tuple(
        replace(c, detail=item_changes(c.before, c.after)) if _detailed(c) else c
        for c in op.changes
    )
    return replace(op, changes=changes)


def _detailed(change: Change) -> bool:
    return change.confidence != "unknown" and has_items(change.before, change.after)
