"""Usage in the plan: how many contacts carry a value for an attribute the plan archives,
renames or cannot change the type of, and the refusal to retire values by accident.

Pure: the counting itself is a read (``resources.contacts.count_values``, driven by
``pipeline.flows``); here are what to count, the counts put into the plan's changes, and
the rule: an archive of an attribute that contacts carry values for needs
``--allow-archive-with-values`` or the attribute's own ``archiveWithValues: true``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from botctl import lint
from botctl.defaults import DEFAULT_MAX_CONTACT_READS
from botctl.errors import PlanError
from botctl.models import Desired, Live
from botctl.plan import BotRef, Change, Operation, Plan
from botctl.resources.contacts import Usage
from botctl.resources.registry import kinds


@dataclass(frozen=True)
class ContactPolicy:
    """``max_reads``: the run-wide cap on contacts read to count (None: no cap);
    ``allow_archive_with_values``: ``--allow-archive-with-values``."""

    max_reads: int | None = DEFAULT_MAX_CONTACT_READS
    allow_archive_with_values: bool = False


def counted_name(change: Change) -> str:
    """The attribute whose values a change retires or moves (a rename: the old one)."""
    if change.action == "rename" and isinstance(change.before, dict):
        return str(change.before.get("name"))
    return change.path


def wanted(plan: Plan) -> dict[str, tuple[BotRef, list[str]]]:
    """Per chatbot (by id), the attributes the plan archives or renames: counted once each."""
    found: dict[str, tuple[BotRef, list[str]]] = {}
    for bot, change in plan.changes():
        if change.carries_contacts:
            names = found.setdefault(bot.chatbot_id, (bot, []))[1]
            if counted_name(change) not in names:
                names.append(counted_name(change))
    return found


def type_changes(desired: Desired, live: Live) -> dict[str, tuple[BotRef, list[str]]]:
    """Per chatbot, what each kind declares in a form the service cannot be changed to (an
    attribute's type: ``ResourceKind.stranded``): the plan refuses them, and the counts tell
    what the declaration would strand."""
    found: dict[str, tuple[BotRef, list[str]]] = {}
    for bot in desired.bots:
        held = live.bots.get(bot.chatbot_id)
        names = [name for kind in kinds() for name in kind.stranded(bot, held)]
        if names:
            found[bot.chatbot_id] = (bot.ref, names)
    return found


def annotate(plan: Plan, usages: Mapping[str, Usage]) -> Plan:
    """The plan with each archive's and rename's count (or why it is unknown), and a warning
    for each chatbot whose counts are unknown."""
    if not usages:
        return plan
    warned: list[str] = []
    operations = []
    for op in plan.operations:
        usage = usages.get(op.bot.chatbot_id)
        if usage is None or not any(c.carries_contacts for c in op.changes):
            operations.append(op)
            continue
        operations.append(_counted(op, usage))
        if usage.counts is None and op.bot.chatbot_id not in warned:
            warned.append(op.bot.chatbot_id)
    warnings = [
        lint.coded(
            lint.CONTACTS_NOT_COUNTED,
            f"{bot.name}: contacts carrying values for the attributes it archives or renames "
            f"are unknown ({usages[bot.chatbot_id].note})",
        )
        for bot in plan.bots
        if bot.chatbot_id in warned
    ]
    return replace(plan, operations=tuple(operations), warnings=(*plan.warnings, *warnings))


def _counted(op: Operation, usage: Usage) -> Operation:
    """The operation with its changes' counts, and a rename's contacts' requests (pages
    read, updates at most: ``Plan.requests``)."""
    changes = []
    for change in op.changes:
        if not change.carries_contacts:
            changes.append(change)
        elif usage.counts is None:
            changes.append(replace(change, contacts_with_value=None, contacts_note=usage.note))
        else:
            count = usage.counts.get(counted_name(change), 0)
            changes.append(replace(change, contacts_with_value=count, contacts_note=""))
        if change.action == "rename" and (moved := usage.migration_requests(counted_name(change))):
            op = replace(op, contact_reads=moved[0], contact_updates=moved[1])
    return replace(op, changes=tuple(changes))


def refuse_archives(plan: Plan, desired: Desired | None, policy: ContactPolicy) -> None:
    """Raise ``PlanError`` naming every archive of an attribute that contacts carry values
    for, unless allowed run-wide or by the attribute's ``archiveWithValues: true``."""
    if policy.allow_archive_with_values:
        return
    consent = {
        (bot.chatbot_id, kind.name, path)
        for bot in (desired.bots if desired is not None else ())
        for kind in kinds()
        for path in kind.archive_consent(bot)
    }
    refused = [
        f"  - {bot.name}: archive {change.resource} {change.path} "
        f"({contacts_phrase(change.contacts_with_value or 0)})"
        for bot, change in plan.changes()
        if change.action == "archive"
        and (change.contacts_with_value or 0) > 0
        and (bot.chatbot_id, change.resource, change.path) not in consent
    ]
    if refused:
        raise PlanError(
            "the plan archives attributes that contacts carry values for (an archived "
            "attribute keeps them read-only: no contact can be given a new value):\n"
            + "\n".join(refused)
            + "\nIf that is intended, pass --allow-archive-with-values, or set "
            "archiveWithValues: true on the attribute; to keep the values under another name, "
            "declare it with renamedFrom."
        )


def contacts_phrase(count: int) -> str:
    """``1,204 contacts carry a value`` (one contact carries ...)."""
    if count == 1:
        return "1 contact carries a value"
    return f"{count:,} contacts carry a value"


def usage_text(change: Change) -> str:
    """What a plan line says of a change's contacts: the count, or that it is unknown."""
    if not change.carries_contacts:
        return ""
    if change.contacts_with_value is None:
        return "contacts carrying a value: unknown" + (
            f", {change.contacts_note}" if change.contacts_note else ""
        )
    return contacts_phrase(change.contacts_with_value)


def type_change_lines(
    found: Mapping[str, tuple[BotRef, list[str]]], usages: Mapping[str, Usage]
) -> list[str]:
    """For the refused type changes: what each would strand."""
    lines = []
    for chatbot_id, (bot, names) in found.items():
        usage = usages.get(chatbot_id)
        for name in names:
            if usage is None or usage.counts is None:
                note = usage.note if usage is not None else "not counted"
                lines.append(f"  - {bot.name}: attribute {name!r}: contacts unknown ({note})")
            else:
                lines.append(
                    f"  - {bot.name}: attribute {name!r}: {contacts_phrase(usage.counts[name])}"
                    " (rename it with renamedFrom to keep them)"
                )
    return lines
