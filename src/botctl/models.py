"""The three views of the same chatbots, built from each resource kind's model, so the diff
compares like with like:

- ``Desired``: what the configuration declares (``BotSpec`` per chatbot);
- ``Live``: what the service lets botctl observe right now (``LiveBot``);
- ``State``: what botctl last applied (``BotRecord``), for what the service cannot read back.

Identity keys: a chatbot by its ``chatbotId``, an attribute by ``name`` within its chatbot.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.plan import BotRef, Operation
from botctl.resources import attributes, settings
from botctl.resources.attributes import CustomAttribute, OffContract
from botctl.resources.settings import ChatbotSettings, Refused
from botctl.sealing import Sealed, Secret, holds_secret
from botctl.values import JsonValue


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

    @property
    def ref(self) -> BotRef:
        return BotRef(self.name, self.chatbot_id, self.api_key_env)

    @property
    def secret_values(self) -> frozenset[str]:
        return frozenset(secret.value for secret in self.secrets)

    def secret_locations(self) -> set[str]:
        """Where this document's values hold a secret, as ``State`` names them
        (``settings_location``, ``attribute_location``)."""
        values = self.secret_values
        if not values:
            return set()
        found = {
            settings_location(path)
            for path, value in self.settings.leaves.items()
            if holds_secret(value, values)
        }
        for attribute in self.attributes:
            found |= {
                attribute_location(attribute.name, key)
                for key, value in attribute.managed().items()
                if holds_secret(value, values)
            }
        return found


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


class Live(BaseModel):
    model_config = ConfigDict(frozen=True)

    bots: dict[str, LiveBot] = Field(default_factory=dict)  # by chatbot id
    # Every chatbot each account lists, by the key variable it was read with (id -> name),
    # when the account's chatbot list could be read.
    listed: dict[str, dict[str, str]] = Field(default_factory=dict)


def settings_location(path: str) -> str:
    """A settings leaf (dotted path), as a secret location."""
    return f"settings:{path}"


def attribute_location(name: str, key: str) -> str:
    """A field of an attribute, as a secret location."""
    return f"attribute:{name}:{key}"


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

    def raw_leaves(self) -> dict[str, JsonValue]:
        """Every recorded settings leaf, sealed ones as their ``Sealed``."""
        return {**self.settings.leaves, **self.sealed_settings}

    def raw_attribute(self, name: str) -> dict[str, JsonValue] | None:
        """The recorded attribute as JSON, its sealed fields as their ``Sealed``."""
        attribute = self.attributes.get(name)
        if attribute is None:
            return None
        return {**attribute.to_json(), **self.sealed_attributes.get(name, {})}


@dataclass
class State:
    lineage: str | None = None  # None until the first write creates the file
    serial: int = 0
    bots: dict[str, BotRecord] = field(default_factory=dict)  # by chatbot id
    # The lineage's key for fingerprints (hex); None until the state has one (a new state,
    # or one read from a format without it, gets one when it is written).
    salt: str | None = field(default=None, repr=False)
    outdated: bool = False  # read from an older format: rewritten at the next write
    # What this run knows must never be written in clear: secret values, and per chatbot the
    # locations where its configuration holds one (see ``protect``). In memory only.
    secrets: frozenset[str] = field(default=frozenset(), repr=False)
    secret_locations: dict[str, set[str]] = field(default_factory=dict, repr=False)

    def protect(self, secrets: Iterable[str], locations: Mapping[str, set[str]]) -> None:
        """Values to write only as fingerprints: any holding one of ``secrets``, and any at
        one of ``locations`` (chatbot id -> locations), which may hold a secret the
        configuration no longer has (rotated since it was recorded in clear by an older
        botctl)."""
        self.secrets = self.secrets | frozenset(secrets)
        for chatbot_id, found in locations.items():
            self.secret_locations.setdefault(chatbot_id, set()).update(found)

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
        record = self.record(op.bot)
        if op.resource == "settings":
            record.settings = settings.fold(record.settings, op)
            sent = set(op.body)
            record.verified_settings = {
                path for path in record.verified_settings if path.split(".", 1)[0] not in sent
            }
            record.sealed_settings = {
                path: v for path, v in record.sealed_settings.items() if _top(path) not in sent
            }
        else:
            attributes.fold(record.attributes, op)
            record.verified_attributes.discard(op.subject)
            record.sealed_attributes.pop(op.subject, None)

    def record_verified(
        self,
        bot: BotRef,
        settings_values: Mapping[str, JsonValue],
        attribute_records: Mapping[str, CustomAttribute],
    ) -> bool:
        """Record values read from the service (leaf paths and attributes) as verified.
        Returns whether anything changed."""
        record = self.record(bot)
        before = (record.settings, dict(record.attributes), set(record.verified_settings))
        verified_attributes = set(record.verified_attributes)
        sealed = (dict(record.sealed_settings), dict(record.sealed_attributes))
        if settings_values:
            record.settings = settings.with_leaves(record.settings, settings_values)
            record.verified_settings |= set(settings_values)
            for path in settings_values:
                record.sealed_settings.pop(path, None)
        for name, attribute in attribute_records.items():
            record.attributes[name] = attribute
            record.verified_attributes.add(name)
            record.sealed_attributes.pop(name, None)
        after = (record.settings, record.attributes, record.verified_settings)
        return (
            before != after
            or verified_attributes != record.verified_attributes
            or sealed != (record.sealed_settings, record.sealed_attributes)
        )


def _top(path: str) -> str:
    return path.split(".", 1)[0]
