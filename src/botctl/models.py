"""The three views of the same chatbots, built from each resource kind's model, so the diff
compares like with like:

- ``Desired``: what the configuration declares (``BotSpec`` per chatbot);
- ``Live``: what the service lets botctl observe right now (``LiveBot``);
- ``State``: what botctl last applied (``BotRecord``), for what the service cannot read back.

Identity keys: a chatbot by its ``chatbotId``, an attribute by ``name`` within its chatbot.

Each view holds one part per resource kind, keyed by the kind's key (``part``): a field of
that name where the view has one (``settings``, ``attributes``, ...), else an entry of its
``parts`` mapping, where a new kind keeps its parts without a field of its own. A view is made
from parts the same way whatever the kind (``BotSpec.of``, ``LiveBot.of``, ``set_part``), and
the kinds take their slices out (``resources.kind``): the first kinds' typed fields are storage
the state format and their own modules read, not a path any generic code takes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.errors import StateError
from botctl.plan import BotRef, Operation
from botctl.resources.agentrecord import AgentRecord
from botctl.resources.attribute_model import CustomAttribute, interned
from botctl.resources.attributes import OffContract
from botctl.resources.attributes import secret_location as attribute_secret_location
from botctl.resources.preview import PreviewLease
from botctl.resources.registry import kind_of, kinds
from botctl.resources.rollout import Rollout
from botctl.resources.settings import ChatbotSettings, Refused
from botctl.resources.settings import secret_location as settings_secret_location
from botctl.sealing import FingerprintKey, Sealed, Secret
from botctl.values import JsonValue, net_worthy


class BotSpec(BaseModel):
    """One chatbot as declared in YAML (one document of kind Chatbot)."""

    model_config = ConfigDict(frozen=True)

    name: str  # metadata.name: the handle in plans, state and --target
    chatbot_id: str
    labels: dict[str, str] = Field(default_factory=dict)
    api_key_env: str = DEFAULT_API_KEY_ENV
    settings: ChatbotSettings = Field(default_factory=ChatbotSettings)
    attributes: tuple[CustomAttribute, ...] = ()
    prune: bool = False
    # spec.ignoreAttributes: fnmatch patterns of undeclared live attributes to leave alone.
    ignore_attributes: tuple[str, ...] = ()
    # spec.safety.maxArchivePercent: this document's own cap on archiving in one run.
    max_archive_percent: float | None = None
    source: str = ""  # "file:line" of the document, for messages
    # The ${secret:VAR}s this document resolved: masked wherever a plan is shown, kept in
    # files only as fingerprints (``botctl.sealing``).
    secrets: tuple[Secret, ...] = ()
    # The whole strings of this document that resolved a ${secret:...} (as sent).
    secret_texts: tuple[str, ...] = ()
    # The parts of resource kinds that have no field of their own, by key.
    parts: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, parts: Mapping[str, Any], **common: Any) -> BotSpec:
        """A chatbot as resolved: its ``common`` fields (name, id, ...), and each kind's parts
        (``ResourceKind.from_spec``) in their field, or in ``parts`` when they have none."""
        return cls(**common, **_split(cls.model_fields, parts))

    def part(self, key: str) -> Any:
        return _part(self, _SPEC_FIELDS, key)

    @property
    def ref(self) -> BotRef:
        return BotRef(self.name, self.chatbot_id, self.api_key_env)

    @property
    def secret_values(self) -> frozenset[str]:
        """What marks a secret in this document's values, for masking and sealing: each
        secret, and for a secret too short for the substring net (``values.net_worthy``), the
        whole strings of the document that hold it, which are masked where they stand."""
        values = frozenset(secret.value for secret in self.secrets)
        short = values - set(net_worthy(values))
        if not short:
            return values
        held = {text for text in self.secret_texts if any(secret in text for secret in short)}
        return values | held

    def secret_locations(self) -> set[str]:
        """Where this document's values hold a secret, as ``State`` names them
        (``settings_location``, ``attribute_location``)."""
        values = self.secret_values
        if not values:
            return set()
        return {found for kind in kinds() for found in kind.secret_locations(self, values)}


class Desired(BaseModel):
    model_config = ConfigDict(frozen=True)

    bots: tuple[BotSpec, ...] = ()
    warnings: tuple[str, ...] = ()  # located warnings from the loader, already formatted
    # Every chatbot id the configuration declares, selected for this run or not: a live
    # chatbot outside it is not botctl's.
    declared_ids: frozenset[str] = frozenset()


class LiveBot(BaseModel):
    """What the service lets botctl observe of one chatbot right now.

    ``settings`` is ``None`` when the chatbot list could not be read at all, and otherwise
    holds the fields the read returned (others are not observable). ``refused`` holds the
    settings the read returned but botctl's rules refuse (value as read, and why): not
    observable either, but shown by ``export``. ``attributes`` is ``None`` when the attribute
    list could not be read; ``off_contract`` holds the records it returned that botctl cannot
    manage (reported as unmanageable, shown by ``export``). ``exists`` is false when a
    successful chatbot list did not contain the chatbot.
    """

    model_config = ConfigDict(frozen=True)

    chatbot_id: str
    exists: bool = True
    settings: ChatbotSettings | None = None
    refused: Refused = Field(default_factory=dict)
    attributes: dict[str, CustomAttribute] | None = None
    # Attribute records the read returned outside the contract's rules: never managed.
    off_contract: tuple[OffContract, ...] = ()
    # The parts of resource kinds that have no field of their own, by key.
    parts: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, chatbot_id: str, parts: Mapping[str, Any]) -> LiveBot:
        """A chatbot as read: each part in its field, or in ``parts`` when it has none."""
        return cls(chatbot_id=chatbot_id, **_split(cls.model_fields, parts))

    def part(self, key: str) -> Any:
        return _part(self, _LIVE_FIELDS, key)


# The fields of the containers, once (a plan asks each kind's parts of every chatbot).
_SPEC_FIELDS = frozenset(BotSpec.model_fields)
_LIVE_FIELDS = frozenset(LiveBot.model_fields)


class Live(BaseModel):
    model_config = ConfigDict(frozen=True)

    bots: dict[str, LiveBot] = Field(default_factory=dict)  # by chatbot id
    # Every chatbot each account lists, by the key variable it was read with (id -> name),
    # when the account's chatbot list could be read.
    listed: dict[str, dict[str, str]] = Field(default_factory=dict)


def _split(own: Collection[str], parts: Mapping[str, Any]) -> dict[str, Any]:
    """A container's keyword arguments for ``parts``: each in its field (in ``own``) where it
    has one, the others in its ``parts`` mapping."""
    fields = {key: value for key, value in parts.items() if key in own and key != "parts"}
    others = {key: value for key, value in parts.items() if key not in fields}
    return {**fields, "parts": others}


def _part(container: Any, own: Collection[str], key: str) -> Any:
    """A part of ``container``: its field ``key`` (in ``own``), else its ``parts`` entry (None
    when it has none)."""
    if key in own and key != "parts":
        return getattr(container, key)
    parts: Mapping[str, Any] = container.parts
    return parts.get(key)


# Where a value holds a secret, as ``State`` names it: each kind's own spelling.
settings_location = settings_secret_location
attribute_location = attribute_secret_location


@dataclass
class BotRecord:
    """What botctl last applied to one chatbot, or read from it matching the configuration:
    the settings, the attributes it manages, and which of those values were *verified* (read
    from the service) rather than only sent.

    A value that held a secret when it was written is known only by its fingerprint when read
    back: it is in ``sealed_settings`` (by leaf path) or ``sealed_attributes`` (by attribute,
    then field), and absent from ``settings`` and ``attributes``. The diff compares with it
    through ``reconcile.sealed``."""

    bot: str  # metadata.name when last recorded
    settings: ChatbotSettings = field(default_factory=ChatbotSettings)
    attributes: dict[str, CustomAttribute] = field(default_factory=dict)
    verified_settings: set[str] = field(default_factory=set)  # leaf paths
    verified_attributes: set[str] = field(default_factory=set)  # names
    sealed_settings: dict[str, Sealed] = field(default_factory=dict)
    sealed_attributes: dict[str, dict[str, Sealed]] = field(default_factory=dict)
    # Renames under way (by the new attribute's name): the progress of moving the contacts'
    # values (``resources.contacts.Progress``), so a run killed midway resumes there.
    migrations: dict[str, JsonValue] = field(default_factory=dict)
    # The parts of resource kinds that have no field of their own, by key.
    parts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # As read from the state: the same attributes as declared and read, held once.
        self.attributes = {name: interned(a) for name, a in self.attributes.items()}

    def part(self, key: str) -> Any:
        return _part(self, _RECORD_FIELDS, key)

    def set_part(self, key: str, value: Any) -> None:
        if key in _RECORD_FIELDS and key != "parts":
            setattr(self, key, value)
        else:
            self.parts[key] = value

    def with_parts(self, values: Mapping[str, Any]) -> BotRecord:
        """A copy with some parts replaced."""
        copy = replace(self, parts=dict(self.parts))
        for key, value in values.items():
            copy.set_part(key, value)
        return copy


_RECORD_FIELDS = {f.name: f for f in fields(BotRecord)}


@dataclass
class State:
    lineage: str | None = None  # None until the first write creates the file
    serial: int = 0
    bots: dict[str, BotRecord] = field(default_factory=dict)  # by chatbot id
    # The lineage's salt for fingerprints (hex); None until the state has one (a new state,
    # or one read from a format without it, gets one before it is written).
    salt: str | None = field(default=None, repr=False)
    # Which state key the fingerprints were made under (``FingerprintKey.check``), as read.
    key_check: str | None = None
    # Read from format 3 with fingerprints keyed with the salt alone: kept so (and warned
    # about) until ``botctl state rekey``.
    legacy_keyed: bool = False
    # The state key this run found for the state (``store.keys``): in memory only.
    state_key: bytes | None = field(default=None, repr=False)
    # Where the state key may come from, for messages (``KeySource.hint``).
    key_hint: str = field(default="set BOTCTL_STATE_KEY", repr=False)
    # Stored encrypted (``store.crypt``): written encrypted again. ``cipher`` is the key and
    # parameters it was read or is written with (in memory only).
    encrypted: bool = False
    cipher: object | None = field(default=None, repr=False)
    outdated: bool = False  # read from an older format: rewritten at the next write
    # Warnings about the state itself (coded), for the commands that read it to show.
    warnings: list[str] = field(default_factory=list)
    # What this run knows must never be written in clear: secret values, and per chatbot the
    # locations where its configuration holds one (see ``protect``). In memory only.
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    secret_locations: dict[str, set[str]] = field(default_factory=dict, repr=False)
    # Staged rollout (``resources.rollout``), by chatbot id: apart from the records above.
    rollout: dict[str, Rollout] = field(default_factory=dict)
    # Preview chatbots leased to pull requests (``resources.preview``), by chatbot id.
    previews: dict[str, PreviewLease] = field(default_factory=dict)
    # botctl agent's suspension and each chatbot's last applied revision
    # (``resources.agentrecord``).
    agent: AgentRecord = field(default_factory=AgentRecord)

    def protect(self, secrets: Iterable[str], locations: Mapping[str, set[str]]) -> None:
        """Values to write only as fingerprints: any holding one of ``secrets``, and any at
        one of ``locations`` (chatbot id -> locations), which may hold a secret the
        configuration no longer has (rotated since it was recorded in clear by an older
        botctl)."""
        self.secrets = self.secrets | frozenset(secrets)
        for chatbot_id, found in locations.items():
            self.secret_locations.setdefault(chatbot_id, set()).update(found)

    @property
    def has_sealed(self) -> bool:
        """Whether any record holds a value known only by its fingerprint."""
        return any(kind.has_sealed(r) for r in self.bots.values() for kind in kinds())

    def known_fingerprint_key(self) -> FingerprintKey | None:
        """The key of this state's fingerprints when it can be known: None before the state
        has a salt, or when no state key was found (``store`` reads a state that holds
        fingerprints only with its key)."""
        if self.salt is None:
            return None
        if self.legacy_keyed:
            return FingerprintKey(self.salt)
        if self.state_key is None:
            return None
        return FingerprintKey(self.salt, self.state_key)

    def fingerprint_key(self) -> FingerprintKey:
        """The key of this state's fingerprints. The salt is made before anything is written
        (``store``); the state key must have been found (``store.keys``)."""
        if self.salt is None:
            raise StateError("internal: the state has no salt yet")
        if self.legacy_keyed:
            return FingerprintKey(self.salt)
        if self.state_key is None:
            raise StateError(f"the state's fingerprints need the state key: {self.key_hint}")
        return FingerprintKey(self.salt, self.state_key)

    def record_for(self, chatbot_id: str) -> BotRecord | None:
        return self.bots.get(chatbot_id)

    def record(self, bot: BotRef) -> BotRecord:
        """The record of ``bot``, created when it has none."""
        record = self.bots.setdefault(bot.chatbot_id, BotRecord(bot=bot.name))
        record.bot = bot.name
        return record

    def apply_operation(self, op: Operation) -> None:
        """Fold one successful operation into the record (in memory): what it sent is now
        recorded, as sent (the read-back may verify it)."""
        kind_of(op.resource).fold(self.record(op.bot), op)

    def record_verified(self, bot: BotRef, values: Mapping[str, Mapping[str, Any]]) -> bool:
        """Record values read from the service as verified: per kind (by name), what its
        ``matching`` / ``read_back`` / ``observed`` found. Returns whether anything changed."""
        record = self.record(bot)
        changed = False
        for name, found in values.items():
            if found:
                changed |= kind_of(name).record_verified(record, found)
        return changed
