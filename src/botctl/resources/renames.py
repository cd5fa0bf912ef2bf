"""Renames of custom attributes: ``renamedFrom: old`` on a declared attribute.

The API cannot rename an attribute (its name is its identity), so a rename is one operation,
``migrate_attribute``, that creates the new attribute, moves every contact's value to it and
archives the old one (``resources.contacts.migrate``). Here it is planned:

| the service holds | planned |
|---|---|
| old (active), new missing | rename: create new, move the values, archive old |
| old (active), new too (created by an earlier run) | rename without the create |
| old archived, new missing | rename: create new, move the values (old stays archived) |
| old archived, new too, recorded unfinished | rename without create or archive: values left |
| old archived, new too | nothing: the rename is done; new is planned as any attribute |
| no old | a warning; new is planned as any attribute |

A type change is allowed only where each value converts exactly (to or from text), checked
value by value when the values move.

A run killed after its archive landed but before the state recorded it leaves a migration
recorded with the old attribute archived: that cannot tell botctl's own archive (every value
moved) from a person's (values left behind), so the rename is resumed; a finished one only
re-reads the contacts and clears the record.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from botctl import lint
from botctl.plan import BotRef, Confidence, Dependency, Operation
from botctl.resources.attribute_model import (
    RESOURCE,
    CustomAttribute,
    attribute_change,
    attribute_record,
    update_body,
)
from botctl.resources.base import BotPlan
from botctl.resources.contacts import convertible
from botctl.values import JsonValue


@dataclass
class Renamed:
    created: set[str] = field(default_factory=set)  # new names the rename creates
    sources: set[str] = field(default_factory=set)  # old names: not planned as undeclared


def plan_renames(
    bot: BotRef,
    declared: Sequence[CustomAttribute],
    observed: Mapping[str, CustomAttribute] | None,
    recorded: Mapping[str, CustomAttribute],
    secrets: frozenset[str],
    out: BotPlan,
    unfinished: Mapping[str, str] | None = None,
) -> Renamed:
    """``unfinished``: the renames the state records as under way, new name -> old name."""
    renamed = Renamed()
    unfinished = unfinished or {}
    current = observed if observed is not None else recorded
    confidence: Confidence = "verified" if observed is not None else "assumed"
    names = {a.name for a in declared}
    sources = [a.renamedFrom for a in declared if a.renamedFrom is not None]
    for attribute in declared:
        source = attribute.renamedFrom
        if source is None:
            continue
        renamed.sources.add(source)
        problem = _problem(attribute, source, names, sources, current)
        if problem:
            out.problems.append(problem)
            renamed.created.add(attribute.name)  # planned as nothing else
            continue
        old = current.get(source)
        new = current.get(attribute.name)
        if old is None:
            out.warnings.append(
                lint.coded(
                    lint.RENAME_SOURCE_MISSING,
                    f"{bot.name}: attribute {attribute.name!r} is renamedFrom {source!r}, which "
                    f"the service does not hold ({confidence}): planned as a new attribute, "
                    "no value to move",
                )
            )
            continue
        if old.archived and new is not None and unfinished.get(attribute.name) != source:
            continue  # done
        if observed is not None:
            out.depends_on.append(
                Dependency(bot.chatbot_id, RESOURCE, source, old.to_json(), secret=False)
            )
        out.operations.append(_operation(bot, attribute, old, new, confidence, secrets))
        if new is None:
            renamed.created.add(attribute.name)
    return renamed


def _problem(
    attribute: CustomAttribute,
    source: str,
    names: set[str],
    sources: list[str],
    current: Mapping[str, CustomAttribute],
) -> str:
    where = f"attribute {attribute.name!r} (renamedFrom {source!r})"
    if source == attribute.name:
        return f"{where}: an attribute cannot be renamed from itself"
    if source in names:
        return f"{where}: {source!r} is declared too; a renamed attribute is no longer declared"
    if sources.count(source) > 1:
        return f"{where}: several attributes are renamed from {source!r}"
    old, new = current.get(source), current.get(attribute.name)
    if new is not None and new.type != attribute.type:
        return (
            f"{where}: the service holds {attribute.name!r} as {new.type!r}, declared "
            f"{attribute.type!r}; the API cannot change an attribute's type"
        )
    if old is not None and not convertible(old.type, attribute.type):
        return (
            f"{where}: {old.type!r} values cannot move to a {attribute.type!r} attribute "
            "exactly (a rename may change the type only to or from text)"
        )
    return ""


def _operation(
    bot: BotRef,
    attribute: CustomAttribute,
    old: CustomAttribute,
    new: CustomAttribute | None,
    confidence: Confidence,
    secrets: frozenset[str],
) -> Operation:
    create = attribute.create_body() if new is None else None
    retired = {**old.to_json(), "archived": True}
    body: dict[str, JsonValue] = {
        "from": old.name,
        "from_type": old.type,
        "type": attribute.type,
        "create": create,
        "archive": None if old.archived else update_body(retired),
    }
    shown = create if create is not None else new.to_json() if new is not None else {}
    after = {**shown, "renamedFrom": old.name}
    change = attribute_change(attribute.name, "rename", old.to_json(), after, confidence, secrets)
    old_record: dict[str, JsonValue] = {"name": old.name, "type": old.type, "archived": True}
    return Operation(
        bot,
        "migrate_attribute",
        attribute.name,
        body,
        attribute_record(attribute),
        (change,),
        old_record,
        sends=(create is not None) + (body["archive"] is not None),
        contact_reads=None,  # until the contacts are counted (``reconcile.usage``)
        contact_updates=None,
    )
