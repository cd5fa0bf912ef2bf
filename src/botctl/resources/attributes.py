"""The custom contact attribute resource (contract 2.8, 4.3, 4.4): everything botctl knows
about it, in one place.

- **Model**: ``CustomAttribute`` (in ``attribute_model``), the same type declared, observed
  and recorded (one instance per distinct value: ``interned``). Declared, a ``label`` or
  ``description`` of ``None`` is not managed (a dashboard edit of it is not drift).
- **Live parsing** (``read_live``): attribute records -> models by name, and the records
  outside the contract's rules set aside (unmanageable, never fatal).
- **Diff rules** (``plan_attributes``): missing -> create; label/description differ -> update;
  ``archived`` differs -> archive/unarchive; a type change is impossible; an attribute botctl
  created and the YAML dropped is archived; one it never managed is *unmanaged* (archived only
  with ``prune``). Attributes are never deleted: archiving is the only retirement.
- **Requests** (``send``): every update sends ``archived`` explicitly (the PUT's documented
  default is false: omitting it would un-archive). A create is the one write that is not
  idempotent: when its outcome is unknown botctl looks before it tries again (the attribute
  list, or where the service has no reads, an update probe: 200 it exists, 404 it does not),
  so no attribute is ever created twice.
- **State** (``fold``): the record keeps identity plus the declared fields.
- **Rendering** (``detail_lines``): the fields a change moves.
- **The configuration** (``SPEC_FIELDS``, ``Safety``, ``declared_json``, ``export_notes``): its
  keys of a Chatbot document (``customAttributes``, ``prune``, ``ignoreAttributes``,
  ``safety``), as declared, shown and exported.
- **The kind** (``AttributesKind``, ``KIND``): all of the above behind ``resources.kind``'s
  interface, as the registry hands it to every step of a run.
"""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, Protocol, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from botctl import contract, lint
from botctl.errors import ApiError, ReadsUnavailable, ServiceError
from botctl.plan import (
    Action,
    BotRef,
    Change,
    Confidence,
    Dependency,
    Operation,
    OperationKind,
    Unmanageable,
    Unmanaged,
)
from botctl.resources import contacts
from botctl.resources.attribute_model import (
    MANAGED_FIELDS,
    RESOURCE,
    CustomAttribute,
    ParsedOnce,
    attribute_change,
    attribute_record,
    interned,
    update_body,
)
from botctl.resources.base import BotPlan, known_value, rekeyed, shown_in_comment
from botctl.resources.kind import (
    Basis,
    ExportedSection,
    MutableParts,
    Parts,
    SpecField,
    SpecPath,
)
from botctl.resources.renames import plan_renames
from botctl.resources.settings import known_fields
from botctl.sealing import FingerprintKey, Sealed, holds_secret
from botctl.values import SECRET_MASK, JsonValue, mask_secrets_in_text, same_value

CREATE_ATTEMPTS = 3


# --- live parsing -------------------------------------------------------------------------------


@dataclass(frozen=True)
class OffContract:
    """A live attribute record outside the contract's rules, as read, and why botctl cannot
    manage it. Liberal in what it reads: the chatbot's other attributes are planned as usual."""

    name: str | None  # as the service holds it; None when the record has no (text) name
    reason: str
    record: JsonValue = None


def read_live(raw: Sequence[Any]) -> tuple[dict[str, CustomAttribute], tuple[OffContract, ...]]:
    """Attribute records -> models by name, and the records outside the contract's rules.
    Unknown fields are dropped and a missing ``archived`` is its documented default (false);
    a record the model still refuses (a name with a space, an unknown type such as
    ``select``, ``archived: 0``, no name or type) is set aside with the reason, never fatal."""
    parsed: dict[str, CustomAttribute] = {}
    refused: list[OffContract] = []
    for record in raw:
        if not isinstance(record, Mapping):
            refused.append(OffContract(None, f"not an attribute record: {_shown(record)}", record))
            continue
        try:
            attribute = _parsed(record)
        except ValidationError as exc:
            name = record.get("name")
            shown_name = name if isinstance(name, str) else None
            refused.append(OffContract(shown_name, _reason(exc, record), dict(record)))
            continue
        parsed.setdefault(attribute.name, attribute)
    return parsed, tuple(refused)


