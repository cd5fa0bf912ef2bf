"""The state file: botctl's record of what it last applied or verified, for drift and for what
the service cannot read back.

Format (JSON, versioned; one line per record so that diffs of it stay readable)::

    {"format_version": 3, "lineage": "<uuid>", "serial": 7, "salt": "<64 hex digits>",
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
fingerprint is, keyed with the lineage's ``salt`` (``botctl.sealing``), so the state is safe to
commit. Version 1 documents (no verified marks: everything sent) and version 2 documents
(secrets in clear) are read and rewritten as version 3 at the next write. The document is read
through the same models the diff uses: a malformed one is an error that names the place, never
a crash.

A chatbot's record holds the format's own fields (settings and attributes, above) and the keys
of every other resource kind of the registry (``ResourceKind.state_keys``, written by its
``dump`` and read by its ``load``).

Where the document is kept is a backend's business (``store/backends``: a file, a git branch,
an S3 object): every function here takes a ``--state`` value (a path or URL) or an open
``StateBackend``. Each write is atomic (a reader or a killed process never sees half a
document) and a compare-and-swap against the version this run read: a state changed under
the run is never overwritten.
"""

from __future__ import annotations

import contextlib
import enum
import json
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from pydantic_core import from_json

from botctl.errors import StateError, StateWriteError
from botctl.models import BotRecord, State, attribute_location, settings_location
from botctl.plan import Operation
from botctl.resources.attributes import CustomAttribute
from botctl.resources.registry import kinds, state_keys
from botctl.resources.settings import ChatbotSettings
from botctl.sealing import (
    SALT_PATTERN,
    SEALED_KEY,
    Sealed,
    encode,
    holds_secret,
    new_salt,
    seal,
    sealed_of,
)
from botctl.store.backend import LostCompareAndSwap, StateBackend, Version
from botctl.store.backends import StateLocation, using_backend
from botctl.store.files import first_problem
from botctl.values import JsonValue, unflatten

FORMAT_VERSION = 3
READABLE_VERSIONS = (1, 2, 3)
_SEALABLE_ATTRIBUTE_FIELDS = ("label", "description")
_BOT_DEPTH = 2  # where a chatbot's record sits in the file: root -> "bots" -> chatbot id


class _RecordFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    bot: str
    settings: ChatbotSettings = Field(default_factory=ChatbotSettings)
    verified_settings: tuple[str, ...] = ()
    attributes: dict[str, CustomAttribute] = Field(default_factory=dict)
    verified_attributes: tuple[str, ...] = ()


class _StateFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    format_version: int
    lineage: str
    serial: int
    salt: Annotated[str, StringConstraints(pattern=SALT_PATTERN)] | None = None  # from 3 on
    bots: dict[str, _RecordFile]


# Sealed values of one chatbot's record: settings by leaf path, attribute fields by name.
_SealedOf = tuple[dict[str, Sealed], dict[str, dict[str, Sealed]]]


class Unread(enum.Enum):
    """A version not known: the stored document is read to check it is ``state``'s own."""

    UNREAD = "unread"


UNREAD = Unread.UNREAD


@dataclass(frozen=True)
class StoredState:
    """A state as read, with the version of the stored document it came from (None: there
    was no state, and ``state`` is empty)."""

    state: State
    version: Version


def read_state(where: StateLocation | StateBackend) -> StoredState:
    """Read the state and its version; no state is an empty state (botctl still converges)."""
    with using_backend(where) as backend:
        snapshot = backend.read()
        if snapshot.text is None:
            return StoredState(State(), snapshot.version)
        return StoredState(state_from_text(snapshot.text, backend.where), snapshot.version)


def load_state(where: StateLocation | StateBackend) -> State:
    """Read the state (see ``read_state``) when no write will follow."""
    return read_state(where).state


