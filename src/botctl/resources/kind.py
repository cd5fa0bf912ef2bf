"""``ResourceKind``: the one interface every resource kind implements (``resources.registry``
holds the kinds of a run).

Everything above ``resources/`` that handles "each kind" (``models``, ``config``: the document
models, Defaults, ``render``'s view, revisions, export, where a secret may stand;
``reconcile/*``: plans, drift, rollback, contact counts; ``service.live``, ``store``,
``pipeline``: rekey; ``render``) iterates ``registry.kinds()`` or looks a kind up by the
``resource`` a change, operation or dependency names (``registry.kind_of``): none of it
branches on a kind's name (``tests/resources/test_registry.py`` reads all of ``src/`` outside
``resources/`` and ``sandbox/`` for one), so a new kind is one module and one ``register``
call.

A kind never sees the containers of ``models``: it is handed ``Parts`` (a ``BotSpec``, a
``LiveBot``, a ``BotRecord``) and takes its own slices out of it by key (``part``). A part is
the container's field of that name where it has one (``settings``, ``attributes``: the kinds
the configuration format knew first), else its entry in the container's ``parts`` mapping, so a
new kind needs no new field anywhere.

The hooks, in the order of a run:

============================  ==================================================================
hook                          job
============================  ==================================================================
``read_live``                 the service -> this kind's live parts of one chatbot
``secret_locations``          where a declaration holds a ``${secret:}`` (sealed in the state)
``unseal``                    the record's sealed values, compared with what is known in clear
``plan``                      its slice of one chatbot's plan (``BotPlan``)
``premises``                  what a plan writing to the chatbot takes from the state
``send``                      one ``Operation`` of this kind, through the service client
``fold``                      a success, into the chatbot's record (in memory)
``read_back_notes``           sent values the service reads back differently
``matching`` / ``read_back``  values read from the service to record as verified (baseline)
``observed``                  everything a read shows (export's baseline)
``record_verified``           such values, into the record
``current_value``             what the service holds now for a value a plan relied on
``recorded_value``            what the state records now for it
``drift_values``              the live, declared and recorded values drift compares
``drift_shown``               the same values as a reader is shown them
``unmanaged_value``           a live item no declaration names, as shown
``item_detail``               whether list values get item-level detail (plans and drift)
``absent_shown``              how drift shows a live value that is absent
``render_lines``              a change's extra lines in text renderings (None: the default)
``state_keys`` / ``dump`` /   the kind's keys in a chatbot's state record; the format's first
``load``                      kinds (settings, attributes) are ``store.state``'s own model and
                              name none
``has_sealed`` / ``rekey``    whether a record holds fingerprints; those fingerprints made again
                              under a new state key (``botctl state rekey``)
``previous`` / ``restore``    a rollback (``apply --test --rollback-on-failure``): what was known
                              before the apply, and the operation that puts it back (None from
                              ``previous``: never rolled back)
``stranded`` /                contact reads (``reconcile.usage``): declarations the API cannot
``archive_consent`` /         apply whose contacts' values to count; archives consented with
``reads_contacts``            values; operations that read the contacts when applied
============================  ==================================================================

And for the configuration (``config/``), the kind's part of a ``Chatbot`` document:

============================  ==================================================================
hook                          job
============================  ==================================================================
``spec_fields``               its keys of ``spec`` (``SpecField``: type, default, description,
                              and how a Defaults document gives it): the document models, and
                              so the JSON Schema, are built from them (``config.document``)
``from_spec``                 its validated keys -> its parts of a ``BotSpec``
``secret_places`` /           where a ``${secret:...}`` may stand in its keys (a path under
``may_hold_secret``           ``spec``), and those places in words, for the error elsewhere
``section``                   its keys as the resolved document writes them (``botctl render``)
``revision_values``           what a chatbot's configuration revision digests of it
                              (``config.revision``: keys kept stable across versions)
``export``                    its keys of a document made from what the service holds, and the
                              comment lines saying what it could not export (``botctl export``)
============================  ==================================================================
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from botctl.plan import BotRef, Change, Dependency, Operation
from botctl.resources.base import BotPlan
from botctl.sealing import FingerprintKey
from botctl.values import JsonValue

# How a recorded value is known: read from the service, or only sent.
Basis = Literal["verified", "sent"]


# A place in a document, under its ``spec``: keys and list indexes.
SpecPath = tuple[str | int, ...]


@dataclass(frozen=True)
class SpecField:
    """One key of a ``Chatbot`` document's ``spec`` that a kind declares.

    ``annotation`` and ``field`` (a pydantic ``Field(...)``: default, description) are the
    key's in a Chatbot document. ``defaults``, when a ``Defaults`` document may give it too:
    its type and ``Field`` there (default None or empty), and how it reaches each chatbot the
    document selects: ``"under"``, laid under the chatbot's own value (mappings field by field,
    anything else replaced: the chatbot's own wins), or ``"added"``, a sequence whose items come
    before the chatbot's own, each item once."""

    annotation: Any
    field: Any
    defaults: tuple[Any, Any] | None = None
    merge: Literal["under", "added"] = "under"


