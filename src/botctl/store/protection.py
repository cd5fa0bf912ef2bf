"""A state is never written weaker than it was while a state key is available: whoever can
write the state's storage but not the key (a swapped S3 object, a rewritten branch) cannot
make botctl keep it weaker.

Two rules, checked before every write (and by ``apply`` before it sends anything):

- **No salt-only fingerprint** (needs no memory): a state of format 3 with fingerprints (keyed
  with the salt stored in it, so whoever reads it can check guesses at its secrets) is not
  written while a state key is available; ``botctl state rekey`` moves it under the key.
- **Encrypted stays encrypted**: the protection of each state botctl read or wrote with a key
  is remembered *outside* the state, in botctl's directory of the user
  (``$XDG_STATE_HOME/botctl/protection.json``, by default ``~/.local/state/botctl/``): a state
  remembered as encrypted at rest that is now in clear (swapped, or decrypted by hand) is not
  written, and a new state where one was is created encrypted. Only ``botctl state migrate
  --state-encryption none`` (``downgrade``) writes one in clear on purpose.

Each entry of the memory is named and authenticated under the state key (HMAC under a key
derived by scrypt, as the fingerprints are, from the key and the memory's own salt): without
the key, nobody can read which states it names, forge an entry, or move one to another state.
Removing the file forgets (botctl then starts remembering again); a machine that keeps nothing
between runs (a CI runner) remembers nothing, so there ``BOTCTL_STATE_ENCRYPTION=passphrase``
beside ``BOTCTL_STATE_KEY`` is what refuses a state in clear.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botctl.models import State
from botctl.sealing import FingerprintKey, new_salt
from botctl.store.backend import StateBackend
from botctl.store.files import read_bytes_if_any, write_atomically
from botctl.store.keys import StateKeyError

MEMORY_FORMAT = 1


class WeakerState(StateKeyError):
    """The state is weaker than it was (or than a state key allows): nothing is written."""


def memory_file(environ: Mapping[str, str] | None = None) -> Path:
    """Where botctl remembers the states' protection."""
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "botctl" / "protection.json"


@dataclass(frozen=True)
class Remembered:
    """What was last seen of one state: kept encrypted, and its lineage."""

    encrypted: bool
    lineage: str


class Memory:
    """The memory file as read: a salt, and entries by id (see the module's docstring)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.salt = new_salt()
        self.entries: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = read_bytes_if_any(path)
            if data is not None:
                found = json.loads(data)
                if found.get("format") == MEMORY_FORMAT:
                    self.salt = str(bytes.fromhex(found["salt"]).hex())
                    self.entries = {str(k): dict(v) for k, v in found["states"].items()}

    def _key(self, state_key: bytes) -> FingerprintKey:
        return FingerprintKey(self.salt, state_key)

    def _entry_id(self, state_key: bytes, where: str) -> str:
        return self._key(state_key).fingerprint(["state", where]).rpartition(":")[2][:32]

    def _mac(self, state_key: bytes, entry_id: str, entry: Remembered) -> str:
        return self._key(state_key).fingerprint(
            ["protection", entry_id, entry.encrypted, entry.lineage]
        )

    def get(self, state_key: bytes, where: str) -> Remembered | None:
        if not self.entries:
            return None  # nothing remembered: no key to derive
        entry_id = self._entry_id(state_key, where)
        found = self.entries.get(entry_id)
        if not found:
            return None
        entry = Remembered(bool(found.get("encrypted")), str(found.get("lineage")))
        # A forged or altered entry (its MAC is not under this key) counts as none.
        return entry if found.get("mac") == self._mac(state_key, entry_id, entry) else None

    def put(self, state_key: bytes, where: str, entry: Remembered | None) -> None:
        """Remember ``entry`` for the state at ``where`` (None: forget it)."""
        entry_id = self._entry_id(state_key, where)
        if entry is None:
            self.entries.pop(entry_id, None)
        else:
            mac = self._mac(state_key, entry_id, entry)
            self.entries[entry_id] = {
                "encrypted": entry.encrypted,
                "lineage": entry.lineage,
                "mac": mac,
            }
        text = json.dumps(
            {"format": MEMORY_FORMAT, "salt": self.salt, "states": self.entries}, indent=1
        )
        # Memory is a guard, not a record botctl needs: a home it cannot write (a read-only
        # container) leaves the rule without memory, never a run that fails.
        with contextlib.suppress(OSError):
            write_atomically(self.path, text + "\n")


def identity(backend: StateBackend) -> str:
    """The state's place, the same from any working directory: a local file's whole path."""
    key_file = backend.key_file()
    if key_file is not None:  # a local file: <state>.key sits beside it
        return str(key_file.resolve().with_suffix(""))
    return backend.where


def _remembered(state: State, backend: StateBackend) -> Remembered | None:
    if state.state_key is None:
        return None
    return Memory(memory_file()).get(state.state_key, identity(backend))


def kept_encrypted(state: State, backend: StateBackend) -> bool:
    """Whether the state at ``backend``, absent now, was remembered as kept encrypted: made
    again so (a deleted state must not come back weaker)."""
    remembered = _remembered(state, backend)
    return remembered is not None and remembered.encrypted


def check_not_weaker(state: State, backend: StateBackend, *, downgrade: bool = False) -> None:
    """Refuse (``WeakerState``, nothing written) to write ``state`` weaker than it was, while
    a state key is available. ``downgrade``: ``state migrate --state-encryption none``, in
    clear on purpose."""
    if state.state_key is None:
        return  # no key: nothing could be kept under one, and nothing is remembered
    remembered = None if downgrade or state.lineage is None else _remembered(state, backend)
    changed = []
    if remembered is not None and remembered.encrypted and not state.encrypted:
        changed.append(
            f"it was kept encrypted at rest (lineage {remembered.lineage}), and is now in "
            f"clear (lineage {state.lineage}, serial {state.serial})"
        )
    if state.legacy_keyed:
        changed.append(
            "it holds fingerprints keyed with the salt stored in it (format 3), which whoever "
            "reads it can check guesses against, and botctl writes none while a state key is set"
        )
    if changed:
        raise WeakerState(_refusal(backend, changed, remembered))


def _refusal(backend: StateBackend, changed: list[str], remembered: Remembered | None) -> str:
    where = backend.where
    advice = (
        f"If the change is yours: `botctl state migrate --state-encryption passphrase --state "
        f"{where}` encrypts it again, or remove botctl's memory of it ({memory_file()}). If "
        "not, restore the state from a backup (a git backend's history, the object's "
        "versions)"
        if remembered is not None
        else f"If the state is yours, `botctl state rekey --state {where}` moves its "
        "fingerprints under the state key; if not, restore it from a backup"
    )
    return (
        f"refusing to write the state at {where} weaker than it was: {'; and '.join(changed)}. "
        "It may have been replaced by someone who can write its storage but does not hold "
        f"the state key. Nothing was written. {advice}"
    )


def remember(state: State, backend: StateBackend, *, downgrade: bool = False) -> None:
    """After a read or a write under a state key: remember that the state is kept encrypted
    (only ever stronger: a state in clear changes nothing, but for ``downgrade``)."""
    key = state.state_key
    if key is None or state.lineage is None or not (state.encrypted or downgrade):
        return
    memory = Memory(memory_file())
    where = identity(backend)
    entry = Remembered(True, state.lineage) if state.encrypted else None
    if memory.get(key, where) != entry:
        memory.put(key, where, entry)