def state_from_text(text: str, where: str) -> State:
    """Parse a state document; ``where`` names it in errors (a path, a URL)."""
    text, sealed = _take_sealed(text)
    text, kept = _take_kind_records(text)
    try:
        data = _StateFile.model_validate_json(text)
    except ValidationError as exc:
        _check_version(where, text)
        raise _invalid(where, first_problem(exc)) from None
    _check_version(where, text, data.format_version)
    if data.format_version >= 3 and data.salt is None:
        raise _invalid(where, "salt: Field required")
    if sealed and data.salt is None:
        raise _invalid(where, "sealed values in a state without a salt")
    no_seals: _SealedOf = ({}, {})
    bots = {
        chatbot_id: BotRecord(
            bot=rec.bot,
            settings=rec.settings,
            attributes=rec.attributes,
            verified_settings=set(rec.verified_settings),
            verified_attributes=set(rec.verified_attributes),
            sealed_settings=sealed.get(chatbot_id, no_seals)[0],
            sealed_attributes=sealed.get(chatbot_id, no_seals)[1],
            parts=_kind_parts(where, chatbot_id, kept.get(chatbot_id, {})),
        )
        for chatbot_id, rec in data.bots.items()
    }
    return State(
        lineage=data.lineage,
        serial=data.serial,
        bots=bots,
        salt=data.salt,
        outdated=data.format_version < FORMAT_VERSION,
    )


def _invalid(where: str, problem: str) -> StateError:
    return StateError(
        f"state file {where} is not valid botctl state ({problem}); restore it from a backup, "
        "or move it away to start over (botctl then re-sends what it cannot verify)"
    )


def _take_sealed(text: str) -> tuple[str, dict[str, _SealedOf]]:
    """The document without its sealed values (``{"$sealed": ...}``, where a settings leaf or
    an attribute's label or description would be), and those values by chatbot. A marker
    anywhere else stays, for the models to refuse by its place."""
    if SEALED_KEY not in text:
        return text, {}  # the common case costs one scan, not a second parse
    try:  # pydantic's parser: bounded nesting, where json.loads raises RecursionError
        data = from_json(text)
    except ValueError:
        return text, {}
    bots = data.get("bots") if isinstance(data, dict) else None
    if not isinstance(bots, dict):
        return text, {}
    found: dict[str, _SealedOf] = {}
    for chatbot_id, record in bots.items():
        if not isinstance(record, dict):
            continue
        sealed_settings: dict[str, Sealed] = {}
        sealed_attributes: dict[str, dict[str, Sealed]] = {}
        if isinstance(record.get("settings"), dict):
            record["settings"] = _strip_sealed(record["settings"], "", sealed_settings)
        attributes = record.get("attributes")
        for name, attribute in (attributes if isinstance(attributes, dict) else {}).items():
            if not isinstance(attribute, dict):
                continue
            fields = {
                key: sealed
                for key in _SEALABLE_ATTRIBUTE_FIELDS
                if (sealed := sealed_of(attribute.get(key))) is not None
            }
            if fields:
                sealed_attributes[name] = fields
                for key in fields:
                    del attribute[key]
        if sealed_settings or sealed_attributes:
            found[str(chatbot_id)] = (sealed_settings, sealed_attributes)
    return json.dumps(data, ensure_ascii=False), found


def _take_kind_records(text: str) -> tuple[str, dict[str, dict[str, Any]]]:
    """The document without the keys of the registry's kinds that have their own (see the
    module's docstring), and those keys' values by chatbot; the text itself when no kind
    has any."""
    keys = set(state_keys())
    if not keys:
        return text, {}
    try:  # pydantic's parser: bounded nesting, where json.loads raises RecursionError
        data = from_json(text)
    except ValueError:
        return text, {}
    bots = data.get("bots") if isinstance(data, dict) else None
    if not isinstance(bots, dict):
        return text, {}
    found: dict[str, dict[str, Any]] = {}
    for chatbot_id, record in bots.items():
        if isinstance(record, dict):
            found[str(chatbot_id)] = {key: record.pop(key) for key in keys if key in record}
    return json.dumps(data, ensure_ascii=False), found


