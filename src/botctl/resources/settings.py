"""The chatbot settings resource (contract 2.1-2.4): everything botctl knows about it, in one place.

- **Model**: ``ChatbotSettings`` and its nested objects, the same type on all three sides:
  declared (from YAML, strictly validated), observed (from the chatbot list) and recorded (the
  state). A field of ``None`` means "not managed" when declared and "not observable" when read.
- **Live parsing** (``read_live``): a raw chatbot record in either spelling (camelCase, or the
  snake_case seen live) -> ``ChatbotSettings``; a value outside the contract is not observable.
- **Diff rules** (``plan_settings``): one leaf (dotted path) at a time, each with its confidence.
- **Request**: one settings update per chatbot with only the top-level fields that change; a
  nested object is sent whole, as declared (whether the service merges it is unknown).
- **State** (``fold``): top-level fields replace what was recorded.
- **Rendering**: which changes may cut users off.
- **Rollback** (``Previous``, ``restore_field``): the settings before an apply, put back whole
  top-level field by field, or named not restorable.
- **Export** (``split_observed``, ``export_notes``): what a document made from the service
  declares, and what its comments say of the rest.
- **The kind** (``SettingsKind``, ``KIND``): all of the above behind ``resources.kind``'s
  interface, as the registry hands it to every step of a run.

Adding a writable field is one line in a model below: parsing, diffing, sending, recording and
the JSON Schema all follow from the model.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from botctl import contract, lint
from botctl.plan import (
    FLAG_CUTS_OFF_USERS,
    Action,
    BotRef,
    Change,
    Confidence,
    Dependency,
    Operation,
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
from botctl.sealing import FingerprintKey, Sealed, holds_secret, mask_beside
from botctl.values import (
    SECRET_MASK,
    JsonValue,
    as_json,
    flatten,
    mask_secrets,
    same_value,
    unflatten,
)

HexColour = Annotated[str, StringConstraints(pattern=contract.HEX_COLOUR_PATTERN)]
ModelId = Annotated[str, StringConstraints(pattern=contract.MODEL_ID_PATTERN)]
NonNegativeInt = Annotated[int, Field(ge=0)]


class _Strict(BaseModel):
    # No NaN or infinity: YAML spells them .nan and .inf, and no setting means either.
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
        regex_engine=contract.PATTERN_ENGINE,
    )


class Styles(_Strict):
    """Contract 2.3."""

    theme: Literal["light", "dark"] | None = None
    buttonColor: HexColour | None = None
    displayName: str | None = None
    alignChatButton: Literal["left", "right"] | None = None
    userMessageColor: HexColour | None = None
    autoOpenChatWindowAfter: NonNegativeInt | None = None


class LeadField(_Strict):
    """One field of the lead form (contract 2.4)."""

    active: bool | None = None
    label: str | None = None


class CollectCustomerInformation(_Strict):
    """Contract 2.4."""

    title: str | None = None
    name: LeadField | None = None
    email: LeadField | None = None
    phone: LeadField | None = None


class ChatbotSettings(_Strict):
    """The writable settings of a chatbot (contract 2.1), minus ``chatbotId``.

    ``model`` is any identifier of the contract's shape here: whether it must be one of the
    contract's list is a policy of the loader (with an explicit opt-out), since the service's
    list moves often.
    """

    name: str | None = None
    instructions: str | None = None
    initialMessages: tuple[str, ...] | None = None
    suggestedMessages: tuple[str, ...] | None = None
    visibility: Literal["public", "private"] | None = None
    domains: tuple[str, ...] | None = None
    onlyAllowOnAddedDomains: bool | None = None
    ipLimit: NonNegativeInt | None = None
    ipLimitTimeframe: NonNegativeInt | None = None
    ipLimitMessage: str | None = None
    model: ModelId | None = None
    temp: Annotated[float, Field(ge=contract.TEMP_MIN, le=contract.TEMP_MAX)] | None = None
    styles: Styles | None = None
    collectCustomerInformation: CollectCustomerInformation | None = None

    @cached_property
    def json_fields(self) -> dict[str, JsonValue]:
        """The fields that are set, as JSON (nested objects as mappings): a request body's
        values. Computed once: the model is frozen."""
        return self.model_dump(mode="json", exclude_none=True)

    @cached_property
    def leaves(self) -> dict[str, JsonValue]:
        """Every set leaf by dotted path (``styles.buttonColor``); lists are leaves."""
        return flatten(self.json_fields)


# --- live parsing -------------------------------------------------------------------------------

_SNAKE = re.compile(r"_([a-z0-9])")


@functools.lru_cache(maxsize=1024)
def camel(key: str) -> str:
    # Cached: the same few dozen keys come back in every record of every chatbot.
    return _SNAKE.sub(lambda m: m.group(1).upper(), key)


def known_fields(record: Mapping[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """The keys of ``model`` in ``record`` (either spelling), nulls dropped; a camelCase key
    wins over its snake_case twin, since it is the spelling the write uses."""
    allowed = _nested_fields(model)
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = camel(key)
        if name not in allowed or value is None or (name in out and name != key):
            continue
        nested = allowed[name]
        if nested is not None:
            if not isinstance(value, Mapping):
                continue  # not a shape we understand: not observable
            value = known_fields(value, nested)
            if not value:
                continue
        elif isinstance(value, list):
            value = tuple(value)  # the models hold immutable sequences
        out[name] = value
    return out


@functools.cache
def _nested_fields(model: type[BaseModel]) -> dict[str, type[BaseModel] | None]:
    """Each field of ``model``, and the model nested in it if any: worked out once per model
    (live parsing asks of every record of every chatbot)."""
    return {name: nested_model(info.annotation) for name, info in model.model_fields.items()}


def nested_model(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside an annotation such as ``Styles | None``, if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = nested_model(arg)
        if found is not None:
            return found
    return None


# A setting the service holds but botctl's rules refuse, by top-level field: the value as read
# (a nested object whole) and why.
Refused = dict[str, tuple[JsonValue, str]]


def read_live(record: Mapping[str, Any]) -> tuple[ChatbotSettings, Refused]:
    """A raw chatbot record -> the observable writable settings, and what could not be kept
    (for export to show, never to manage). A value the contract does not allow (a string
    temperature, an unknown theme) is not observable rather than fatal: the plan then falls
    back to what botctl last applied."""
    fields = known_fields(record, ChatbotSettings)
    try:
        return ChatbotSettings.model_validate(fields), {}
    except ValidationError as exc:
        refused: Refused = {}
        for error in exc.errors():
            top = str(error["loc"][0])
            if top in fields and top not in refused:
                where = ".".join(str(p) for p in error["loc"][1:])
                refused[top] = (as_json(fields[top]), f"{where}: {error['msg']}".lstrip(": "))
        for error in exc.errors():
            _drop(fields, error["loc"])
    return ChatbotSettings.model_validate(fields), refused


def _drop(fields: dict[str, Any], loc: tuple[int | str, ...]) -> None:
    """Remove the value a validation error names (a whole list when one of its items is
    wrong), and a nested object left empty by that."""
    parents: list[tuple[dict[str, Any], str]] = []
    node: Any = fields
    for part in loc:
        if not isinstance(node, dict) or not isinstance(part, str) or part not in node:
            break
        parents.append((node, part))
        node = node[part]
    for parent, key in reversed(parents):
        parent.pop(key, None)
        if parent:
            break


# --- diff rules ---------------------------------------------------------------------------------


def plan_settings(
    bot: BotRef,
    declared: ChatbotSettings,
    observed: ChatbotSettings | None,
    recorded: ChatbotSettings | None,
    secrets: frozenset[str],
    out: BotPlan,
    *,
    reassert: bool = False,
) -> None:
    """Compare every declared leaf with the best knowledge of its current value: read now
    (``verified``), else last applied (``assumed``), else ``unknown`` (then it is sent).
    With ``reassert``, a value that cannot be read back is sent again even when botctl last
    applied it as declared (a dashboard edit of it is invisible to every read)."""
    observed_leaves = observed.leaves if observed is not None else {}
    recorded_leaves = recorded.leaves if recorded is not None else {}
    changes: list[Change] = []
    for path, after in declared.leaves.items():
        before, confidence = _current(path, observed_leaves, recorded_leaves)
        if confidence == "verified":
            secret = holds_secret(after, secrets)
            out.depends_on.append(
                Dependency(bot.chatbot_id, "settings", path, before, secret=secret)
            )
        else:
            out.unverified += 1
        action: Action = "update"
        if confidence != "unknown" and same_value(before, after):
            if not (reassert and confidence == "assumed"):
                continue
            action = "reassert"
        changes.append(
            Change(
                resource="settings",
                path=path,
                action=action,
                before=mask_beside(before, after, secrets),
                after=mask_secrets(after, secrets),
                confidence=confidence,
                flags=_flags(path, after, declared),
            )
        )
    if changes:
        changes += _removed_subfields(bot, declared, observed, recorded, changes, secrets, out)
        out.operations.append(update_operation(bot, declared, changes))


def _removed_subfields(
    bot: BotRef,
    declared: ChatbotSettings,
    observed: ChatbotSettings | None,
    recorded: ChatbotSettings | None,
    changes: list[Change],
    secrets: frozenset[str],
    out: BotPlan,
) -> list[Change]:
    """A nested object is sent whole: every sub-field the service holds and the declaration
    does not is removed or reset by the request. Show each one the current value of is known
    (read now, else last applied); when neither is known, warn once per chatbot."""
    sent = {change.path.split(".", 1)[0] for change in changes}
    removals: list[Change] = []
    unknown: list[str] = []
    for name in sorted(sent):
        value = declared.json_fields.get(name)
        if not isinstance(value, dict):
            continue
        current, confidence = _current_object(name, observed, recorded)
        declared_leaves = flatten({name: value})
        if current is None:
            if set(model_leaves(name)) - set(declared_leaves):
                unknown.append(name)
            continue
        for path, before in flatten({name: current}).items():
            if path not in declared_leaves:
                removals.append(
                    Change(
                        "settings", path, "update", mask_secrets(before, secrets), None, confidence
                    )
                )
    if unknown:
        verb = "is" if len(unknown) == 1 else "are"
        out.warnings.append(
            lint.coded(
                lint.SENT_WHOLE,
                f"{bot.name}: {' and '.join(unknown)} {verb} sent whole; sub-fields the "
                "configuration does not declare may be reset by the service (their current "
                "values cannot be read)",
            )
        )
    return removals


def _current_object(
    name: str, observed: ChatbotSettings | None, recorded: ChatbotSettings | None
) -> tuple[dict[str, JsonValue] | None, Confidence]:
    if observed is not None and isinstance(observed.json_fields.get(name), dict):
        return observed.json_fields[name], "verified"
    if recorded is not None and isinstance(recorded.json_fields.get(name), dict):
        return recorded.json_fields[name], "assumed"
    return None, "unknown"


@functools.cache
def model_leaves(name: str) -> tuple[str, ...]:
    """Every leaf path a nested settings object can hold (``styles.theme``, ...)."""

    def walk(model: type[BaseModel], prefix: str) -> list[str]:
        paths = []
        for field, info in model.model_fields.items():
            inner = nested_model(info.annotation)
            path = f"{prefix}{field}"
            paths += walk(inner, f"{path}.") if inner is not None else [path]
        return paths

    inner = nested_model(ChatbotSettings.model_fields[name].annotation)
    return tuple(walk(inner, f"{name}.")) if inner is not None else (name,)


def _current(
    path: str, observed: Mapping[str, JsonValue], recorded: Mapping[str, JsonValue]
) -> tuple[JsonValue, Confidence]:
    if path in observed:
        return observed[path], "verified"
    if path in recorded:
        return recorded[path], "assumed"
    return None, "unknown"


def _flags(path: str, after: JsonValue, declared: ChatbotSettings) -> tuple[str, ...]:
    """Changes that can cut users off from the chatbot are flagged in every output."""
    if (
        (path == "visibility" and after == "private")
        or (path == "onlyAllowOnAddedDomains" and after is True)
        or (path == "domains" and declared.onlyAllowOnAddedDomains is True)
    ):
        return (FLAG_CUTS_OFF_USERS,)
    return ()


# --- the request --------------------------------------------------------------------------------


def update_operation(bot: BotRef, declared: ChatbotSettings, changes: list[Change]) -> Operation:
    """One request per chatbot with only the top-level fields that change; a nested object is
    sent whole as declared, since whether the service merges or replaces it is unknown."""
    fields = sorted({change.path.split(".", 1)[0] for change in changes})
    body = {name: declared.json_fields[name] for name in fields}
    return Operation(bot, "update_settings", "settings", body, body, tuple(changes))


class SettingsWriter(Protocol):
    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None: ...


async def send(op: Operation, client: SettingsWriter) -> str:
    await client.update_settings(op.bot.chatbot_id, dict(op.body))
    return "fields " + ", ".join(sorted(op.body))


# --- state --------------------------------------------------------------------------------------


def fold(recorded: ChatbotSettings, op: Operation) -> ChatbotSettings:
    """What the state keeps after ``op`` succeeded: its top-level fields replace the record's
    (nested objects are always sent, and kept, whole)."""
    merged = {**recorded.json_fields, **op.state_record}
    return ChatbotSettings.model_validate(merged, strict=False)


def with_leaves(recorded: ChatbotSettings, values: Mapping[str, JsonValue]) -> ChatbotSettings:
    """The record with some leaves (dotted paths) set to the given values: what was verified
    on the service, field by field, alongside what the record already holds."""
    leaves = {**recorded.leaves, **values}
    return ChatbotSettings.model_validate(unflatten(leaves), strict=False)


def read_back_notes(op: Operation, observed: ChatbotSettings) -> list[str]:
    """After an apply: sent values the service reads back differently."""
    notes = []
    now = observed.leaves
    for path, sent in flatten(op.state_record).items():
        if path in now and not same_value(now[path], sent):
            notes.append(
                f"{op.bot.name}: settings {path} was sent as {sent!r} but reads back as "
                f"{now[path]!r}"
            )
    return notes


# --- rollback -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Previous:
    """One chatbot's settings leaves before an apply, by dotted path (read from the service,
    else as the state recorded them); ``sealed``: the leaves recorded only as a secret's
    fingerprint, whose value is not held."""

    values: dict[str, JsonValue]
    sealed: frozenset[str] = frozenset()


_SEALED_REASON = "held a secret: botctl keeps only its fingerprint"


def restore_field(name: str, sent: JsonValue, before: Previous) -> tuple[JsonValue, str | None]:
    """The previous value of the top-level field ``name`` (sent as ``sent``), or why not: it
    is restored whole (as apply sends it), only when every leaf sent under it was known."""
    for path in flatten({name: sent}):
        if path in before.sealed or isinstance(before.values.get(path), Sealed):
            return None, _SEALED_REASON
        if path not in before.values:
            return None, "its previous value was never read nor recorded by botctl"
    # A nested object is sent whole: the whole previous object, as far as it was known.
    known = {
        path: value
        for path, value in before.values.items()
        if path == name or path.startswith(name + ".")
    }
    if any(isinstance(value, Sealed) for value in known.values()):
        return None, _SEALED_REASON
    return unflatten(known)[name], None


# --- export -------------------------------------------------------------------------------------

UNLISTED_MODEL = (
    "not in this botctl's model list; to manage it, set it under spec.settings and pass "
    "--allow-unknown-models"
)


def split_observed(
    observed: ChatbotSettings | None, refused: Refused
) -> tuple[dict[str, JsonValue], dict[str, tuple[JsonValue, str]]]:
    """The settings to declare, and those `validate` would refuse (value, why).

    A nested object (styles, collectCustomerInformation) with a refused member is refused
    whole: it is sent whole, so declaring only its valid members would overwrite the rest on
    the next change.
    """
    declared = dict(observed.json_fields) if observed is not None else {}
    refused = dict(refused)
    for name in refused:
        declared.pop(name, None)
    model = declared.get("model")
    if model is not None and model not in contract.SETTINGS_MODELS:
        refused["model"] = (declared.pop("model"), UNLISTED_MODEL)
    return declared, refused


def export_notes(
    declared: Mapping[str, JsonValue], refused: Mapping[str, tuple[JsonValue, str]]
) -> list[str]:
    """What an exported document says of the settings it does not declare."""
    notes = []
    unread = [n for n in ChatbotSettings.model_fields if n not in declared and n not in refused]
    if unread:
        notes.append("Not readable from the service, so not exported (add them to manage them):")
        notes.append("  " + ", ".join(unread))
    if refused:
        notes.append(
            "Held by the service but refused by `botctl validate`, so not exported (not managed):"
        )
        notes += [
            f"  {n}: {shown_in_comment(value)}  ({why})" for n, (value, why) in refused.items()
        ]
    return notes


# --- the kind -----------------------------------------------------------------------------------

# What a sealed value that matches no candidate is compared and shown as: the mask itself, in
# the shape the field takes. A field that can hold neither (a colour, an enumeration) is left
# unrecorded: its value is then unknown, and sent.
_STAND_INS: tuple[JsonValue, ...] = (SECRET_MASK, (SECRET_MASK,))


def secret_location(path: str) -> str:
    """A settings leaf (dotted path), as a secret location (``State.protect``)."""
    return f"settings:{path}"


def _top(path: str) -> str:
    return path.split(".", 1)[0]


class SettingsKind:
    """Settings behind ``resources.kind.ResourceKind``. Its parts: ``settings`` (declared,
    observed, recorded), ``refused`` (live), and in a record ``verified_settings`` (leaf
    paths read from the service) and ``sealed_settings`` (leaf paths known only by their
    fingerprints)."""

    name = "settings"
    order = 0
    operation_kinds = ("update_settings",)
    item_detail = True
    state_keys: tuple[str, ...] = ()  # the state format's own fields (``store.state``)
    absent_shown: str | None = None

    async def read_live(
        self, client: Any, chatbot_id: str, listed: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if listed is None:  # no chatbot list: no settings to observe
            return {}
        observed, refused = read_live(listed)
        return {"settings": observed, "refused": refused}

    def secret_locations(self, spec: Parts, secrets: frozenset[str]) -> set[str]:
        declared: ChatbotSettings = spec.part("settings")
        return {
            secret_location(path)
            for path, value in declared.leaves.items()
            if holds_secret(value, secrets)
        }

    def unseal(
        self, record: Parts, spec: Parts, live: Parts | None, key: FingerprintKey
    ) -> dict[str, Any]:
        sealed_values: dict[str, Sealed] = record.part("sealed_settings")
        if not sealed_values:
            return {}
        declared = spec.part("settings").leaves
        seen = live.part("settings") if live is not None else None
        observed = seen.leaves if seen is not None else {}
        settings: ChatbotSettings = record.part("settings")
        for path, sealed in sorted(sealed_values.items()):
            known = known_value(sealed, key, declared.get(path), observed.get(path))
            for value in (known,) if known is not None else _STAND_INS:
                try:
                    settings = with_leaves(settings, {path: value})
                except ValidationError:
                    continue
                break
        return {"settings": settings, "sealed_settings": {}}

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
        plan_settings(
            bot,
            spec.part("settings"),
            live.part("settings") if live is not None else None,
            record.part("settings") if record is not None else None,
            secrets,
            out,
            reassert=reassert,
        )

    def premises(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        secrets: frozenset[str],
    ) -> list[Dependency]:
        """Every declared leaf it could not read, and every recorded one under a declared
        object (sent whole), as recorded."""
        seen = live.part("settings") if live is not None else None
        observed = seen.leaves if seen is not None else {}
        raw = self._raw(record) if record is not None else {}
        declared = spec.part("settings").leaves
        sent_whole = {_top(path) for path in declared}
        paths = set(declared) | {path for path in raw if _top(path) in sent_whole}
        return [
            Dependency(
                bot.chatbot_id,
                self.name,
                path,
                raw.get(path),
                "state",
                holds_secret(declared.get(path), secrets),
            )
            for path in sorted(paths - set(observed))
        ]

    def _raw(self, record: Parts) -> dict[str, JsonValue]:
        """Every recorded leaf, sealed ones as their ``Sealed``."""
        return {**record.part("settings").leaves, **record.part("sealed_settings")}

    async def send(self, op: Operation, client: Any) -> str:
        return await send(op, client)

    def fold(self, record: MutableParts, op: Operation) -> None:
        sent = set(op.body)
        record.set_part("settings", fold(record.part("settings"), op))
        verified: set[str] = record.part("verified_settings")
        record.set_part("verified_settings", {p for p in verified if _top(p) not in sent})
        sealed: dict[str, Sealed] = record.part("sealed_settings")
        record.set_part("sealed_settings", {p: v for p, v in sealed.items() if _top(p) not in sent})

    def read_back_notes(self, op: Operation, live: Parts) -> list[str]:
        observed = live.part("settings")
        return read_back_notes(op, observed) if observed is not None else []

    def matching(self, spec: Parts, live: Parts) -> dict[str, Any]:
        seen = live.part("settings")
        if seen is None:
            return {}
        observed = seen.leaves
        return {
            path: value
            for path, value in spec.part("settings").leaves.items()
            if path in observed and same_value(observed[path], value)
        }

    def read_back(self, op: Operation, live: Parts) -> dict[str, Any]:
        seen = live.part("settings")
        if seen is None:
            return {}
        observed = seen.leaves
        return {
            path: sent
            for path, sent in flatten(op.state_record).items()
            if path in observed and same_value(observed[path], sent)
        }

    def observed(self, live: Parts) -> dict[str, Any]:
        seen = live.part("settings")
        return dict(seen.leaves) if seen is not None else {}

    def record_verified(self, record: MutableParts, values: Mapping[str, Any]) -> bool:
        settings: ChatbotSettings = record.part("settings")
        verified: set[str] = record.part("verified_settings")
        sealed: dict[str, Sealed] = record.part("sealed_settings")
        updated = with_leaves(settings, values)
        now_verified = verified | set(values)
        now_sealed = {path: v for path, v in sealed.items() if path not in values}
        record.set_part("settings", updated)
        record.set_part("verified_settings", now_verified)
        record.set_part("sealed_settings", now_sealed)
        return (updated, now_verified, now_sealed) != (settings, verified, sealed)

    def current_value(self, live: Parts, path: str) -> JsonValue:
        seen = live.part("settings")
        return seen.leaves.get(path) if seen is not None else None

    def recorded_value(self, record: Parts, path: str) -> JsonValue:
        return self._raw(record).get(path)

    def drift_values(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue, Basis | None]:
        now = self.current_value(live, change.path)
        want = spec.part("settings").leaves.get(change.path)  # None: a removed sub-field
        recorded = record.part("settings").leaves if record is not None else {}
        if record is None or change.path not in recorded:
            return now, want, None, None
        verified: set[str] = record.part("verified_settings")
        basis: Basis = "verified" if change.path in verified else "sent"
        return now, want, recorded[change.path], basis

    def drift_shown(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue]:
        now, want, recorded, _ = self.drift_values(spec, change, live, record)
        return now, want, recorded

    def unmanaged_value(self, live: Parts | None, name: str) -> JsonValue:
        return None  # every live setting is declared or not botctl's: none is unmanaged

    def render_lines(self, change: Change, show: Callable[[JsonValue], str]) -> list[str] | None:
        return None  # the value itself (a list's items, a multi-line text's diff)

    def dump(
        self, record: Parts, seal: Callable[[str, JsonValue], JsonValue]
    ) -> dict[str, JsonValue]:
        return {}

    def load(self, document: Mapping[str, Any]) -> dict[str, Any]:
        return {}

    def has_sealed(self, record: Parts) -> bool:
        return bool(record.part("sealed_settings"))

    def rekey(
        self,
        record: MutableParts,
        spec: Parts | None,
        old: FingerprintKey | None,
        new: FingerprintKey,
    ) -> tuple[int, list[str]]:
        declared = spec.part("settings").leaves if spec is not None else {}
        sealed: dict[str, Sealed] = record.part("sealed_settings")
        verified: set[str] = record.part("verified_settings")
        moved, forgotten = 0, []
        for path, fingerprint in sorted(sealed.items()):
            value = rekeyed(fingerprint, old, declared.get(path))
            if value is None:
                del sealed[path]
                verified.discard(path)
                forgotten.append(f"settings {path}")
            else:
                sealed[path] = new.seal(value)
                moved += 1
        return moved, forgotten

    def previous(self, live: Parts | None, record: Parts | None) -> Previous:
        values: dict[str, JsonValue] = {}
        sealed: set[str] = set()
        if record is not None:
            values.update(record.part("settings").leaves)
            sealed.update(record.part("sealed_settings"))
        observed = live.part("settings") if live is not None else None
        if observed is not None:
            values.update(observed.leaves)
            sealed.difference_update(observed.leaves)
        return Previous(values, frozenset(sealed))

    def restore(
        self, op: Operation, previous: Any
    ) -> tuple[Operation | None, list[tuple[str, str]]]:
        before = previous if isinstance(previous, Previous) else Previous({})
        body: dict[str, JsonValue] = {}
        changes: list[Change] = []
        missing: list[tuple[str, str]] = []
        for name, sent in sorted(op.body.items()):
            restored, why = restore_field(name, sent, before)
            if why is not None:
                missing.append((name, why))
                continue
            body[name] = restored
            changes.append(Change(op.resource, name, "update", sent, restored, "verified"))
        if not body:
            return None, missing
        return Operation(op.bot, op.kind, op.subject, body, body, tuple(changes)), missing

    def stranded(self, spec: Parts, live: Parts | None) -> list[str]:
        return []  # every setting can be written

    def archive_consent(self, spec: Parts) -> set[str]:
        return set()  # settings are never archived

    def reads_contacts(self, op: Operation) -> bool:
        return False

    # -- the configuration ----------------------------------------------------------------------
    spec_fields: Mapping[str, SpecField] = {
        "settings": SpecField(
            ChatbotSettings,
            Field(
                default_factory=ChatbotSettings,
                description="Any subset of the writable settings; omitted fields are not managed.",
            ),
            defaults=(
                ChatbotSettings | None,
                Field(
                    default=None,
                    description="Settings for the matching chatbots; nested objects merge "
                    "field by field with the chatbot's own.",
                ),
            ),
        )
    }
    secret_places = "spec.settings"

    def may_hold_secret(self, path: SpecPath) -> bool:
        return path[:1] == ("settings",)

    def from_spec(self, values: Mapping[str, Any]) -> dict[str, Any]:
        return {"settings": values["settings"]}

    def section(self, spec: Parts) -> dict[str, JsonValue]:
        return {"settings": spec.part("settings").json_fields}

    def revision_values(self, spec: Parts) -> dict[str, JsonValue]:
        return {"settings": spec.part("settings").json_fields}

    def export(self, live: Parts) -> ExportedSection:
        declared, refused = split_observed(live.part("settings"), live.part("refused") or {})
        values: dict[str, JsonValue] = {"settings": declared} if declared else {}
        return ExportedSection(values, tuple(export_notes(declared, refused)))


KIND = SettingsKind()
