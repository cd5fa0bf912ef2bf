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
derived by scrypt, as the fingerprints are, from the key and the memory's own salt), and holds
nothing else: without the key, nobody can tell which states it names, forge an entry, or move
one to another state.
Removing the file forgets (botctl then starts remembering again); a machine that keeps nothing
between runs (a CI runner) remembers nothing, so there ``BOTCTL_STATE_ENCRYPTION=passphrase``
beside ``BOTCTL_STATE_KEY`` is what refuses a state in clear.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

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


class Memory:
    """The memory file as read: a salt, and the states remembered as kept encrypted, each an
    entry id (an HMAC of its place) and a MAC of the fact (see the module's docstring). It
    holds nothing else: not the places, not the lineages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.salt = new_salt()
        self.entries: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            data = read_bytes_if_any(path)
            if data is not None:
                found = json.loads(data)
                if found.get("format") == MEMORY_FORMAT:
                    self.salt = bytes.fromhex(found["salt"]).hex()
                    self.entries = {str(k): str(v) for k, v in found["encrypted"].items()}

    def _key(self, state_key: bytes) -> FingerprintKey:
        return FingerprintKey(self.salt, state_key)

    def _entry(self, state_key: bytes, where: str) -> tuple[str, str]:
        """The entry id of the state at ``where``, and the MAC that says it was encrypted."""
        key = self._key(state_key)
        entry_id = key.fingerprint(["state", where]).rpartition(":")[2][:32]
        return entry_id, key.fingerprint(["kept encrypted", entry_id])

    def encrypted(self, state_key: bytes, where: str) -> bool:
        """Whether the state at ``where`` was remembered as kept encrypted (a forged or
        altered entry, whose MAC is not under this key, counts as none)."""
        if not self.entries:
            return False  # nothing remembered: no key to derive
        entry_id, mac = self._entry(state_key, where)
        return self.entries.get(entry_id) == mac

    def remember(self, state_key: bytes, where: str, encrypted: bool) -> None:
        entry_id, mac = self._entry(state_key, where)
        if encrypted:
            self.entries[entry_id] = mac
        else:
            self.entries.pop(entry_id, None)
        text = json.dumps(
            {"format": MEMORY_FORMAT, "salt": self.salt, "encrypted": self.entries}, indent=1
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


def _remembered(state: State, backend: StateBackend) -> bool:
    """Whether the state at ``backend`` was remembered as kept encrypted (under the key this
    run holds)."""
    if state.state_key is None:
        return False
    return Memory(memory_file()).encrypted(state.state_key, identity(backend))


def kept_encrypted(state: State, backend: StateBackend) -> bool:
    """Whether the state at ``backend``, absent now, was remembered as kept encrypted: made
    again so (a deleted state must not come back weaker)."""
    return _remembered(state, backend)


def check_not_weaker(state: State, backend: StateBackend, *, downgrade: bool = False) -> None:
    """Refuse (``WeakerState``, nothing written) to write ``state`` weaker than it was, while
    a state key is available. ``downgrade``: ``state migrate --state-encryption none``, in
    clear on purpose."""
    if state.state_key is None:
        return  # no key: nothing could be kept under one, and nothing is remembered
    was_encrypted = not (downgrade or state.encrypted or state.lineage is None) and _remembered(
        state, backend
    )
    changed = []
    if was_encrypted:
        changed.append(
            f"it was kept encrypted at rest, and is now in clear (lineage {state.lineage}, "
            f"serial {state.serial})"
        )
    if state.legacy_keyed:
        changed.append(
            "it holds fingerprints keyed with the salt stored in it (format 3), which whoever "
            "reads it can check guesses against, and botctl writes none while a state key is set"
        )
    if changed:
        raise WeakerState(_refusal(backend, changed, was_encrypted))


def _refusal(backend: StateBackend, changed: list[str], was_encrypted: bool) -> str:
    where = backend.where
    advice = (
        f"If the change is yours: `botctl state migrate --state-encryption passphrase --state "
        f"{where}` encrypts it again, or remove botctl's memory of it ({memory_file()}). If "
        "not, restore the state from a backup (a git backend's history, the object's "
        "versions)"
        if was_encrypted
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
    if memory.encrypted(key, where) != state.encrypted:
        memory.remember(key, where, state.encrypted)