@dataclass(frozen=True)
class ExportedSection:
    """A kind's keys of an exported document (values as read: ``config.export`` escapes them),
    and comment lines (without their ``#``) naming what it could not export and why."""

    values: dict[str, JsonValue]
    notes: tuple[str, ...] = ()


class Parts(Protocol):
    """A container of per-kind parts (``BotSpec``, ``LiveBot``, ``BotRecord``)."""

    def part(self, key: str) -> Any: ...


class MutableParts(Parts, Protocol):
    """A container a kind writes its parts into (``BotRecord``)."""

    def set_part(self, key: str, value: Any) -> None: ...


class ResourceKind(Protocol):
    """One resource kind (see the module's docstring for each hook)."""

    @property
    def name(self) -> str:
        """The kind's name as changes, operations, dependencies and drift items carry it
        (``Change.resource``)."""
        ...

    @property
    def order(self) -> int:
        """Where its operations come in a chatbot's sequence (lower first)."""
        ...

    @property
    def operation_kinds(self) -> tuple[str, ...]: ...

    @property
    def item_detail(self) -> bool:
        """Whether list values of this kind get item-level detail in plans and drift."""
        ...

    @property
    def state_keys(self) -> tuple[str, ...]:
        """The keys of a chatbot's state record this kind writes (``dump``) and reads
        (``load``)."""
        ...

    @property
    def absent_shown(self) -> str | None:
        """How a drift item shows a live value of None ("absent"); None: as the value."""
        ...

    # -- reading the service ------------------------------------------------------------------
    async def read_live(
        self, client: Any, chatbot_id: str, listed: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        """This kind's live parts of one chatbot. ``listed``: its record in the chatbot list,
        None when the list could not be read (whether it exists is then unknown). A read the
        service does not offer is an unreadable part, never an error."""
        ...

    # -- planning ---------------------------------------------------------------------------
    def secret_locations(self, spec: Parts, secrets: frozenset[str]) -> set[str]: ...

    def unseal(
        self, record: Parts, spec: Parts, live: Parts | None, key: FingerprintKey
    ) -> dict[str, Any]:
        """The record's parts with every sealed value replaced (``reconcile.sealed``); {}
        when it holds none."""
        ...

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
    ) -> None: ...

    def premises(
        self,
        bot: BotRef,
        spec: Parts,
        live: Parts | None,
        record: Parts | None,
        secrets: frozenset[str],
    ) -> list[Dependency]:
        """What a plan that writes to ``bot`` takes from the state: every managed value it
        could not read, as recorded (None: not recorded), sealed values as their ``Sealed``."""
        ...

    # -- applying ---------------------------------------------------------------------------
    async def send(self, op: Operation, client: Any) -> str:
        """Send one operation; returns a note for the progress line."""
        ...

    def fold(self, record: MutableParts, op: Operation) -> None: ...

    def read_back_notes(self, op: Operation, live: Parts) -> list[str]: ...

    # -- the baseline (values to record as verified) -----------------------------------------
    def matching(self, spec: Parts, live: Parts) -> dict[str, Any]: ...

    def read_back(self, op: Operation, live: Parts) -> dict[str, Any]: ...

    def observed(self, live: Parts) -> dict[str, Any]: ...

    def record_verified(self, record: MutableParts, values: Mapping[str, Any]) -> bool:
        """Record ``values`` (as ``matching`` returns them) as verified; whether anything
        changed."""
        ...

    # -- saved plans ------------------------------------------------------------------------
    def current_value(self, live: Parts, path: str) -> JsonValue: ...

    def recorded_value(self, record: Parts, path: str) -> JsonValue: ...

    # -- drift ------------------------------------------------------------------------------
    def drift_values(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue, Basis | None]:
        """Unmasked: the live, declared and recorded values of what ``change`` is about, and
        how the recorded one is known (None: nothing recorded)."""
        ...

    def drift_shown(
        self, spec: Parts, change: Change, live: Parts, record: Parts | None
    ) -> tuple[JsonValue, JsonValue, JsonValue]: ...

    def unmanaged_value(self, live: Parts | None, name: str) -> JsonValue: ...

    # -- rendering --------------------------------------------------------------------------
    def render_lines(self, change: Change, show: Callable[[JsonValue], str]) -> list[str] | None:
        """A change's lines under its head in text renderings; None: the value itself."""
        ...

    # -- the state file ---------------------------------------------------------------------
    def dump(
        self, record: Parts, seal: Callable[[str, JsonValue], JsonValue]
    ) -> dict[str, JsonValue]:
        """This kind's ``state_keys`` of a chatbot's record as written. ``seal(location,
        value)``: the value as the file must hold it (its fingerprint where it holds a secret,
        or sits where the configuration holds one: ``secret_locations``)."""
        ...

    def load(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """This kind's parts from its ``state_keys`` of a record; ValueError when malformed
        (the message names the field)."""
        ...

    def has_sealed(self, record: Parts) -> bool:
        """Whether the record holds a value of this kind known only by its fingerprint."""
        ...

    def rekey(
        self,
        record: MutableParts,
        spec: Parts | None,
        old: FingerprintKey | None,
        new: FingerprintKey,
    ) -> tuple[int, list[str]]:
        """Make the record's fingerprints again under ``new``, in place: each one matched under
        ``old`` against the value ``spec`` declares at its place (``resources.base.rekeyed``);
        one that matches nothing (no ``spec``, a secret rotated, ``old`` lost: None) is
        forgotten with the value it stood for, so the next plan sends it. Returns how many
        moved and the places forgotten, as a reader names them (``settings styles.name``)."""
        ...

    # -- rollback -------------------------------------------------------------------------------
    def previous(self, live: Parts | None, record: Parts | None) -> Any:
        """What was known of this kind of a chatbot before an apply (read now, else recorded),
        for ``restore``; None: this kind's changes are never rolled back."""
        ...

    def restore(
        self, op: Operation, previous: Any
    ) -> tuple[Operation | None, list[tuple[str, str]]]:
        """The operation that puts back what ``op`` (applied) changed, from ``previous``
        (None: nothing can be), and each (field, why) that cannot be."""
        ...

    # -- contacts -------------------------------------------------------------------------------
    def stranded(self, spec: Parts, live: Parts | None) -> list[str]:
        """The declared items the service holds in a form no request can change (an
        attribute's type): the plan is refused, and these names are counted in the contacts
        so the refusal says what the declaration would strand."""
        ...

    def archive_consent(self, spec: Parts) -> set[str]:
        """The paths (``Change.path``) whose archive the declaration allows to retire the
        values contacts carry (``archiveWithValues``)."""
        ...

    def reads_contacts(self, op: Operation) -> bool:
        """Whether applying ``op`` reads the contacts (refused with ``--no-contact-reads``)."""
        ...

    # -- the configuration ----------------------------------------------------------------------
    @property
    def spec_fields(self) -> Mapping[str, SpecField]:
        """Its keys of a Chatbot document's ``spec``, in the order documents write them."""
        ...

    @property
    def secret_places(self) -> str:
        """Where its keys may hold a ``${secret:...}``, in words ("" for nowhere)."""
        ...

    def may_hold_secret(self, path: SpecPath) -> bool:
        """Whether a ``${secret:...}`` may stand at ``path`` (under ``spec``): only in values
        it sends, masks and keeps as fingerprints, never in a name that identifies something."""
        ...

    def from_spec(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """Its parts of a ``BotSpec``, from its keys of the resolved ``spec`` (validated:
        ``Defaults`` and ``AttributeSet``s laid in)."""
        ...

    def section(self, spec: Parts) -> dict[str, JsonValue]:
        """Its keys as the resolved document writes them (``botctl render``); a key whose
        value is empty may be left out."""
        ...

    def revision_values(self, spec: Parts) -> dict[str, JsonValue]:
        """What a chatbot's configuration revision digests of this kind ({} when it declares
        nothing of it, so a new kind leaves every other chatbot's revision as it was)."""
        ...

    def export(self, live: Parts) -> ExportedSection:
        """Its keys of the document ``botctl export`` writes for a chatbot read as ``live``:
        only values `botctl validate` accepts; the rest named in its notes."""
        ...
