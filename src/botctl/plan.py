"""The Plan: the requests that make the service match the configuration, each with the changes
it carries out and how sure botctl is of every current value.

One object, two readers: a reviewer reads the ``Change``s (one per settings leaf or attribute),
``apply`` sends the ``Operation``s (one settings update per chatbot, one request per
attribute). An ``Operation`` owns the changes it makes, so the two can never disagree. Frozen,
deterministically ordered, and free of any I/O: writing it to a file is ``store.planfile``'s
job, showing it ``render``'s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Annotated, Any, Literal

from botctl.sealing import FingerprintKey, Secret
from botctl.values import JsonValue, net_worthy

# "reassert": a value botctl cannot read back, sent again as last applied (`--reassert`).
# "rename": an attribute declared with `renamedFrom`: created, the contacts' values moved to
# it, the old one archived (one operation, `migrate_attribute`).
Action = Literal["create", "update", "archive", "unarchive", "reassert", "rename"]
Confidence = Literal["verified", "assumed", "unknown"]
# "service": botctl read what the service lets it read (each change's confidence says what it
# could verify); "none": it sent no read at all (--no-reads) and relied on its state file.
Reads = Literal["service", "none"]
ItemOp = Literal["add", "remove", "change"]

ACTIONS: tuple[Action, ...] = ("create", "update", "archive", "unarchive", "reassert", "rename")
# A resource kind's name ("settings", "attribute", or a kind registered later: see
# ``resources.registry``), and the kinds of operation each sends.
Resource = str


class _Registered:
    """For pydantic (a plan file read back): an operation kind must be one a registered
    resource kind sends. pydantic is imported only when a model that holds one is built."""

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_after_validator_function(_registered, handler(source))


def _registered(kind: str) -> str:
    if kind not in RESOURCE_OF:
        from pydantic_core import PydanticCustomError

        known = ", ".join(repr(k) for k in RESOURCE_OF)
        raise PydanticCustomError(
            "literal_error", "Input should be one of {known}", {"known": known}
        )
    return kind


OperationKind = Annotated[str, _Registered]
RESOURCE_OF: dict[OperationKind, Resource] = {
    "update_settings": "settings",
    "create_attribute": "attribute",
    "update_attribute": "attribute",
    "ensure_attribute": "attribute",
}
_RESOURCE_ORDER: dict[Resource, int] = {"settings": 0, "attribute": 1}


def register_resource(resource: Resource, order: int, kinds: tuple[OperationKind, ...]) -> None:
    """A resource kind's operations (``resources.registry.register`` calls this): which
    resource each operation kind writes, and where the kind's operations come in a chatbot's
    sequence."""
    for kind in kinds:
        known = RESOURCE_OF.setdefault(kind, resource)
        if known != resource:
            raise ValueError(f"operation kind {kind!r} already belongs to {known!r}")
    _RESOURCE_ORDER[resource] = order


def unregister_resource(resource: Resource, kinds: tuple[OperationKind, ...]) -> None:
    for kind in kinds:
        RESOURCE_OF.pop(kind, None)
    _RESOURCE_ORDER.pop(resource, None)


# Flags a change may carry; renderers show each prominently.
FLAG_CUTS_OFF_USERS = "cuts-off-users"


@dataclass(frozen=True)
class BotRef:
    """A chatbot of the configuration: its handle, its id, and where its API key lives."""

    name: str  # metadata.name
    chatbot_id: str
    api_key_env: str


@dataclass(frozen=True)
class ItemChange:
    """One item of a list or nested value that a change adds, removes or changes: what a
    reviewer needs to see in a 40-line greeting list (``+ "example.org"``)."""

    op: ItemOp
    where: str  # "[2]" for a list item, "buttonColor" for a nested field
    before: JsonValue = None
    after: JsonValue = None


@dataclass(frozen=True)
class Change:
    """One managed value that differs (or whose current value is unknown)."""

    resource: Resource
    path: str  # settings: dotted path (styles.buttonColor); attribute: its name
    action: Action
    before: JsonValue  # None when unknown or absent; secrets masked
    after: JsonValue
    confidence: Confidence
    flags: tuple[str, ...] = ()
    detail: tuple[ItemChange, ...] = ()
    # An attribute's archive or rename: how many contacts carry a value for it (the old one,
    # for a rename), counted when the plan was made; None when not counted, and
    # ``contacts_note`` says why (--no-contact-reads, the read cap, a service without reads).
    contacts_with_value: int | None = None
    contacts_note: str = ""

    @property
    def carries_contacts(self) -> bool:
        """Whether the change retires or moves contacts' values (so they are counted): an
        archive or a rename, which only attributes have."""
        return self.action in ("archive", "rename")


@dataclass(frozen=True)
class Operation:
    """One request of the apply, and the changes it carries out.

    ``ensure_attribute`` is an update that falls back to a create on 404 (``fallback`` is the
    create body): used when botctl cannot know whether the attribute exists (no reads, no
    state), so that it can never create an attribute twice."""

    bot: BotRef
    kind: OperationKind
    subject: str  # "settings", or the attribute's name
    body: dict[str, JsonValue]
    state_record: dict[str, JsonValue]  # what the state keeps once this succeeded
    changes: tuple[Change, ...] = ()
    fallback: dict[str, JsonValue] | None = None
    # What it sends (``Plan.requests``): its own requests (a rename's create and archive: 0
    # to 2), and the contacts' requests of one that moves their values (a rename): pages read
    # and updates at most, None until counted (``reconcile.usage``).
    sends: int = 1
    contact_reads: int | None = 0
    contact_updates: int | None = 0

    @property
    def resource(self) -> Resource:
        return RESOURCE_OF[self.kind]

    @property
    def label(self) -> str:
        return f"{self.bot.name}: {self.kind} {self.subject}"

    def sort_key(self) -> tuple[str, int, str]:
        return (self.bot.name, _RESOURCE_ORDER[self.resource], self.subject)


@dataclass(frozen=True)
class Requests:
    """What applying a plan sends, and how long that takes at a known pace.

    ``writes``: the operations' own requests; ``contact_reads`` and ``contact_updates``: the
    requests of the renames' contacts (pages read, updates at most), None when the contacts
    were not counted. ``per_key``: the total of each API key's variable (None: not known),
    since a pace is per key and keys are sent to at once."""

    writes: int
    contact_reads: int | None
    contact_updates: int | None
    per_key: dict[str, int | None]
    rate_limit: float  # requests per second per key the run keeps to (--rate-limit); 0: none

    @property
    def total(self) -> int | None:
        if self.contact_reads is None or self.contact_updates is None:
            return None
        return self.writes + self.contact_reads + self.contact_updates

    @property
    def seconds(self) -> float | None:
        """At the known pace: the slowest key's requests, one interval apart. None without a
        pace, or with a count not known."""
        totals = list(self.per_key.values())
        if self.rate_limit <= 0 or any(n is None for n in totals):
            return None
        return max((n or 0) for n in totals) / self.rate_limit if totals else 0.0

    def to_document(self) -> dict[str, Any]:
        seconds = self.seconds
        return {
            "total": self.total,
            "writes": self.writes,
            "contact_reads": self.contact_reads,
            "contact_updates": self.contact_updates,
            "rate_limit": self.rate_limit or None,
            "seconds": round(seconds, 1) if seconds is not None else None,
        }


def _sum(counts: list[int | None]) -> int | None:
    return None if any(n is None for n in counts) else sum(n or 0 for n in counts)


# Where a value a plan relied on was known from: read from the service, or recorded in state.
Source = Literal["service", "state"]


@dataclass(frozen=True)
class Dependency:
    """A value the plan relies on (of a chatbot it writes to): read from the service
    (``verified``) or recorded in the state (``assumed``); a saved plan is stale once it
    moved. ``value`` is None for "absent" (e.g. the attribute did not exist); a recorded value
    may hold ``sealing.Sealed`` parts. ``secret``: the configuration holds a secret there, so
    a plan file keeps only the value's fingerprint."""

    chatbot_id: str
    resource: Resource
    path: str
    value: JsonValue
    source: Source = "service"
    secret: bool = False


