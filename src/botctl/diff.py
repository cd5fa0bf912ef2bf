"""Desired + Live + last-applied State -> Plan. Pure: no I/O, deterministic.

For every managed value botctl decides how sure it is of the current one:
``verified`` (read from the service now), ``assumed`` (what botctl last applied, from state) or
``unknown`` (neither; the desired value is sent). Only values that differ, or are unknown, become
changes; a setting absent from YAML is never compared, sent or reported.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deepdiff import DeepDiff

from botctl.errors import ImpossibleChangeError
from botctl.masking import mask_secrets
from botctl.models import (
    BotSpec,
    CustomAttribute,
    Desired,
    JsonValue,
    Live,
    LiveBot,
    flatten,
)
from botctl.plan import (
    FLAG_CUTS_OFF_USERS,
    Action,
    BotRef,
    Change,
    Confidence,
    Dependency,
    Operation,
    OperationKind,
    Plan,
    SafetyPolicy,
    Unmanaged,
    safety_violations,
)
from botctl.state import BotRecord, State


@dataclass
class _BotPlan:
    changes: list[Change] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    unmanaged: list[Unmanaged] = field(default_factory=list)
    depends_on: list[Dependency] = field(default_factory=list)
    unverified: int = 0
    active_attributes: int = 0  # attributes not archived now (verified or assumed)
    problems: list[str] = field(default_factory=list)


def compute_plan(
    desired: Desired, live: Live, state: State, policy: SafetyPolicy | None = None
) -> Plan:
    """The plan that makes the service match ``desired``; raises ImpossibleChangeError listing
    every change the API cannot make (unknown chatbot, attribute type change). Safety caps
    the plan exceeds are recorded in ``Plan.violations`` (the caller refuses it)."""
    parts = [
        _plan_bot(bot, live.bots.get(bot.chatbot_id), state.record_for(bot.chatbot_id))
        for bot in desired.bots
    ]
    problems = [problem for part in parts for problem in part.problems]
    if problems:
        raise ImpossibleChangeError(
            "the plan cannot be made:\n" + "\n".join(f"  - {p}" for p in problems)
        )
    changes = tuple(c for part in parts for c in part.changes)
    violations = safety_violations(
        changes,
        {bot.name: part.active_attributes for bot, part in zip(desired.bots, parts, strict=True)},
        policy or SafetyPolicy(),
        {b.name: b.max_archive_percent for b in desired.bots if b.max_archive_percent is not None},
    )
    return Plan(
        changes=changes,
        operations=tuple(op for part in parts for op in part.operations),
        unmanaged=tuple(u for part in parts for u in part.unmanaged),
        unverified=sum(part.unverified for part in parts),
        depends_on=tuple(d for part in parts for d in part.depends_on),
        state_serial=state.serial if state.lineage else None,
        state_lineage=state.lineage,
        warnings=desired.warnings,
        bots=tuple(BotRef(b.name, b.chatbot_id, b.api_key_env) for b in desired.bots),
        violations=violations,
        secrets=frozenset(v for bot in desired.bots for v in bot.secret_values),
    )


def _plan_bot(bot: BotSpec, live: LiveBot | None, record: BotRecord | None) -> _BotPlan:
    out = _BotPlan()
    if live is not None and not live.exists:
        out.problems.append(
            f"{bot.name} ({bot.source}): chatbot {bot.chatbot_id} does not exist in the "
            f"account of ${bot.api_key_env} (the chatbot list does not contain it)"
        )
        return out
    _plan_settings(bot, live, record, out)
    _plan_attributes(bot, live, record, out)
    return out


# --- settings -----------------------------------------------------------------------------------


def _plan_settings(
    bot: BotSpec, live: LiveBot | None, record: BotRecord | None, out: _BotPlan
) -> None:
    desired_json = bot.settings.to_json()
    observed = flatten(live.settings) if live is not None and live.settings_readable else {}
    applied = flatten(record.settings) if record is not None else {}
    changed_fields: set[str] = set()
    for key, after in flatten(desired_json).items():
        before, confidence = _current(key, observed, applied)
        if confidence == "verified":
            out.depends_on.append(Dependency(bot.chatbot_id, "settings", key, before))
        else:
            out.unverified += 1
        if confidence != "unknown" and same_value(before, after):
            continue
        changed_fields.add(key.split(".", 1)[0])
        out.changes.append(
            Change(
                chatbot_id=bot.chatbot_id,
                bot=bot.name,
                resource="settings",
                key=key,
                action="update",
                before=mask_secrets(before, bot.secret_values),
                after=mask_secrets(after, bot.secret_values),
                confidence=confidence,
                flags=_settings_flags(key, after, desired_json),
            )
        )
    if changed_fields:
        # One request per chatbot with only the fields that change; a nested object is sent
        # whole as declared, since whether the service merges or replaces it is unknown.
        body = {name: desired_json[name] for name in sorted(changed_fields)}
        out.operations.append(
            Operation(
                bot.chatbot_id,
                bot.name,
                bot.api_key_env,
                "update_settings",
                "settings",
                body=body,
                record=body,
            )
        )


def _current(
    key: str, observed: dict[str, JsonValue], applied: dict[str, JsonValue]
) -> tuple[JsonValue, Confidence]:
    if key in observed:
        return observed[key], "verified"
    if key in applied:
        return applied[key], "assumed"
    return None, "unknown"


def _settings_flags(key: str, after: JsonValue, desired: dict[str, JsonValue]) -> tuple[str, ...]:
    """Changes that can cut users off from the chatbot are flagged in every output."""
    restricting = desired.get("onlyAllowOnAddedDomains") is True
    if (
        (key == "visibility" and after == "private")
        or (key == "onlyAllowOnAddedDomains" and after is True)
        or (key == "domains" and restricting)
    ):
        return (FLAG_CUTS_OFF_USERS,)
    return ()


def same_value(a: JsonValue, b: JsonValue) -> bool:
    """Equality as the service means it: 1 and 1.0 are the same temperature, and so are 0.2 and
    a 0.2000000029 read back from single-precision storage, at any depth; lists compare in order
    (the order of greeting messages matters)."""
    if a == b:
        return True
    return not DeepDiff(a, b, ignore_numeric_type_changes=True, math_epsilon=1e-6)


# --- attributes ---------------------------------------------------------------------------------


def _plan_attributes(
    bot: BotSpec, live: LiveBot | None, record: BotRecord | None, out: _BotPlan
) -> None:
    live_attrs = live.attributes if live is not None else None
    managed = record.attributes if record is not None else {}
    declared = {attr.name for attr in bot.attributes}
    for attr in bot.attributes:
        _plan_declared_attribute(bot, attr, live_attrs, managed, out)
    current_names = set(live_attrs) if live_attrs is not None else set(managed)
    if live_attrs is not None:
        out.active_attributes = sum(not a.archived for a in live_attrs.values())
    else:
        out.active_attributes = sum(not a.get("archived") for a in managed.values())
    for name in sorted(current_names - declared):
        _plan_undeclared_attribute(bot, name, live_attrs, managed, out)


def _plan_declared_attribute(
    bot: BotSpec,
    attr: CustomAttribute,
    live_attrs: dict[str, CustomAttribute] | None,
    managed: dict[str, dict[str, JsonValue]],
    out: _BotPlan,
) -> None:
    desired = _effective(attr)
    if live_attrs is not None:
        current = live_attrs[attr.name].to_json() if attr.name in live_attrs else None
        confidence: Confidence = "verified"
        out.depends_on.append(Dependency(bot.chatbot_id, "attribute", attr.name, current))
    elif attr.name in managed:
        current, confidence = managed[attr.name], "assumed"
    else:
        current, confidence = None, "unknown"
    if confidence != "verified":
        out.unverified += 1
    if current is None:
        # Unknown existence: update-or-create, so an attribute is never created twice.
        kind: OperationKind = "create_attribute" if confidence == "verified" else "ensure_attribute"
        _add_attribute_change(bot, attr.name, "create", None, desired, confidence, kind, out, attr)
        return
    if current.get("type") != attr.type:
        out.problems.append(
            f"{bot.name} ({bot.source}): attribute {attr.name!r} is of type "
            f"{current.get('type')!r} on the service ({confidence}) but declared {attr.type!r}; "
            "the API cannot change an attribute's type: declare a new attribute under another "
            "name and archive this one"
        )
        return
    after = {**current, **_managed_fields(attr)}
    if same_value(current, after):
        return
    action: Action = "update"
    if bool(current.get("archived")) != attr.archived:
        action = "archive" if attr.archived else "unarchive"
    _add_attribute_change(
        bot, attr.name, action, current, after, confidence, "update_attribute", out, attr
    )


def _plan_undeclared_attribute(
    bot: BotSpec,
    name: str,
    live_attrs: dict[str, CustomAttribute] | None,
    managed: dict[str, dict[str, JsonValue]],
    out: _BotPlan,
) -> None:
    confidence: Confidence = "verified" if live_attrs is not None else "assumed"
    current = live_attrs[name].to_json() if live_attrs is not None else managed[name]
    if current.get("archived"):
        return  # already retired
    if name not in managed and not bot.prune:
        out.unmanaged.append(Unmanaged(bot.chatbot_id, bot.name, name))
        return
    # botctl created it and the YAML dropped it, or prune asks to retire strays.
    after = {**current, "archived": True}
    _add_attribute_change(
        bot, name, "archive", current, after, confidence, "update_attribute", out, None
    )


def _add_attribute_change(
    bot: BotSpec,
    name: str,
    action: Action,
    before: dict[str, JsonValue] | None,
    after: dict[str, JsonValue],
    confidence: Confidence,
    kind: OperationKind,
    out: _BotPlan,
    declared: CustomAttribute | None,  # None: an attribute the YAML does not declare
) -> None:
    masked_before = mask_secrets(before, bot.secret_values)
    masked_after = mask_secrets(after, bot.secret_values)
    out.changes.append(
        Change(
            bot.chatbot_id,
            bot.name,
            "attribute",
            name,
            action,
            masked_before,
            masked_after,
            confidence,
        )
    )
    out.operations.append(_attribute_operation(bot, declared, name, after, kind))


def _attribute_operation(
    bot: BotSpec,
    declared: CustomAttribute | None,
    name: str,
    after: dict[str, JsonValue],
    kind: OperationKind,
) -> Operation:
    # State keeps what botctl manages: identity plus the declared fields (a label the YAML
    # does not declare is not botctl's, so a dashboard edit of it is not drift).
    if declared is not None:
        record = {"name": name, "type": declared.type, **_managed_fields(declared)}
    else:
        record = {"name": name, "type": after.get("type"), "archived": True}
    if kind == "create_attribute":
        return Operation(
            bot.chatbot_id, bot.name, bot.api_key_env, kind, name, body=dict(after), record=record
        )
    # `archived` always explicit: the PUT's documented default is false (it would un-archive).
    update = {k: after[k] for k in ("label", "description") if after.get(k) is not None}
    update["archived"] = bool(after.get("archived"))
    if kind == "ensure_attribute":
        # Existence unknown: update only the managed fields, create (whole) only on 404.
        assert declared is not None
        return Operation(
            bot.chatbot_id,
            bot.name,
            bot.api_key_env,
            kind,
            name,
            body=_managed_fields(declared),
            record=record,
            fallback=dict(after),
        )
    return Operation(
        bot.chatbot_id, bot.name, bot.api_key_env, kind, name, body=update, record=record
    )


def _effective(attr: CustomAttribute) -> dict[str, JsonValue]:
    """The attribute as a create sends it: always with a label (the name when none is given)."""
    created = attr.to_json()
    created.setdefault("label", attr.name)
    created["archived"] = attr.archived
    return created


def _managed_fields(attr: CustomAttribute) -> dict[str, JsonValue]:
    fields: dict[str, JsonValue] = {"archived": attr.archived}
    if attr.label is not None:
        fields["label"] = attr.label
    if attr.description is not None:
        fields["description"] = attr.description
    return fields
