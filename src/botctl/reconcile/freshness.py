"""Before and after writing: is a saved plan still true of the world, and did the service keep
what was sent? Pure: both take what was read."""

from __future__ import annotations

from botctl.errors import StalePlanError
from botctl.models import Live
from botctl.plan import Dependency, Plan
from botctl.reconcile.apply import ApplyReport
from botctl.resources import attributes, settings
from botctl.values import JsonValue, mask_secrets_in_text, same_value


def check_fresh(plan: Plan, live: Live, serial: int | None, lineage: str | None) -> None:
    """Refuse a saved plan whose premises moved: the state, or any verified live value."""
    if plan.state_lineage is not None and lineage != plan.state_lineage:
        raise StalePlanError(
            "the plan was made against another state lineage (a different or recreated state "
            "file); make a new plan"
        )
    if plan.state_serial != serial:
        raise StalePlanError(
            f"the state changed since the plan was made (serial {plan.state_serial} -> "
            f"{serial}): another apply ran; make a new plan"
        )
    moved = []
    for dep in plan.depends_on:
        now = current_value(dep, live)
        if not same_value(now, dep.value):
            moved.append(f"{dep.chatbot_id} {dep.resource} {dep.path}: {dep.value!r} -> {now!r}")
    moved = [mask_secrets_in_text(line, plan.secrets) for line in moved]
    if moved:
        raise StalePlanError(
            "the service changed since the plan was made; nothing was written. Moved:\n"
            + "\n".join(f"  - {m}" for m in moved)
            + "\nMake a new plan and review it again."
        )


def current_value(dep: Dependency, live: Live) -> JsonValue:
    """What the service holds now for the value a plan relied on (None: absent)."""
    bot = live.bots.get(dep.chatbot_id)
    if bot is None:
        return None
    if dep.resource == "settings":
        return bot.settings.leaves.get(dep.path) if bot.settings is not None else None
    attribute = bot.attributes.get(dep.path) if bot.attributes is not None else None
    return attribute.to_json() if attribute is not None else None


def verify_applied(
    report: ApplyReport, live: Live, secrets: frozenset[str] = frozenset()
) -> list[str]:
    """After writing, compare what can be read back with what was sent; a note quotes both,
    with every ``secrets`` value masked."""
    notes = []
    for result in report.results:
        op = result.operation
        bot = live.bots.get(op.bot.chatbot_id)
        if result.status != "applied" or bot is None:
            continue
        if op.resource == "settings" and bot.settings is not None:
            notes += settings.read_back_notes(op, bot.settings)
        elif op.resource == "attribute" and bot.attributes is not None:
            notes += attributes.read_back_notes(op, bot.attributes)
    return [mask_secrets_in_text(note, secrets) for note in notes]