@dataclass(frozen=True)
class Unmanaged:
    """A live item (an attribute) botctl never managed and the configuration does not
    declare."""

    bot: BotRef
    name: str
    resource: Resource = "attribute"


@dataclass(frozen=True)
class Unmanageable:
    """A live attribute record outside the contract's rules (a name with a space, type
    "select", ``archived: 0``): kept as it is, reported with the reason, never written to
    and never archived."""

    bot: BotRef
    name: str | None  # as the service holds it; None when the record has no name
    reason: str


# Why a chatbot is in a scoped plan (--changed-since): see README "Planning only what changed".
ScopeReason = Literal[
    "added",  # not in the configuration at the revision
    "changed",  # its resolved configuration differs from the revision's
    "removed",  # in the configuration at the revision, not now: nothing to plan for it
    "pending",  # the state records values other than the configuration's (an apply unfinished)
    "unrecorded",  # the state holds no record of it: nothing says it was applied
    "chatbot-id-changed",  # the same metadata.name with another chatbotId (remove + add)
    "api-key-env-changed",  # the same metadata.name with another apiKeyEnv (remove + add)
    "base-invalid",  # the configuration at the revision does not load: every chatbot
]
SCOPE_REASONS: dict[ScopeReason, str] = {
    "added": "added",
    "changed": "configuration changed",
    "removed": "removed from the configuration (nothing is planned for it)",
    "pending": "the state records a change not applied",
    "unrecorded": "the state holds no record of it",
    "chatbot-id-changed": "its chatbotId changed",
    "api-key-env-changed": "its apiKeyEnv changed",
    "base-invalid": "the configuration at the revision does not load",
}