def _kind_parts(where: str, chatbot_id: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """The parts each kind reads from its keys of one chatbot's record."""
    parts: dict[str, Any] = {}
    for kind in kinds():
        try:
            parts.update(kind.load(document))
        except ValueError as exc:
            raise _invalid(where, f"bots.{chatbot_id}.{exc}") from None
    return parts


def _strip_sealed(values: dict[str, Any], prefix: str, out: dict[str, Sealed]) -> dict[str, Any]:
    kept: dict[str, Any] = {}
    for key, value in values.items():
        sealed = sealed_of(value)
        if sealed is not None:
            out[f"{prefix}{key}"] = sealed
        elif isinstance(value, dict) and value:
            inner = _strip_sealed(value, f"{prefix}{key}.", out)
            if inner:  # a nested object that held only sealed values is not one to keep
                kept[key] = inner
        else:
            kept[key] = value
    return kept


def _check_version(where: str, text: str, version: object = None) -> None:
    """A file of another format version is refused as such, before its content is judged."""
    if version is None:
        try:  # pydantic's parser: bounded nesting, where json.loads raises RecursionError
            version = from_json(text).get("format_version")
        except (ValueError, AttributeError):
            return
    if version not in READABLE_VERSIONS:
        raise StateError(
            f"state file {where} has format_version {version!r}; this botctl reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}"
        )


def state_document(state: State, bots: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The state file's content; ``bots``, when given, are the chatbots' records already
    rendered (see ``StateWriter``)."""
    if bots is None:
        bots = {chatbot_id: record_document(state, chatbot_id) for chatbot_id in state.bots}
    return {
        "format_version": FORMAT_VERSION,
        "lineage": state.lineage,
        "serial": state.serial,
        "salt": state_salt(state),
        "bots": dict(sorted(bots.items())),
    }


def state_salt(state: State) -> str:
    """The lineage's key for fingerprints, created with the first one the state needs."""
    if state.salt is None:
        state.salt = new_salt()
    return state.salt


def record_document(state: State, chatbot_id: str) -> dict[str, Any]:
    """One chatbot's record as written: every value that holds a secret the run knows of, or
    sits where the configuration holds one, as its fingerprint (``State.protect``)."""
    record = state.bots[chatbot_id]
    secret = _secret_test(state, chatbot_id)
    settings: JsonValue = record.settings.json_fields
    if secret is not None or record.sealed_settings:
        salt = state_salt(state)
        leaves: dict[str, Any] = {
            path: seal(salt, value)
            if secret is not None and secret(settings_location(path), value)
            else value
            for path, value in record.settings.leaves.items()
        }
        settings = encode(unflatten({**leaves, **record.sealed_settings}))
    return {
        "bot": record.bot,
        "settings": settings,
        "verified_settings": sorted(record.verified_settings),
        "attributes": {
            name: _attribute_document(state, record, name, secret)
            for name in sorted(record.attributes)
        },
        "verified_attributes": sorted(record.verified_attributes),
        **_kind_documents(state, record, secret),
    }


def _kind_documents(
    state: State, record: BotRecord, secret: Callable[[str, JsonValue], bool] | None
) -> dict[str, JsonValue]:
    """The keys of the kinds that keep their own, each value sealed where it must be."""

    def sealed(location: str, value: JsonValue) -> JsonValue:
        if secret is None or value is None or not secret(location, value):
            return value
        return encode(seal(state_salt(state), value))

    documents: dict[str, JsonValue] = {}
    for kind in kinds():
        documents.update(kind.dump(record, sealed))
    return documents


def _secret_test(state: State, chatbot_id: str) -> Callable[[str, JsonValue], bool] | None:
    """Whether a value at a location must be sealed; None when nothing of this chatbot can."""
    locations = state.secret_locations.get(chatbot_id, set())
    secrets = state.secrets
    if not (locations or secrets):
        return None
    return lambda location, value: location in locations or holds_secret(value, secrets)


def _attribute_document(
    state: State,
    record: BotRecord,
    name: str,
    secret: Callable[[str, JsonValue], bool] | None,
) -> dict[str, Any]:
    document = record.attributes[name].to_json()
    sealed = record.sealed_attributes.get(name, {})
    if secret is None and not sealed:
        return document
    salt = state_salt(state)
    for key in _SEALABLE_ATTRIBUTE_FIELDS:
        value = document.get(key)
        if value is None or secret is None:
            continue
        if secret(attribute_location(name, key), value):
            document[key] = seal(salt, value)
    return dict(encode({**document, **sealed}))


def state_text(state: State, rendered_bots: Mapping[str, RenderedJson] | None = None) -> str:
    """The state file's text for ``state`` as it is (serial and lineage untouched)."""
    return render_json(state_document(state, rendered_bots)) + "\n"


def next_version(state: State) -> None:
    """Before every write: bump the serial, and create the lineage of a new state."""
    if state.lineage is None:
        state.lineage = str(uuid.uuid4())
    state.serial += 1


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


def _same_history(state: State, stored: State) -> bool:
    """Whether ``stored`` is the document ``state`` was read from (or both are empty)."""
    return (stored.lineage, stored.serial) == (state.lineage, state.serial)


def save_state(
    state: State,
    where: StateLocation | StateBackend,
    rendered_bots: Mapping[str, RenderedJson] | None = None,
    *,
    version: Version | Unread = UNREAD,
    message: str = "botctl: state written",
) -> Version:
    """Write ``state``, bumping the serial (creating the lineage if new), if the stored
    document is still the one it was read from: ``version`` when the caller has it (from
    ``read_state``), else the stored document must have ``state``'s lineage and serial.
    ``rendered_bots``: every chatbot's record already rendered (see ``StateWriter``).
    Returns the new version."""
    with using_backend(where) as backend:
        if version is UNREAD:
            stored = read_state(backend)
            if not _same_history(state, stored.state):
                raise LostCompareAndSwap(backend.where)
            version = stored.version
        before = (state.lineage, state.serial)
        next_version(state)
        try:
            written = backend.write(state_text(state, rendered_bots), version, message)
        except BaseException:
            state.lineage, state.serial = before  # not written: still the stored one
            raise
        state.outdated = False
        return written


class StateWriter:
    """Records operations as they succeed and writes the state at most every ``interval``
    seconds (and on ``flush``): one write per operation would rewrite a large state thousands
    of times in a big run (and make as many commits, with a git backend). A kill between
    writes loses at most the last second of records, which is safe: a re-run reads the
    service, or probes before creating (see ``ensure_attribute``), so nothing is created twice
    and what was lost is sent again.

    Every write is a compare-and-swap against the version of the previous one (the first
    against ``version``, from ``read_state``): if anything else wrote the state meanwhile,
    the write fails with ``LostCompareAndSwap`` and overwrites nothing. Each write's message
    (a git backend's commit message) lists the operations it records."""

    def __init__(
        self,
        state: State,
        where: StateLocation | StateBackend,
        interval: float = 1.0,
        *,
        version: Version | Unread = UNREAD,
        command: str = "apply",
    ) -> None:
        self.state = state
        self._stack = contextlib.ExitStack()
        self.backend = self._stack.enter_context(using_backend(where))
        self.interval = interval
        self.command = command
        self._version = version
        # A state of an older format is rewritten in this one (secrets sealed) even when the
        # run records nothing.
        self._dirty = state.outdated
        # Why the last write failed where the state is kept (a full disk), None if it did
        # not: the records stay in memory and the next write tries again. An apply that has
        # started sending carries on (stopping would not undo what was sent) and says so.
        self.error: StateWriteError | None = None
        self._notes: list[str] = []  # what the next write records, for its message
        # Each chatbot's record as last written: a write re-renders only the chatbots changed
        # since, so rewriting a large state costs a few ms.
        self._rendered: dict[str, RenderedJson] = {}
        self._changed: set[str] = set(state.bots)
        # -inf, not 0: monotonic time starts near 0 at boot, and the first record must write.
        self._last_write = float("-inf")

    @property
    def dirty(self) -> bool:
        """Whether the state holds records not written yet."""
        return self._dirty

    def record(self, op: Operation) -> None:
        self.state.apply_operation(op)
        self.touched(op.bot.chatbot_id, op.label)

    def touched(self, chatbot_id: str, note: str | None = None) -> None:
        """The record of ``chatbot_id`` changed (in ``state``): write it out soon. ``note``
        says how, for the write's message (default: the record was updated)."""
        self._changed.add(chatbot_id)
        self._notes.append(note or f"{chatbot_id}: record updated")
        self._dirty = True
        if time.monotonic() - self._last_write >= self.interval:
            self.flush()

    def flush(self) -> None:
        if self._dirty:
            for chatbot_id in self._changed:
                record = record_document(self.state, chatbot_id)
                self._rendered[chatbot_id] = RenderedJson(render_json(record, _BOT_DEPTH))
            self._changed.clear()
            self._last_write = time.monotonic()
            try:
                self._version = save_state(
                    self.state,
                    self.backend,
                    self._rendered,
                    version=self._version,
                    message=self._message(),
                )
            except StateWriteError as exc:
                self.error = exc
                return
            self.error = None
            self._notes.clear()
            self._dirty = False

    def raise_if_failed(self) -> None:
        """The last write's failure, if any, as the error it is."""
        if self.error is not None:
            raise self.error

    def _message(self) -> str:
        count = len(self._notes)
        ops = "operation" if count == 1 else "operations"
        lines = [f"botctl {self.command}: {count} {ops} recorded (serial {self.state.serial + 1})"]
        return "\n".join([*lines, "", *self._notes]) + "\n"

    def close(self) -> None:
        """Flush, and release the backend if the writer opened it."""
        try:
            self.flush()
        finally:
            self._stack.close()
