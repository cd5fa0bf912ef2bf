"""The state file: botctl's record of what it last applied or verified, for drift and for what
the service cannot read back. Three parts:

- ``store.stateformat``: the document's format, its versions and their migration, parsed once;
- ``store.statesealing``: which values are written only as fingerprints, under which key (the
  salt and the key made before anything is written);
- here, the reader and the writer: read through a backend (decrypted when encrypted at rest,
  ``store.crypt``), written atomically and as a compare-and-swap.

Where the document is kept is a backend's business (``store/backends``: a file, a git branch,
an S3 object): every function here takes a ``--state`` value (a path or URL) or an open
``StateBackend``. Each write is atomic (a reader or a killed process never sees half a
document) and a compare-and-swap against the version this run read: a state changed under
the run is never overwritten.
"""

from __future__ import annotations

import contextlib
import enum
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from botctl.errors import StateWriteError
from botctl.models import State
from botctl.plan import Operation
from botctl.store import crypt
from botctl.store.backend import LostCompareAndSwap, StateBackend, Version
from botctl.store.backends import StateLocation, using_backend
from botctl.store.keys import KeySource, find_key, give_key
from botctl.store.protection import check_not_weaker, kept_encrypted, remember
from botctl.store.stateformat import (
    BOT_DEPTH,
    FORMAT_VERSION,
    READABLE_VERSIONS,
    RenderedJson,
    parse_state,
    render_json,
    state_document,
)
from botctl.store.statesealing import legacy_warning, prepare, record_document, unlock

__all__ = [
    "FORMAT_VERSION",
    "READABLE_VERSIONS",
    "UNREAD",
    "RenderedJson",
    "StateWriter",
    "StoredState",
    "load_state",
    "read_state",
    "record_document",
    "render_json",
    "save_state",
    "state_from_text",
    "state_text",
    "stored_text",
]


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


def read_state(
    where: StateLocation | StateBackend, source: KeySource | None = None, *, check_key: bool = True
) -> StoredState:
    """Read the state and its version; no state is an empty state (botctl still converges).
    The state key is looked for (never created; ``source`` when given) and, unless not
    ``check_key`` (``state rekey``), checked against the state."""
    with using_backend(where) as backend:
        snapshot = backend.read()
        source = find_key(backend) if source is None else source
        if snapshot.text is None:
            state = State()
            give_key(state, source)
            # A state kept encrypted, gone now (deleted?), is made again encrypted.
            state.encrypted = kept_encrypted(state, backend)
            return StoredState(state, snapshot.version)
        state = state_from_text(snapshot.text, backend.where, source, check_key=check_key)
        if check_key:
            remember(state, backend)
        return StoredState(state, snapshot.version)


def load_state(where: StateLocation | StateBackend) -> State:
    """Read the state (see ``read_state``) when no write will follow."""
    return read_state(where).state


def state_from_text(text: str, where: str, source: KeySource, *, check_key: bool = True) -> State:
    """Parse a state document, decrypting it first when it is encrypted at rest; ``where``
    names it in errors (a path, a URL); ``source``: the state key found for it."""
    cipher = None
    if crypt.is_encrypted(text):
        text, cipher = crypt.decrypt(text, source.key, where, source.hint(), "state")
    state = parse_state(text, where)
    state.encrypted, state.cipher = cipher is not None, cipher
    if check_key:
        unlock(state, source, where)
    else:
        give_key(state, source)
    warning = legacy_warning(state, where)
    if warning is not None:
        state.warnings.append(warning)
    return state


def state_text(state: State, rendered_bots: Mapping[str, RenderedJson] | None = None) -> str:
    """The state document's clear text for ``state`` as it is (serial and lineage untouched).
    The salt (and key, when needed) must have been made (``statesealing.prepare``)."""
    bots: Mapping[str, Any] | None = rendered_bots
    if bots is None:
        bots = {chatbot_id: record_document(state, chatbot_id) for chatbot_id in state.bots}
    return render_json(state_document(state, bots)) + "\n"


def stored_text(state: State, rendered_bots: Mapping[str, RenderedJson] | None = None) -> str:
    """What is stored for ``state``: its text, encrypted when the state is."""
    text = state_text(state, rendered_bots)
    if not state.encrypted:
        return text
    return crypt.encrypt(text, state_cipher(state), "state")


def state_cipher(state: State) -> crypt.Cipher:
    """The cipher of a state kept encrypted: the one it was read with, or derived (one
    scrypt) from the key ``prepare`` or ``_choose_encryption`` found or made, once."""
    if not isinstance(state.cipher, crypt.Cipher):
        assert state.state_key is not None
        state.cipher = crypt.derive(state.state_key)
    return state.cipher


def prepare_write(state: State, backend: StateBackend) -> None:
    """The salt and the state key, made before anything is rendered for a write."""
    prepare(state, lambda: find_key(backend))


def next_version(state: State) -> None:
    """Before every write: bump the serial, and create the lineage of a new state."""
    if state.lineage is None:
        state.lineage = str(uuid.uuid4())
    state.serial += 1


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
        check_not_weaker(state, backend)
        prepare_write(state, backend)
        before = (state.lineage, state.serial)
        next_version(state)
        try:
            written = backend.write(stored_text(state, rendered_bots), version, message)
        except BaseException:
            state.lineage, state.serial = before  # not written: still the stored one
            raise
        state.outdated = False
        remember(state, backend)
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
    (a git backend's commit message) lists the operations it records. The salt and the state
    key are made when the writer is created, before anything is sent."""

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
        try:
            check_not_weaker(state, self.backend)  # before anything is sent
            prepare_write(state, self.backend)
        except BaseException:
            self._stack.close()
            raise
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
                self._rendered[chatbot_id] = RenderedJson(render_json(record, BOT_DEPTH))
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