@dataclass(frozen=True)
class ScopedBot:
    bot: BotRef
    reasons: tuple[ScopeReason, ...]

    @property
    def removed(self) -> bool:
        return "removed" in self.reasons


@dataclass(frozen=True)
class Scope:
    """What ``--changed-since REF`` narrowed a run to: the chatbots planned, each with why,
    out of ``total`` chatbots of the configuration (the selection applied)."""

    ref: str  # as given
    commit: str  # the full commit id it resolved to
    total: int  # chatbots of the configuration now, selected
    bots: tuple[ScopedBot, ...] = ()  # in scope, and removed ones (planned: nothing)
    problem: str | None = None  # why the configuration at the revision did not load

    @property
    def planned(self) -> tuple[ScopedBot, ...]:
        return tuple(b for b in self.bots if not b.removed)

    @property
    def removed(self) -> tuple[ScopedBot, ...]:
        return tuple(b for b in self.bots if b.removed)

    def line(self, quote: Callable[[str], str] = str) -> str:
        """``Scope: 3 of 500 chatbots changed since 1a2b3c4d5e6f (main)``; ``quote`` shows
        the commit and the ref as written (Markdown: code spans)."""
        ref = "" if self.commit.startswith(self.ref) else f" ({quote(self.ref)})"
        removed = f", {len(self.removed)} removed" if self.removed else ""
        return (
            f"Scope: {len(self.planned)} of {self.total} chatbots changed since "
            f"{quote(self.commit[:12])}{ref}{removed}"
        )

    def to_document(self) -> dict[str, Any]:
        return {
            "ref": self.ref,
            "commit": self.commit,
            "total": self.total,
            "planned": len(self.planned),
            "removed": len(self.removed),
            "chatbots": [
                {
                    "chatbotId": b.bot.chatbot_id,
                    "bot": b.bot.name,
                    "apiKeyEnv": b.bot.api_key_env,
                    "reasons": list(b.reasons),
                }
                for b in self.bots
            ],
            **({"problem": self.problem} if self.problem else {}),
        }