def _validated(record: Mapping[str, Any]) -> CustomAttribute:
    return interned(CustomAttribute.model_validate(known_fields(record, CustomAttribute)))


# One record as a model (``ValidationError`` when it is outside the contract), once per content.
_parsed = ParsedOnce(_validated)

_EXPECTED = {"bool_type": "true or false", "string_type": "text"}


def _reason(exc: ValidationError, record: Mapping[str, Any]) -> str:
    """Why the model refuses a record, in words: each field at fault and its value."""
    reasons = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "record"
        if error["type"] == "missing":
            reasons.append(f"no {field}")
        elif field == "name" and isinstance(record.get("name"), str):
            reasons.append(
                f"name {_shown(record['name'])} is not an attribute name of the contract "
                "(a letter, then letters, digits, '_' or '-')"
            )
        elif field == "type":
            types = ", ".join(contract.ATTRIBUTE_TYPES)
            reasons.append(f"type {_shown(record.get('type'))} is not one of {types}")
        elif error["type"] in _EXPECTED:
            reasons.append(f"{field} {_shown(record.get(field))} is not {_EXPECTED[error['type']]}")
        else:
            reasons.append(f"{field} {_shown(record.get(field))}: {error['msg']}")
    return "; ".join(dict.fromkeys(reasons))


