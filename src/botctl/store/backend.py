"""Where a state document is kept: the interface every state backend implements.

A backend stores text and knows nothing of what the text means (``state.py`` does): it reads
the text with a *version* (an opaque token: a content hash, a commit, an ETag), writes only
if the stored version is still the one the writer read (compare-and-swap), and keeps a lock
beside the state that names its holder. The lock is what keeps two applies apart; the
compare-and-swap is the second guard, for whatever gets past it (a lock broken by force, a
state edited by hand): a write that lost it changes nothing and says so.
"""

from __future__ import annotations

import json
import os
import socket
import time
import uuid
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType

from pydantic_core import from_json

from botctl.errors import StateError
from botctl.values import mask_url_credentials

Version = str | None  # None: nothing is stored yet


def redact(text: str) -> str:
    """``text`` with the credentials of any URL in it masked: its user info (user, password,
    token), and a query parameter named like a credential."""
    return mask_url_credentials(text)


class LeaseLost(StateError):
    """This process's lease on the state is no longer its own (it expired and another holder
    took it over): it must not write."""


class LostCompareAndSwap(StateError):
    """The state changed between this run's read and its write; the write was not made."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"state {where}: lost compare-and-swap: the state changed under this run (another "
            "botctl wrote it); nothing was overwritten. Run the command again: it reads the "
            "state as it is now"
        )


@dataclass(frozen=True)
class Snapshot:
    """The stored text (None when there is no state) and the version it was read at."""

    text: str | None
    version: Version


@dataclass(frozen=True)
class LockInfo:
    """Who holds a state lock. ``holder`` is a random id, new for every acquisition: a
    release removes only the lock it created, never one taken after a forced unlock."""

    pid: int
    host: str
    since: str
    command: str
    holder: str = ""
    # A lease (``botctl agent``): the wall-clock time (Unix seconds) it lapses unless its
    # holder renews it. None: a plain lock, held until released.
    expires: float | None = None

    @classmethod
    def for_this_process(cls, command: str, *, lease: float | None = None) -> LockInfo:
        return cls(
            pid=os.getpid(),
            host=socket.gethostname(),
            since=datetime.now(UTC).isoformat(timespec="seconds"),
            command=command,
            holder=uuid.uuid4().hex,
            expires=None if lease is None else time.time() + lease,
        )

    def renewed(self, lease: float) -> LockInfo:
        """The same lease, expiring ``lease`` seconds from now."""
        return replace(self, expires=time.time() + lease)

    def lapsed(self, now: float | None = None) -> bool:
        """Whether this is a lease whose holder failed to renew it in time."""
        return self.expires is not None and (time.time() if now is None else now) >= self.expires

    def same_holder(self, other: LockInfo | None) -> bool:
        return other is not None and bool(self.holder) and other.holder == self.holder

    def describe(self) -> str:
        text = f"pid {self.pid} on {self.host}, since {self.since} ({self.command})"
        text += f", holder {self.holder}" if self.holder else ""
        if self.expires is not None:
            until = datetime.fromtimestamp(self.expires, UTC).isoformat(timespec="seconds")
            text += f", lease {'lapsed at' if self.lapsed() else 'until'} {until}"
        return text

    def to_text(self) -> str:
        body = {
            "pid": self.pid,
            "host": self.host,
            "since": self.since,
            "command": self.command,
            "holder": self.holder,
        }
        if self.expires is not None:
            body["expires"] = self.expires
        return json.dumps(body) + "\n"

    @classmethod
    def from_text(cls, text: str) -> LockInfo:
        """A lock's content; an unreadable one still stands for a held lock."""
        try:
            data = from_json(text)  # bounded nesting (json.loads raises RecursionError)
            return cls(
                pid=int(data["pid"]),
                host=str(data["host"]),
                since=str(data["since"]),
                command=str(data.get("command", "")),
                holder=str(data.get("holder", "")),
                expires=None if data.get("expires") is None else float(data["expires"]),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return UNREADABLE_LOCK


UNREADABLE_LOCK = LockInfo(pid=-1, host="?", since="?", command="unreadable lock")


class StateBackend(ABC):
    """One place a state document lives. ``where`` names it in messages, never with
    credentials. A backend may hold resources (a private git repository): close it, or use
    it as a context manager."""

    where: str
    # How often a lock wait looks again, in seconds (remote looks cost a round trip).
    poll_interval: float = 0.1

    @abstractmethod
    def read(self) -> Snapshot:
        """The stored text and its version."""

    @abstractmethod
    def write(self, text: str, expected: Version, message: str) -> Version:
        """Store ``text`` if the stored version is still ``expected`` (None: nothing stored),
        else raise ``LostCompareAndSwap`` having changed nothing. ``message`` says what the
        write was (a git backend makes it the commit message). Returns the new version."""

    @abstractmethod
    def create_lock(self, info: LockInfo) -> bool:
        """Create the lock naming ``info`` if there is none (atomically); False if held."""

    @abstractmethod
    def read_lock(self) -> LockInfo | None:
        """The lock's holder, or None when unlocked."""

    @abstractmethod
    def remove_lock(self, expected: LockInfo | None, message: str) -> LockInfo | None:
        """Remove the lock if it is ``expected`` (any lock when None). Returns the lock
        removed, or None when there was none or it was another."""

    def key_file(self) -> Path | None:
        """Where the state key may be kept beside the state (``store.keys``): only a local
        file has such a place; a shared backend's readers would read the key too."""
        return None

    def replace_lock(self, expected: LockInfo, new: LockInfo, message: str) -> bool:
        """Replace the lock by ``new`` if it is still ``expected`` (compare-and-swap on the
        lock): a lease renewed by its holder, or taken over once lapsed. False when the lock
        is another (or gone)."""
        raise StateError(f"state {self.where}: this kind of state has no leases")

    def write_fenced(self, text: str, expected: Version, message: str, lease: LockInfo) -> Version:
        """``write``, only while the lock is ``lease`` (its holder, not lapsed): a holder that
        lost its lease cannot write. Backends check both at once where they can; this default
        looks at the lock just before the conditional write."""
        self.check_lease(self.read_lock(), lease)
        return self.write(text, expected, message)

    def check_lease(self, current: LockInfo | None, lease: LockInfo) -> None:
        if current is None or not lease.same_holder(current) or current.lapsed():
            who = "nobody" if current is None else current.describe()
            raise LeaseLost(
                f"state {self.where}: this process no longer holds the lease (now: {who}); "
                "nothing was written"
            )

    def close(self) -> None:  # noqa: B027 (most backends hold nothing)
        """Release what the backend holds (temporary clones, connections)."""

    def __enter__(self) -> StateBackend:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