@dataclass(frozen=True)
class Plan:
    operations: tuple[Operation, ...] = ()
    unmanaged: tuple[Unmanaged, ...] = ()
    unmanageable: tuple[Unmanageable, ...] = ()
    unverified: int = 0  # managed values whose current value could not be read
    depends_on: tuple[Dependency, ...] = ()
    state_serial: int | None = None
    state_lineage: str | None = None
    warnings: tuple[str, ...] = ()
    bots: tuple[BotRef, ...] = field(default=())  # every chatbot the plan covers, in order
    # Safety caps this plan exceeds; apply refuses it unless forced (see reconcile.safety).
    violations: tuple[str, ...] = ()
    # The ${secret:...}s of the configuration: masked wherever the plan or its requests are
    # shown; a plan file keeps where each goes in a request, never its value.
    secrets: frozenset[Secret] = frozenset()
    # The key of the fingerprints of the state the plan was made against, when that state
    # has a salt and its key is known (a plan file's fingerprints then use it); and the state
    # key itself (a plan made without such a state keys its own salt with it). Never written.
    fingerprints: FingerprintKey | None = field(default=None, repr=False, compare=False)
    state_key: bytes | None = field(default=None, repr=False, compare=False)
    # The cipher of a state encrypted at rest (``store.crypt.Cipher``): a saved plan follows
    # the state's setting. Never written.
    state_cipher: object | None = field(default=None, repr=False, compare=False)
    # Chatbots of the configuration the service does not list: an error for each, while the
    # others are planned as usual.
    missing: tuple[BotRef, ...] = ()
    reads: Reads = "service"
    # --changed-since: the chatbots this plan covers out of the configuration's, and why.
    scope: Scope | None = None
    # The pace the run keeps to, per API key (--rate-limit; 0: none known): the time its
    # requests take (``requests``). Never written to a plan file: the applying run's counts.
    rate_limit: float = field(default=0.0, compare=False)

    def __post_init__(self) -> None:
        # Deterministic order whatever the producer did: same input, byte-identical output.
        ordered = []
        for op in sorted(self.operations, key=Operation.sort_key):
            changes = tuple(sorted(op.changes, key=lambda c: c.path))
            ordered.append(op if changes == op.changes else replace(op, changes=changes))
        object.__setattr__(self, "operations", tuple(ordered))
        object.__setattr__(
            self, "unmanaged", tuple(sorted(self.unmanaged, key=lambda u: (u.bot.name, u.name)))
        )
        object.__setattr__(
            self,
            "unmanageable",
            tuple(sorted(self.unmanageable, key=lambda u: (u.bot.name, u.name or "", u.reason))),
        )
        object.__setattr__(
            self,
            "depends_on",
            tuple(
                sorted(self.depends_on, key=lambda d: (d.chatbot_id, d.resource, d.path, d.source))
            ),
        )

    @property
    def secret_values(self) -> frozenset[str]:
        """Each secret, and for one too short for the substring net, the whole strings of
        the requests that hold it (masked where they stand, as ``BotSpec.secret_values``)."""
        values = frozenset(secret.value for secret in self.secrets)
        short = values - set(net_worthy(values))
        if not short:
            return values
        held = {
            text
            for op in self.operations
            for text in _strings(op.body)
            if any(secret in text for secret in short)
        }
        return values | held

    @property
    def empty(self) -> bool:
        """Nothing to send."""
        return not self.operations

    @property
    def changed(self) -> bool:
        """Whether anything differs (what --detailed-exitcode reports): a plan that only
        reasserts values it cannot read back sends requests but changes nothing known."""
        return any(change.action != "reassert" for _, change in self.changes())

    def changes(self) -> Iterator[tuple[BotRef, Change]]:
        """Every change with the chatbot it belongs to, in plan order."""
        for op in self.operations:
            for change in op.changes:
                yield op.bot, change

    def summary(self) -> dict[str, int]:
        counts = Counter(change.action for _, change in self.changes())
        result: dict[str, int] = {action: counts.get(action, 0) for action in ACTIONS}
        result["unmanaged"] = len(self.unmanaged)
        result["unmanageable"] = len(self.unmanageable)
        result["unverified"] = self.unverified
        result["missing"] = len(self.missing)
        result["operations"] = len(self.operations)
        return result

    def requests(self) -> Requests:
        """What applying the plan sends (see ``Requests``)."""
        per_key: dict[str, list[int | None]] = {}
        for op in self.operations:
            counts = [op.sends, op.contact_reads, op.contact_updates]
            per_key.setdefault(op.bot.api_key_env, []).extend(counts)
        return Requests(
            writes=sum(op.sends for op in self.operations),
            contact_reads=_sum([op.contact_reads for op in self.operations]),
            contact_updates=_sum([op.contact_updates for op in self.operations]),
            per_key={key: _sum(counts) for key, counts in per_key.items()},
            rate_limit=self.rate_limit,
        )

    def flagged(self, flag: str) -> list[tuple[BotRef, Change]]:
        return [(bot, c) for bot, c in self.changes() if flag in c.flags]

    def to_document(self) -> dict[str, Any]:
        """The published JSON contract of ``botctl plan --format json`` (README "JSON")."""
        return {
            "format_version": OUTPUT_FORMAT_VERSION,
            "reads": self.reads,
            "changes": [change_document(bot, c) for bot, c in self.changes()],
            "unmanaged": [unmanaged_document(u) for u in self.unmanaged],
            "unmanageable": [unmanageable_document(u) for u in self.unmanageable],
            "missing": [bot_document(bot) for bot in self.missing],
            "summary": self.summary(),
            "requests": self.requests().to_document(),
            "warnings": list(self.warnings),
            "violations": list(self.violations),
            **({"scope": self.scope.to_document()} if self.scope is not None else {}),
        }