def _shown(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


# --- diff rules ---------------------------------------------------------------------------------


def plan_attributes(
    bot: BotRef,
    declared: Sequence[CustomAttribute],
    observed: Mapping[str, CustomAttribute] | None,
    recorded: Mapping[str, CustomAttribute],
    *,
    prune: bool,
    ignore: Sequence[str] = (),
    secrets: frozenset[str],
    out: BotPlan,
    off_contract: Sequence[OffContract] = (),
    unfinished: Mapping[str, str] | None = None,
) -> None:
    """``observed`` is None when the attribute list could not be read; ``recorded`` holds the
    attributes botctl manages (from state). Live attributes the declaration does not name and
    that match an ``ignore`` pattern (fnmatch) are left alone: neither reported as unmanaged
    nor archived. ``off_contract``: live records outside the contract's rules, each reported
    as unmanageable and never written to (one the declaration names is a warning).
    ``unfinished``: renames the state records as under way (new name -> old name).

    Names identify an attribute exactly (the update's path names it), and no two may differ
    only in letter case (the service may take them for one: it refuses such a create). So a
    declared name that matches a live or recorded one only in case is an impossible change,
    never a create that fails."""
    out.unmanageable += [
        Unmanageable(bot, record.name, mask_secrets_in_text(record.reason, secrets))
        for record in off_contract
    ]
    current = observed if observed is not None else recorded
    held = {record.name: record for record in off_contract if record.name is not None}
    by_case = {name.casefold(): name for name in [*held, *current]}
    renamed = plan_renames(bot, declared, observed, recorded, secrets, out, unfinished)
    for attribute in declared:
        if attribute.name in renamed.created:
            continue
        if attribute.name in held and attribute.name not in current:
            reason = mask_secrets_in_text(held[attribute.name].reason, secrets)
            out.warnings.append(
                lint.coded(
                    lint.UNMANAGEABLE_DECLARED,
                    f"{bot.name}: attribute {attribute.name!r} is declared, but the service "
                    f"holds it outside the contract's rules ({reason}): botctl does not write it",
                )
            )
            continue
        other = by_case.get(attribute.name.casefold())
        if other is not None and attribute.name not in current:
            out.problems.append(case_clash(attribute.name, other))
            continue
        _plan_declared(bot, attribute, observed, recorded, secrets, out)
    out.active_attributes = sum(not a.archived for a in current.values())
    names = {attribute.name for attribute in declared} | renamed.sources
    for name in sorted(set(current) - names):
        if any(fnmatch.fnmatchcase(name, pattern) for pattern in ignore):
            continue
        managed = name in recorded
        _plan_undeclared(bot, current[name], observed is not None, managed, prune, secrets, out)


def case_clash(declared: str, held: str) -> str:
    """The impossible change of a declared name that a live one matches only in case."""
    return (
        f"attribute {declared!r} is declared, and the service holds {held!r}, which differs "
        "only in letter case: the service may take them for the same name (it refuses such a "
        "create) and cannot rename one; declare it as "
        f"{held!r}, or archive {held!r} and declare a name that differs in more than case"
    )


def _plan_declared(
    bot: BotRef,
    attribute: CustomAttribute,
    observed: Mapping[str, CustomAttribute] | None,
    recorded: Mapping[str, CustomAttribute],
    secrets: frozenset[str],
    out: BotPlan,
) -> None:
    current: CustomAttribute | None
    confidence: Confidence
    if observed is not None:
        current, confidence = observed.get(attribute.name), "verified"
        before = current.to_json() if current is not None else None
        secret = holds_secret(attribute.managed(), secrets)
        out.depends_on.append(
            Dependency(bot.chatbot_id, RESOURCE, attribute.name, before, secret=secret)
        )
    elif attribute.name in recorded:
        current, confidence = recorded[attribute.name], "assumed"
    else:
        current, confidence = None, "unknown"
    if confidence != "verified":
        out.unverified += 1
    if current is None:
        _create(bot, attribute, confidence, secrets, out)
        return
    if current.type != attribute.type:
        out.problems.append(
            f"attribute {attribute.name!r} is of type {current.type!r} on the "
            f"service ({confidence}) but declared {attribute.type!r}; the API cannot change an "
            "attribute's type: declare a new attribute under another name and archive this one"
        )
        return
    if current is attribute:  # the same values (interned): in sync
        return
    before = current.to_json()
    managed = attribute.managed()
    if all(same_value(before.get(key), value) for key, value in managed.items()):
        return
    after = {**before, **managed}
    action: Action = "update"
    if current.archived != attribute.archived:
        action = "archive" if attribute.archived else "unarchive"
    change = attribute_change(attribute.name, action, before, after, confidence, secrets)
    out.operations.append(_update(bot, attribute.name, after, attribute_record(attribute), change))


def _plan_undeclared(
    bot: BotRef,
    current: CustomAttribute,
    verified: bool,
    managed: bool,
    prune: bool,
    secrets: frozenset[str],
    out: BotPlan,
) -> None:
    if current.archived:
        return  # already retired
    if not managed and not prune:
        out.unmanaged.append(Unmanaged(bot, current.name))
        return
    # botctl created it and the YAML dropped it, or prune asks to retire strays.
    before = current.to_json()
    after = {**before, "archived": True}
    confidence: Confidence = "verified" if verified else "assumed"
    change = attribute_change(current.name, "archive", before, after, confidence, secrets)
    record: dict[str, JsonValue] = {"name": current.name, "type": current.type, "archived": True}
    out.operations.append(_update(bot, current.name, after, record, change))


# --- requests -----------------------------------------------------------------------------------


def _update(
    bot: BotRef,
    name: str,
    after: dict[str, JsonValue],
    record: dict[str, JsonValue],
    change: Change,
) -> Operation:
    return Operation(bot, "update_attribute", name, update_body(after), record, (change,))


def _create(
    bot: BotRef,
    attribute: CustomAttribute,
    confidence: Confidence,
    secrets: frozenset[str],
    out: BotPlan,
) -> None:
    body = attribute.create_body()
    change = attribute_change(attribute.name, "create", None, body, confidence, secrets)
    if confidence == "verified":
        op = Operation(
            bot, "create_attribute", attribute.name, body, attribute_record(attribute), (change,)
        )
    else:
        # Existence unknown (no reads, no state): update only the managed fields, and create
        # (whole) only when the update answers 404, so an attribute is never created twice.
        kind: OperationKind = "ensure_attribute"
        op = Operation(
            bot,
            kind,
            attribute.name,
            attribute.managed(),
            attribute_record(attribute),
            (change,),
            body,
        )
    out.operations.append(op)


class AttributeWriter(Protocol):
    """The part of the service client that attribute requests use."""

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]: ...


