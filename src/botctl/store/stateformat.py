"""The state document's format and its migration from older versions.

Format (JSON, versioned; one line per record so that diffs of it stay readable)::

    {"format_version": 4, "lineage": "<uuid>", "serial": 7, "salt": "<64 hex digits>",
     "key_check": "<64 hex digits>",
     "bots": {"<chatbotId>": {"bot": "support",
                              "settings": {"name": "...", "styles": {...},
                                           "instructions": {"$sealed": "hmac-sha256:..."}},
                              "verified_settings": ["name"],
                              "attributes": {"plan_tier": {"name": ..., "type": ..., ...}},
                              "verified_attributes": ["plan_tier"]}}}

``lineage`` identifies one state history (a plan made against another lineage is refused);
``serial`` grows with every write. A value is *verified* when the service was read holding it
(after an apply, a refresh or an export), and only *sent* otherwise. A value that holds a
``${secret:...}`` (a settings leaf, an attribute's label or description) is never written: its
fingerprint is (``store.statesealing``), keyed with the state key and the lineage's ``salt``;
``key_check`` tells which state key (null while the state holds no fingerprint).

Versions read: 1 (no verified marks: everything sent) and 2 (secrets in clear) are rewritten as
4 at the next write; 3 (fingerprints keyed with the salt alone) is rewritten as 4 when it holds
no fingerprint, and otherwise kept as 3, with a warning, until ``botctl state rekey``.

Beside ``bots``, sections about botctl's runs rather than the service's values, written
only when they hold something: ``rollout`` (``resources.rollout``: each chatbot's revision and
tests, for ``promote``) and ``previews`` (``resources.preview``: the preview chatbots leased to
pull requests, ``{"<chatbotId>": {"owner", "stage", "acquired", "expires"}}``, times in UTC
ISO 8601). ``agent`` (``resources.agentrecord``) is ``botctl agent``'s own: ``{"suspended":
{"since", "by", "reason"}, "applied": {"<chatbotId>": {"revision", "at"}}}``.

A chatbot's record holds the format's own fields (settings and attributes, above) and the keys
of every other resource kind of the registry (``ResourceKind.state_keys``, written by its
``dump`` and read by its ``load``).

The document is parsed once and read through the same models the diff uses, a sealed value
(and another kind's keys) taken from where it stands by the record's validator: a malformed
document is an error that names the place, never a crash.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)
from pydantic_core import from_json

from botctl.errors import StateError
from botctl.models import BotRecord, State
from botctl.resources.agentrecord import AgentRecord, LastApplied, Suspension
from botctl.resources.attribute_model import CustomAttribute, ParsedOnce, interned
from botctl.resources.preview import PreviewLease, from_iso
from botctl.resources.registry import kinds, state_keys
from botctl.resources.rollout import Rollout
from botctl.resources.settings import ChatbotSettings
from botctl.sealing import FINGERPRINT_PATTERN, SALT_PATTERN, Sealed, sealed_of
from botctl.store.files import first_problem

FORMAT_VERSION = 4
LEGACY_KEYED_VERSION = 3  # fingerprints keyed with the salt alone
READABLE_VERSIONS = (1, 2, 3, 4)
SEALABLE_ATTRIBUTE_FIELDS = ("label", "description")
BOT_DEPTH = 2  # where a chatbot's record sits in the file: root -> "bots" -> chatbot id

_Fingerprint = Annotated[str, StringConstraints(pattern=FINGERPRINT_PATTERN)]
_Hex64 = Annotated[str, StringConstraints(pattern=SALT_PATTERN)]


class _RecordFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    bot: str
    settings: ChatbotSettings = Field(default_factory=ChatbotSettings)
    verified_settings: tuple[str, ...] = ()
    attributes: dict[str, CustomAttribute] = Field(default_factory=dict)
    verified_attributes: tuple[str, ...] = ()
    # Renames under way (written only while there are some): see BotRecord.migrations.
    migrations: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Taken from where they stand in the file (never written under these names).
    sealed_settings: dict[str, _Fingerprint] = Field(default_factory=dict)
    sealed_attributes: dict[str, dict[str, _Fingerprint]] = Field(default_factory=dict)
    # The keys of the registry's other kinds (``ResourceKind.state_keys``), as written: each
    # kind reads its own (``ResourceKind.load``).
    kind_records: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _take_sealed(cls, data: Any) -> Any:
        """The sealed form taken in place: each ``{"$sealed": ...}`` where a settings leaf or
        an attribute's label or description would be moves to ``sealed_settings`` (by leaf
        path) or ``sealed_attributes``; a marker anywhere else stays, for the models to refuse
        by its place. JSON arrays become the tuples the models hold."""
        if not isinstance(data, dict):
            return data
        taken = ("sealed_settings", "sealed_attributes", "kind_records")
        record = {k: v for k, v in data.items() if k not in taken}
        if set(data) - set(record):
            return data  # names the file never holds: refused as extra fields
        keys = set(state_keys())
        record["kind_records"] = {key: record.pop(key) for key in list(record) if key in keys}
        sealed_settings: dict[str, str] = {}
        if isinstance(record.get("settings"), dict):
            record["settings"] = _strip_sealed(record["settings"], "", sealed_settings)
        sealed_attributes: dict[str, dict[str, str]] = {}
        attributes = record.get("attributes")
        if isinstance(attributes, dict):
            kept: dict[str, Any] = {}
            for name, attribute in attributes.items():
                known = _attribute_once.known(attribute)
                if known is not None:  # parsed before: plain values, so nothing sealed
                    kept[name] = known
                    continue
                if isinstance(attribute, dict):
                    fields = {
                        key: found.fingerprint
                        for key in SEALABLE_ATTRIBUTE_FIELDS
                        if (found := sealed_of(attribute.get(key))) is not None
                    }
                    if fields:
                        sealed_attributes[name] = fields
                        attribute = {k: v for k, v in attribute.items() if k not in fields}
                kept[name] = _recorded_attribute(_tuples(attribute))
            record["attributes"] = kept
        for key in ("verified_settings", "verified_attributes"):
            record[key] = _tuples(record.get(key, ()))
        record["sealed_settings"] = sealed_settings
        record["sealed_attributes"] = sealed_attributes
        return record


class _RolloutFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    revision: str
    tests_passed: bool | None = None


class _PreviewFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    owner: Annotated[str, StringConstraints(min_length=1)]
    stage: str
    acquired: str
    expires: str

    def lease(self) -> PreviewLease:
        return PreviewLease(self.owner, self.stage, from_iso(self.acquired), from_iso(self.expires))


class _SuspensionFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    since: str
    by: str | None = None
    reason: str | None = None


class _LastAppliedFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    revision: str
    at: str


class _AgentFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    suspended: _SuspensionFile | None = None
    applied: dict[str, _LastAppliedFile] = Field(default_factory=dict)

    def record(self) -> AgentRecord:
        suspended = self.suspended
        return AgentRecord(
            suspended=Suspension(suspended.since, suspended.by, suspended.reason)
            if suspended is not None
            else None,
            applied={k: LastApplied(a.revision, a.at) for k, a in self.applied.items()},
        )


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    format_version: int
    lineage: str
    serial: int
    salt: _Hex64 | None = None  # from 3 on
    key_check: _Hex64 | None = None  # from 4 on
    bots: dict[str, _RecordFile]
    # Staged rollout (resources.rollout); written only once a chatbot has such a record.
    rollout: dict[str, _RolloutFile] = Field(default_factory=dict)
    # Preview leases (resources.preview); written only while one is held.
    previews: dict[str, _PreviewFile] = Field(default_factory=dict)
    # botctl agent's own record (resources.agentrecord); written only when it holds something.
    agent: _AgentFile = Field(default_factory=_AgentFile)


def _validated_attribute(record: Mapping[str, Any]) -> CustomAttribute:
    return interned(CustomAttribute.model_validate(record))


_attribute_once = ParsedOnce(_validated_attribute)


def _recorded_attribute(record: Any) -> Any:
    """A recorded attribute as its model, parsed once per distinct record (a state of 5,000
    chatbots holds 100,000, mostly alike); a record the model refuses stays as it is, for the
    file's model to refuse where it stands. The attribute's model is strict on its own, so it
    says here what it would say there."""
    if not isinstance(record, dict):
        return record
    try:
        return _attribute_once(record)
    except ValidationError:
        return record


def _strip_sealed(values: dict[str, Any], prefix: str, out: dict[str, str]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in values.items():
        sealed = sealed_of(value)
        if sealed is not None:
            out[f"{prefix}{key}"] = sealed.fingerprint
        elif isinstance(value, dict) and value:
            inner = _strip_sealed(value, f"{prefix}{key}.", out)
            if inner:  # a nested object that held only sealed values is not one to keep
                kept[key] = inner
        else:
            kept[key] = _tuples(value)
    return kept


def _tuples(value: Any) -> Any:
    """JSON arrays as tuples, at any depth (the models hold sequences as tuples, and are
    strict). A mapping of plain values (an attribute's record) is kept as it is: fresh from
    the parser, nothing else holds it, and a large state has a hundred thousand."""
    if isinstance(value, list):
        return tuple(_tuples(item) for item in value)
    if isinstance(value, dict):
        for item in value.values():
            if isinstance(item, list | dict):
                return {key: _tuples(item) for key, item in value.items()}
        return value
    return value


def parse_state(text: str, where: str) -> State:
    """A state document (clear text) as a ``State``; ``where`` names it in errors."""
    try:  # pydantic's parser: bounded nesting, where json.loads raises RecursionError
        data = from_json(text)
    except ValueError as exc:
        raise invalid(where, f"not JSON: {exc}") from None
    version = data.get("format_version") if isinstance(data, dict) else None
    if isinstance(data, dict) and "format_version" in data:
        _check_version(where, version)
    try:
        parsed = _StateFile.model_validate(data)
    except ValidationError as exc:
        raise invalid(where, first_problem(exc)) from None
    _check_version(where, parsed.format_version)
    if parsed.format_version >= LEGACY_KEYED_VERSION and parsed.salt is None:
        raise invalid(where, "salt: Field required")
    if parsed.format_version < FORMAT_VERSION and parsed.key_check is not None:
        raise invalid(where, f"key_check: not in format {parsed.format_version}")
    sealed = any(r.sealed_settings or r.sealed_attributes for r in parsed.bots.values())
    if sealed and parsed.salt is None:
        raise invalid(where, "sealed values in a state without a salt")
    if sealed and parsed.format_version >= FORMAT_VERSION and parsed.key_check is None:
        raise invalid(where, "sealed values in a state without a key_check")
    bots = {
        chatbot_id: BotRecord(
            bot=rec.bot,
            settings=rec.settings,
            attributes=rec.attributes,
            verified_settings=set(rec.verified_settings),
            verified_attributes=set(rec.verified_attributes),
            sealed_settings={p: Sealed(f) for p, f in rec.sealed_settings.items()},
            sealed_attributes={
                name: {k: Sealed(f) for k, f in fields.items()}
                for name, fields in rec.sealed_attributes.items()
            },
            migrations=dict(rec.migrations),
            parts=_kind_parts(where, chatbot_id, rec.kind_records),
        )
        for chatbot_id, rec in parsed.bots.items()
    }
    legacy = parsed.format_version == LEGACY_KEYED_VERSION and sealed
    try:
        previews = {k: p.lease() for k, p in parsed.previews.items()}
    except ValueError as exc:
        raise invalid(where, f"previews: {exc}") from None
    return State(
        lineage=parsed.lineage,
        serial=parsed.serial,
        bots=bots,
        salt=parsed.salt,
        key_check=parsed.key_check,
        legacy_keyed=legacy,
        outdated=parsed.format_version < FORMAT_VERSION and not legacy,
        rollout={k: Rollout(r.revision, r.tests_passed) for k, r in parsed.rollout.items()},
        previews=previews,
        agent=parsed.agent.record(),
    )


def _kind_parts(where: str, chatbot_id: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts each kind reads from its keys of one chatbot's record."""
    parts: dict[str, Any] = {}
    for kind in kinds():
        try:
            parts.update(kind.load(document))
        except ValueError as exc:
            raise invalid(where, f"bots.{chatbot_id}.{exc}") from None
    return parts


def invalid(where: str, problem: str) -> StateError:
    return StateError(
        f"state file {where} is not valid botctl state ({problem}); restore it from a backup, "
        "or move it away to start over (botctl then re-sends what it cannot verify)"
    )


def _check_version(where: str, version: object) -> None:
    """A file of another format version is refused as such, before its content is judged."""
    if version not in READABLE_VERSIONS:
        raise StateError(
            f"state file {where} has format_version {version!r}; this botctl reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )


def state_document(state: State, bots: Mapping[str, Any]) -> dict[str, Any]:
    """The state file's content, the chatbots' records given (rendered or not): format 4,
    or 3 for a state kept in it until rekeyed. The salt must have been made."""
    if state.salt is None:
        raise StateError("internal: the salt is made before the state is written")
    document: dict[str, Any] = {
        "format_version": LEGACY_KEYED_VERSION if state.legacy_keyed else FORMAT_VERSION,
        "lineage": state.lineage,
        "serial": state.serial,
        "salt": state.salt,
    }
    if not state.legacy_keyed:
        document["key_check"] = state.key_check
    document["bots"] = dict(sorted(bots.items()))
    if state.rollout:
        document["rollout"] = {k: state.rollout[k].to_json() for k in sorted(state.rollout)}
    if state.previews:
        document["previews"] = {k: state.previews[k].to_json() for k in sorted(state.previews)}
    if not state.agent.empty:
        document["agent"] = state.agent.to_json()
    return document


# One encoder for every call: json.dumps builds a new one whenever an option is given.
_ENCODER = json.JSONEncoder(ensure_ascii=False)


class RenderedJson(str):
    """JSON text ``render_json`` already produced at the depth it is placed at: kept as is."""


def render_json(value: Any, depth: int = 0) -> str:
    """JSON with one line per record: mappings that hold mappings are laid out one key per
    line, and every other value (an attribute record, a settings group such as ``styles``)
    is written on a single line. Diffs stay per record, and records go through the C encoder,
    which ``indent=2`` turns off (see README, Benchmarks)."""
    if isinstance(value, RenderedJson):
        return value
    if isinstance(value, dict) and any(isinstance(v, dict | RenderedJson) for v in value.values()):
        pad = "  " * (depth + 1)
        lines = [
            f"{pad}{_ENCODER.encode(key)}: {render_json(item, depth + 1)}"
            for key, item in value.items()
        ]
        return "{\n" + ",\n".join(lines) + "\n" + "  " * depth + "}"
    return _ENCODER.encode(value)