# The version of the JSON that `plan` and `drift` print; fields are only added within it.
OUTPUT_FORMAT_VERSION = 1


def change_document(bot: BotRef, change: Change) -> dict[str, Any]:
    document: dict[str, Any] = {
        "chatbotId": bot.chatbot_id,
        "bot": bot.name,
        "resource": change.resource,
        "key": change.path,
        "action": change.action,
        "before": change.before,
        "after": change.after,
        "confidence": change.confidence,
        "flags": list(change.flags),
    }
    if change.detail:
        document["detail"] = detail_documents(change.detail)
    if change.carries_contacts:
        document["contacts_with_value"] = change.contacts_with_value
        if change.contacts_note:
            document["contacts_note"] = change.contacts_note
    if change.action == "rename" and isinstance(change.before, dict):
        document["renamed_from"] = change.before.get("name")
    return document


def detail_documents(detail: tuple[ItemChange, ...]) -> list[dict[str, Any]]:
    """Item-level detail in the JSON contract: ``{"op", "at", "before", "after"}`` each."""
    return [{"op": d.op, "at": d.where, "before": d.before, "after": d.after} for d in detail]


def bot_document(bot: BotRef) -> dict[str, Any]:
    return {"chatbotId": bot.chatbot_id, "bot": bot.name}


def unmanaged_document(unmanaged: Unmanaged) -> dict[str, Any]:
    return {
        "chatbotId": unmanaged.bot.chatbot_id,
        "bot": unmanaged.bot.name,
        "name": unmanaged.name,
    }


def unmanageable_document(unmanageable: Unmanageable) -> dict[str, Any]:
    return {
        "chatbotId": unmanageable.bot.chatbot_id,
        "bot": unmanageable.bot.name,
        "name": unmanageable.name,
        "reason": unmanageable.reason,
    }


def _strings(value: JsonValue) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, Mapping):
        return [text for item in value.values() for text in _strings(item)]
    return []