async def send(op: Operation, client: AttributeWriter) -> str:
    """Send one attribute operation; returns a note for the progress line."""
    if op.kind == "update_attribute":
        await client.update_attribute(op.bot.chatbot_id, op.subject, dict(op.body))
        return ""
    if op.kind == "ensure_attribute":
        if await _probe_update(op, client, dict(op.body)):
            return "existed; updated (its type could not be verified)"
        return await _create_once(op, client, dict(op.fallback or {}))
    if op.kind == "migrate_attribute":
        created = dict(op.body.get("create") or {})
        # The client is the service client, which reads and writes contacts too.
        return await contacts.migrate_in_run(
            op, cast(contacts.ContactWriter, client), lambda: _create_once(op, client, created)
        )
    return await _create_once(op, client, dict(op.body))


async def _probe_update(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> bool:
    try:
        await client.update_attribute(op.bot.chatbot_id, op.subject, body)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


async def _create_once(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> str:
    """Create, and when the answer leaves it unknown whether it was created, look first."""
    ambiguous_before = False
    last: ServiceError | None = None
    for _ in range(CREATE_ATTEMPTS):
        try:
            await client.create_attribute(op.bot.chatbot_id, body)
        except ServiceError as exc:
            # A 400 right after an uncertain attempt may be "already exists": our own create.
            duplicate_after_doubt = (
                ambiguous_before and isinstance(exc, ApiError) and exc.status == 400
            )
            if not (exc.outcome_unknown or duplicate_after_doubt):
                raise
            last, ambiguous_before = exc, True
            if await _exists_after_doubt(op, client, body):
                return "created (confirmed by reading back after an uncertain answer)"
            continue
        return "confirmed after retry" if ambiguous_before else ""
    assert last is not None
    raise last


async def _exists_after_doubt(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> bool:
    """After an uncertain create: is the attribute there? If so, make it as declared."""
    wanted = update_body(body)
    try:
        listed = await client.list_attributes(op.bot.chatbot_id)
    except ReadsUnavailable:  # no such read here, or --no-reads: look by updating instead
        return await _probe_update(op, client, wanted)
    except ApiError as exc:
        if exc.status in (404, 405, 501):
            return await _probe_update(op, client, wanted)
        raise
    found = next((a for a in listed if a.get("name") == op.subject), None)
    if found is None:
        return False
    if found.get("type") != body.get("type"):
        raise ApiError(
            f"create attribute {op.subject}",
            400,
            f"an attribute {op.subject!r} of type {found.get('type')!r} already exists",
            chatbot_id=op.bot.chatbot_id,
        )
    if any(found.get(k) != v for k, v in wanted.items()):
        await client.update_attribute(op.bot.chatbot_id, op.subject, wanted)
    return True


# --- state and read-back ------------------------------------------------------------------------


def fold(recorded: dict[str, CustomAttribute], op: Operation) -> None:
    """Record what botctl manages of the attribute ``op`` wrote (a rename: the new one, and
    the old one archived)."""
    recorded[op.subject] = CustomAttribute.model_validate(op.state_record)
    if op.kind == "migrate_attribute" and isinstance(op.fallback, dict):
        recorded[str(op.fallback["name"])] = CustomAttribute.model_validate(op.fallback)


def read_back_notes(op: Operation, observed: Mapping[str, CustomAttribute]) -> list[str]:
    """After an apply: an attribute written but not listed, or a field read back differently."""
    now = observed.get(op.subject)
    if now is None:
        return [f"{op.bot.name}: attribute {op.subject} was written but is not listed"]
    listed = now.to_json()
    return [
        f"{op.bot.name}: attribute {op.subject} {key} was sent as {sent!r} but reads back "
        f"as {listed.get(key)!r}"
        for key, sent in op.state_record.items()
        if not same_value(listed.get(key), sent)
    ]


# --- rendering ----------------------------------------------------------------------------------


def detail_lines(change: Change, show: Callable[[JsonValue], str]) -> list[str]:
    """The fields a change sets (a create) or moves (any other action), one line each;
    ``show`` formats a value."""
    after = change.after if isinstance(change.after, dict) else {}
    before = change.before if isinstance(change.before, dict) else {}
    lines = []
    for key in ("type", *MANAGED_FIELDS):
        if key not in after and key not in before:
            continue
        new, old = after.get(key), before.get(key)
        if change.before is None:
            lines.append(f"{key}: {show(new)}")
        elif old != new:
            lines.append(f"{key}: {show(old)} -> {show(new)}")
    return lines


# --- the kind -----------------------------------------------------------------------------------

_SEALABLE_FIELDS = ("label", "description")


def secret_location(name: str, key: str) -> str:
    """A field of an attribute, as a secret location (``State.protect``)."""
    return f"attribute:{name}:{key}"


def _project(attribute: Mapping[str, JsonValue], fields: Iterable[str]) -> dict[str, JsonValue]:
    """An attribute's fields that the configuration manages (a label it does not declare is
    not botctl's)."""
    return {name: attribute.get(name) for name in fields}


def _unfinished(migrations: Mapping[str, JsonValue]) -> dict[str, str]:
    """The renames a state records as under way (``resources.contacts.Progress``): new name
    -> old name."""
    return {
        target: source
        for target, progress in migrations.items()
        if isinstance(progress, Mapping) and isinstance(source := progress.get("from"), str)
    }


def declared_json(attribute: CustomAttribute) -> dict[str, JsonValue]:
    """As a person declares it: ``archived`` only when true; the declared-only fields
    (``renamedFrom``, ``archiveWithValues``) when given."""
    shown = {k: v for k, v in attribute.to_json().items() if k != "archived" or v}
    if attribute.renamedFrom is not None:
        shown["renamedFrom"] = attribute.renamedFrom
    if attribute.archiveWithValues:
        shown["archiveWithValues"] = True
    return shown


def export_notes(listed: bool, off_contract: Sequence[OffContract]) -> list[str]:
    """What an exported document says of the attributes it does not declare."""
    notes = []
    if not listed:
        notes.append("The attribute list could not be read: customAttributes not exported.")
    if off_contract:
        notes.append(
            "Attributes held outside the contract's rules, so not exported (botctl never "
            "writes them):"
        )
        notes += [
            f"  {shown_in_comment(record.name) if record.name is not None else '(no name)'}: "
            f"{shown_in_comment(record.reason)[1:-1]}"
            for record in off_contract
        ]
    return notes


# --- the kind's keys of a Chatbot document ------------------------------------------------------

IgnorePattern = Annotated[str, StringConstraints(min_length=1)]


class Safety(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    maxArchivePercent: Annotated[float, Field(ge=0, le=100)] | None = Field(
        default=None,
        description="Most of this chatbot's active attributes one run may archive (default 30).",
    )


SPEC_FIELDS: dict[str, SpecField] = {
    "customAttributes": SpecField(
        tuple[CustomAttribute, ...],
        Field(
            default=(),
            description="Custom contact attributes of the chatbot; a name also in an included "
            "set replaces the set's declaration.",
        ),
    ),
    "prune": SpecField(
        bool,
        Field(
            default=False,
            description="Archive live attributes that botctl never managed and this document "
            "does not declare.",
        ),
        defaults=(bool | None, Field(default=None)),
    ),
    "ignoreAttributes": SpecField(
        tuple[IgnorePattern, ...],
        Field(
            default=(),
            description="Glob patterns (fnmatch) of live attributes this document does not "
            "declare and botctl must leave alone: neither reported as unmanaged nor archived. "
            "Those of matching Defaults are added.",
        ),
        defaults=(
            tuple[IgnorePattern, ...],
            Field(default=(), description="Added to each matching chatbot's own ignoreAttributes."),
        ),
        merge="added",
    ),
    "safety": SpecField(
        Safety | None, Field(default=None), defaults=(Safety | None, Field(default=None))
    ),
}


class AttributesKind:
    """Custom attributes behind ``resources.kind.ResourceKind``. Its parts: ``attributes``
    (declared: a tuple; observed and recorded: by name), ``off_contract`` (live), and in a
    record ``verified_attributes`` (names read from the service) and ``sealed_attributes``
    (fields known only by their fingerprints, by attribute)."""

    name = RESOURCE
    order = 1
    # migrate_attribute: a rename (``renamedFrom``) that moves the contacts' values
    # (``resources.renames`` plans it, ``resources.contacts.migrate`` carries it out).
    operation_kinds = (
        "create_attribute",
        "update_attribute",
        "ensure_attribute",
        "migrate_attribute",
    )
    item_detail = False  # an attribute's detail is its fields (``render_lines``)
    state_keys: tuple[str, ...] = ()  # the state format's own fields (``store.state``)
    absent_shown: str | None = "absent"

    async def read_live(
        self, client: Any, chatbot_id: str, listed: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        try:
            raw = await client.list_attributes(chatbot_id)
        except ReadsUnavailable:
            return {}
        found, off_contract = read_live(raw)
        return {"attributes": found, "off_contract": off_contract}

    def secret_locations(self, spec: Parts, secrets: frozenset[str]) -> set[str]:
        declared: tuple[CustomAttribute, ...] = spec.part("attributes")
        return {
            secret_location(attribute.name, key)
            for attribute in declared
            for key, value in attribute.managed().items()
            if holds_secret(value, secrets)
        }

    def unseal(
        self, record: Parts, spec: Parts, live: Parts | None, key: FingerprintKey
    ) -> dict[str, Any]:
        fingerprints = key
        sealed_fields: dict[str, dict[str, Sealed]] = record.part("sealed_attributes")
        if not sealed_fields:
            return {}
        attributes: dict[str, CustomAttribute] = dict(record.part("attributes"))
        declared = {a.name: a.to_json() for a in spec.part("attributes")}
        seen = live.part("attributes") if live is not None else None
        observed: Mapping[str, CustomAttribute] = seen if seen is not None else {}
        for name, fields in sealed_fields.items():
            if name not in attributes:
                continue
            document = attributes[name].to_json()
            listed = observed[name].to_json() if name in observed else {}
            for field_name, sealed in fields.items():
                candidates = declared.get(name, {}).get(field_name), listed.get(field_name)
                known = known_value(sealed, fingerprints, *candidates)
                document[field_name] = known if known is not None else SECRET_MASK
            attributes[name] = CustomAttribute.model_validate(document)
        return {"attributes": attributes, "sealed_attributes": {}}

    def plan(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        *,
        secrets: frozenset[str],
        reassert: bool,
        out: BotPlan,
    ) -> None:
        plan_attributes(
            bot,
            spec.part("attributes"),
            live.part("attributes") if live is not None else None,
            record.part("attributes") if record is not None else {},
            prune=spec.part("prune"),
            ignore=spec.part("ignore_attributes"),
            secrets=secrets,
            out=out,
            off_contract=live.part("off_contract") if live is not None else (),
            unfinished=_unfinished(record.part("migrations")) if record is not None else None,
        )

    def premises(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        secrets: frozenset[str],
    ) -> list[Dependency]:
        """Every attribute whose existence or fields it could not read, and where it read
        them, whether botctl manages an undeclared one (archive it, or report it unmanaged)."""
        listed = live.part("attributes") if live is not None else None
        by_name = {a.name: a for a in spec.part("attributes")}
        names = set(by_name) | set(record.part("attributes") if record is not None else ())
        if listed is not None:
            names = (names | set(listed)) - set(by_name)
        found = []
        for name in sorted(names):
            value = self._raw(record, name) if record is not None else None
            declared = by_name.get(name)
            secret = declared is not None and holds_secret(declared.managed(), secrets)
            found.append(Dependency(bot.chatbot_id, self.name, name, value, "state", secret))
        return found

    def _raw(self, record: Parts, name: str) -> dict[str, JsonValue] | None:
        """The recorded attribute as JSON, its sealed fields as their ``Sealed``."""
        attribute = record.part("attributes").get(name)
        if attribute is None:
            return None
        return {**attribute.to_json(), **record.part("sealed_attributes").get(name, {})}

    async def send(self, op: Operation, client: Any) -> str:
        return await send(op, client)

    def fold(self, record: MutableParts, op: Operation) -> None:
        fold(record.part("attributes"), op)
        record.part("migrations").pop(op.subject, None)  # a rename done: no progress to keep
        record.part("verified_attributes").discard(op.subject)
        record.part("sealed_attributes").pop(op.subject, None)

    def read_back_notes(self, op: Operation, live: Parts) -> list[str]:
        observed = live.part("attributes")
        return read_back_notes(op, observed) if observed is not None else []

    def matching(self, spec: Parts, live: Parts) -> dict[str, Any]:
        seen: Mapping[str, CustomAttribute] | None = live.part("attributes")
        if seen is None:
            return {}
        found: dict[str, Any] = {}
        for attribute in spec.part("attributes"):
            now = seen.get(attribute.name)
            if now is None or now.type != attribute.type:
                continue
            listed = now.to_json()
            if all(same_value(listed.get(k), v) for k, v in attribute.managed().items()):
                found[attribute.name] = CustomAttribute.model_validate(attribute_record(attribute))
        return found

    def read_back(self, op: Operation, live: Parts) -> dict[str, Any]:
        seen: Mapping[str, CustomAttribute] | None = live.part("attributes")
        now = seen.get(op.subject) if seen is not None else None
        if now is None:
            return {}
        listed = now.to_json()
        if all(same_value(listed.get(k), v) for k, v in op.state_record.items()):
            return {op.subject: CustomAttribute.model_validate(op.state_record)}
        return {}

    def observed(self, live: Parts) -> dict[str, Any]:
        return dict(live.part("attributes") or {})

    def record_verified(self, record: MutableParts, values: Mapping[str, Any]) -> bool:
        attributes: dict[str, CustomAttribute] = record.part("attributes")
        verified: set[str] = record.part("verified_attributes")
        sealed: dict[str, dict[str, Sealed]] = record.part("sealed_attributes")
        changed = False
        for name, attribute in values.items():
            changed |= attributes.get(name) != attribute or name not in verified or name in sealed
            attributes[name] = attribute
            verified.add(name)
            sealed.pop(name, None)
        return changed

    def current_value(self, live: Parts, path: str) -> JsonValue:
        seen = live.part("attributes")
        attribute = seen.get(path) if seen is not None else None
        return attribute.to_json() if attribute is not None else None

    def recorded_value(self, record: Parts, path: str) -> JsonValue:
        return self._raw(record, path)

    def _declared(self, spec: Parts, name: str) -> CustomAttribute | None:
        return next((a for a in spec.part("attributes") if a.name == name), None)

    def drift_values(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue, Basis | None]:
        declared = self._declared(spec, change.path)
        fields = declared.managed() if declared is not None else {"archived": True}
        current = live.part("attributes")
        now_attribute = current.get(change.path) if current is not None else None
        now = _project(now_attribute.to_json(), fields) if now_attribute is not None else None
        kept = record.part("attributes").get(change.path) if record is not None else None
        if record is None or kept is None:
            return now, fields, None, None
        verified: set[str] = record.part("verified_attributes")
        basis: Basis = "verified" if change.path in verified else "sent"
        return now, fields, _project(kept.to_json(), fields), basis

    def drift_shown(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue]:
        """Whole records (live, declared as a create would send it, recorded), so the report
        says which attribute, not only which fields."""
        current = (live.part("attributes") or {}).get(change.path)
        declared = self._declared(spec, change.path)
        kept = record.part("attributes").get(change.path) if record is not None else None
        return (
            current.to_json() if current is not None else None,
            declared.create_body() if declared is not None else change.after,
            kept.to_json() if kept is not None else None,
        )

    def unmanaged_value(self, live: Parts | None, name: str) -> JsonValue:
        seen = live.part("attributes") if live is not None else None
        attribute = seen.get(name) if seen else None
        return attribute.to_json() if attribute is not None else None

    def render_lines(self, change: Change, show: Callable[[JsonValue], str]) -> list[str] | None:
        return detail_lines(change, show)

    def dump(
        self, record: Parts, seal: Callable[[str, JsonValue], JsonValue]
    ) -> dict[str, JsonValue]:
        return {}

    def load(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def has_sealed(self, record: Parts) -> bool:
        return bool(record.part("sealed_attributes"))

    def rekey(
        self,
        record: MutableParts,
        spec: Parts | None,
        old: FingerprintKey | None,
        new: FingerprintKey,
    ) -> tuple[int, list[str]]:
        """An attribute's sealed fields move together, or it is forgotten whole."""
        declared = {a.name: a.to_json() for a in spec.part("attributes")} if spec else {}
        sealed: dict[str, dict[str, Sealed]] = record.part("sealed_attributes")
        moved, forgotten = 0, []
        for name, fields in sorted(sealed.items()):
            wanted = declared.get(name, {})
            values = {key: rekeyed(f, old, wanted.get(key)) for key, f in fields.items()}
            if any(value is None for value in values.values()):
                del sealed[name]
                record.part("attributes").pop(name, None)
                record.part("verified_attributes").discard(name)
                forgotten.append(f"attribute {name}")
                continue
            sealed[name] = {key: new.seal(value) for key, value in values.items()}
            moved += len(values)
        return moved, forgotten

    def previous(self, live: Parts | None, record: Parts | None) -> Any:
        return None  # an archive or a new attribute is never undone behind a reviewer's back

    def restore(
        self, op: Operation, previous: Any
    ) -> tuple[Operation | None, list[tuple[str, str]]]:
        return None, []

    def stranded(self, spec: Parts, live: Parts | None) -> list[str]:
        observed: Mapping[str, CustomAttribute] | None = (
            live.part("attributes") if live is not None else None
        )
        if not observed:
            return []
        return [
            a.name
            for a in spec.part("attributes")
            if a.name in observed and observed[a.name].type != a.type and a.renamedFrom is None
        ]

    def archive_consent(self, spec: Parts) -> set[str]:
        return {a.name for a in spec.part("attributes") if a.archiveWithValues}

    def reads_contacts(self, op: Operation) -> bool:
        return op.kind == "migrate_attribute"  # a rename moves the contacts' values

    # -- the configuration ----------------------------------------------------------------------
    spec_fields: Mapping[str, SpecField] = SPEC_FIELDS
    secret_places = "an attribute's label or description"

    def may_hold_secret(self, path: SpecPath) -> bool:
        return len(path) == 3 and path[0] == "customAttributes" and path[2] in _SEALABLE_FIELDS

    def from_spec(self, values: Mapping[str, Any]) -> dict[str, Any]:
        safety: Safety | None = values["safety"]
        return {
            "attributes": values["customAttributes"],
            "prune": values["prune"],
            "ignore_attributes": values["ignoreAttributes"],
            "max_archive_percent": safety.maxArchivePercent if safety is not None else None,
        }

    def section(self, spec: Parts) -> dict[str, JsonValue]:
        shown: dict[str, JsonValue] = {
            "customAttributes": [declared_json(a) for a in spec.part("attributes")],
            "prune": spec.part("prune"),
        }
        if spec.part("ignore_attributes"):
            shown["ignoreAttributes"] = list(spec.part("ignore_attributes"))
        if spec.part("max_archive_percent") is not None:
            shown["safety"] = {"maxArchivePercent": spec.part("max_archive_percent")}
        return shown

    def revision_values(self, spec: Parts) -> dict[str, JsonValue]:
        return {
            "attributes": [a.to_json() for a in spec.part("attributes")],
            "prune": spec.part("prune"),
            "ignoreAttributes": list(spec.part("ignore_attributes")),
        }

    def export(self, live: Parts) -> ExportedSection:
        listed: Mapping[str, CustomAttribute] | None = live.part("attributes")
        attributes = sorted((listed or {}).values(), key=lambda a: a.name)
        values: dict[str, JsonValue] = {}
        if attributes:
            values["customAttributes"] = [
                {k: v for k, v in a.to_json().items() if k != "archived" or v} for a in attributes
            ]
        values["prune"] = False
        notes = export_notes(listed is not None, live.part("off_contract") or ())
        return ExportedSection(values, tuple(notes))


KIND = AttributesKind()
