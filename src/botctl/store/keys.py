"""Where the *state key* comes from: the secret that keys the state's fingerprints (see
``botctl.sealing``) and, when the state is encrypted, its encryption (``store.crypt``). It is
never written where the state goes.

First found wins: the environment variable ``BOTCTL_STATE_KEY``; else, for a state kept in a
local file, the key file beside it (``<state>.key``, created 0600 with a random key the first
time a fingerprint needs one). A state shared through a backend (a git branch, an S3 object)
has no key file: its readers would be the key's readers too, so the variable is required
there once a fingerprint is needed.

A key file is refused as ssh refuses a private key: when it is a symbolic link (a link
committed beside a state would read another file as the key, or have ``init-key`` write
through it), owned by another user, or readable or writable by anyone but its owner
(``chmod 600 FILE``).
"""

from __future__ import annotations

import base64
import errno
import os
import secrets as _random
import stat
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from botctl.defaults import STATE_KEY_ENV
from botctl.errors import BotctlWarning, StateError
from botctl.models import State
from botctl.store.backend import StateBackend
from botctl.store.files import UnreadableFile, create_file, read_bytes_if_any
from botctl.store.gitignore import unignored_key_warning

KEY_PREFIX = "bsk1_"  # a generated key: 32 random bytes, base64url


class StateKeyError(StateError):
    """The state key is missing, unusable, or not the one the state was made under."""


@dataclass(frozen=True)
class KeySource:
    """The state key found for one state, and where from. ``key`` None: none was found;
    ``file``: the key file a local state uses (None for a shared backend)."""

    key: bytes | None = field(repr=False)
    origin: str  # "$BOTCTL_STATE_KEY", "key file .botctl/state.json.key", or "" (none)
    file: Path | None

    def hint(self) -> str:
        """What to set to give botctl the key."""
        if self.file is not None:
            return f"set {STATE_KEY_ENV}, or put the key file back at {self.file}"
        return f"set {STATE_KEY_ENV}"


def give_key(state: State, source: KeySource) -> None:
    """``state`` holds the key ``source`` found (or None), and what to set to give it."""
    state.state_key, state.key_hint = source.key, source.hint()


def new_state_key() -> str:
    """A random state key (256 bits), as ``botctl state init-key`` prints it."""
    return KEY_PREFIX + base64.urlsafe_b64encode(_random.token_bytes(32)).decode().rstrip("=")


def find_key(backend: StateBackend, environ: Mapping[str, str] | None = None) -> KeySource:
    """The state key of ``backend``'s state, if there is one (nothing is created)."""
    environ = os.environ if environ is None else environ
    file = backend.key_file()
    value = environ.get(STATE_KEY_ENV, "")
    if value:
        return KeySource(value.encode("utf-8"), f"${STATE_KEY_ENV}", file)
    if file is None:
        return KeySource(None, "", None)
    return KeySource(read_key_file(file), f"key file {file}", file)


def read_key_file(file: Path) -> bytes | None:
    """The key in ``file`` (None when there is no such file), refused when the file is not
    its owner's alone (see the module)."""
    try:
        data = _read_private(file)
    except (UnreadableFile, OSError) as exc:
        raise StateKeyError(f"cannot read the state key file {file}: {exc.strerror}") from None
    if data is None:
        return None
    key = data.strip()
    if not key:
        raise StateKeyError(f"the state key file {file} is empty")
    return key


def _read_private(file: Path) -> bytes | None:
    try:
        info = os.lstat(file)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(info.st_mode):
        raise StateKeyError(
            f"the state key file {file} is a symbolic link: refused (a key file is a file of "
            "its own; replace the link with the file it points to)"
        )
    if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
        raise StateKeyError(
            f"the state key file {file} belongs to another user (uid {info.st_uid}): refused"
        )
    if info.st_mode & 0o077:
        raise StateKeyError(
            f"the state key file {file} is accessible by others (mode "
            f"{stat.S_IMODE(info.st_mode):04o}): refused, as ssh refuses such a key; "
            f"`chmod 600 {file}`"
        )
    data = read_bytes_if_any(file)
    if data is not None and not stat.S_ISREG(info.st_mode):  # pragma: no cover - raced
        raise UnreadableFile(errno.EINVAL, "not a file", str(file))
    return data


FOR_SECRETS = "the configuration uses ${secret:...}, whose fingerprints the state keeps"
FOR_ENCRYPTION = "the state is kept encrypted"


def ensure_key(source: KeySource, needed_for: str) -> KeySource:
    """``source`` with a key: the one found, or a new key file for a local state. A shared
    state without ``BOTCTL_STATE_KEY`` is an error naming what to set and why the key is
    needed (``needed_for``: ``FOR_SECRETS``, ``FOR_ENCRYPTION``, or a command's own
    reason)."""
    if source.key is not None:
        return source
    if source.file is None:
        raise StateKeyError(
            f"{STATE_KEY_ENV} is required: {needed_for}, and the state is shared (a git "
            "branch, an S3 object), so its key cannot live beside it. Make one with `botctl "
            f"state init-key` and set {STATE_KEY_ENV} (in CI, as a secret)"
        )
    key = new_state_key()
    write_key_file(source.file, key)
    return KeySource(key.encode("utf-8"), f"key file {source.file}", source.file)


def write_key_file(file: Path, key: str) -> None:
    """Create ``file`` holding ``key``, readable by its owner only, whole at once (a reader
    never finds it empty); never over an existing one (a key replaced would orphan every
    fingerprint made under it). Inside a git work tree that does not ignore it, a
    ``BotctlWarning`` says which line to add to the ``.gitignore``."""
    try:
        created = create_file(file, key + "\n")
    except OSError as exc:
        raise StateKeyError(f"cannot create the state key file {file}: {exc.strerror}") from None
    if not created:
        raise StateKeyError(f"the state key file {file} exists already: not replaced")
    warning = unignored_key_warning(file)
    if warning is not None:
        warnings.warn(warning, BotctlWarning, stacklevel=2)
