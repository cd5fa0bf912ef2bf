"""The state lock: one writer at a time per state, naming its holder.

The backend keeps the lock beside the state (``<state>.lock``, a lock commit, a lock object)
and creates it atomically. A second apply fails fast (or waits up to ``timeout`` seconds) and
says who holds it. ``botctl unlock`` breaks a lock left behind, but not the lock of a process
that is still running on this host, and not one held from another host (where botctl cannot
tell whether its holder still runs) without ``--force``.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from botctl.errors import LockError
from botctl.store.backend import UNREADABLE_LOCK, LockInfo, StateBackend
from botctl.store.backends import StateLocation, using_backend
from botctl.store.backends.path import lock_path_for

__all__ = [
    "LockInfo",
    "StateLock",
    "Unlocked",
    "break_lock",
    "holder_is_alive",
    "lock_path_for",
    "read_lock",
]


def holder_is_alive(holder: LockInfo) -> bool | None:
    """Whether the lock's holder still runs: None when botctl cannot tell (another host, or
    an unreadable lock). A zombie (exited, not yet reaped) counts as gone."""
    if holder == UNREADABLE_LOCK or holder.host != socket.gethostname():
        return None
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: alive
    try:
        stat = Path(f"/proc/{holder.pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def read_lock(where: StateLocation | StateBackend) -> LockInfo | None:
    with using_backend(where) as backend:
        return backend.read_lock()


class StateLock:
    """Holds the state lock for a block: ``with StateLock(backend_or_location): ...``."""

    def __init__(
        self,
        where: StateLocation | StateBackend,
        *,
        timeout: float = 0.0,
        command: str = "apply",
    ) -> None:
        self._stack = contextlib.ExitStack()
        self.backend = self._stack.enter_context(using_backend(where))
        self.timeout = timeout
        self.command = command
        self.info: LockInfo | None = None

    def acquire(self) -> None:
        info = LockInfo.for_this_process(f"botctl {self.command}")
        deadline = time.monotonic() + self.timeout
        while not self.backend.create_lock(info):
            if time.monotonic() >= deadline:
                raise self._held_error()
            time.sleep(self.backend.poll_interval)
        self.info = info

    def _held_error(self) -> LockError:
        where = self.backend.where
        holder = self.backend.read_lock()
        if holder is None:
            return LockError(f"state {where} is locked by another process (it changed hands)")
        alive = holder_is_alive(holder)
        if alive is False:
            advice = (
                "that process no longer exists; if you are sure no apply is running, "
                f"remove the lock with `botctl unlock --state {where}`"
            )
        elif alive is None:
            advice = (
                "wait for it, or pass --lock-timeout SECONDS to wait; if that run is over "
                f"(cancelled, killed), remove the lock with `botctl unlock --force --state {where}`"
            )
        else:
            advice = "wait for it, or pass --lock-timeout SECONDS to wait"
        return LockError(f"state {where} is locked by {holder.describe()}: {advice}")

    def release(self) -> None:
        if self.info is not None:
            info, self.info = self.info, None
            # Only our own lock: after a forced unlock, another run's lock stays.
            self.backend.remove_lock(info, f"{info.command}: lock released")
        self._stack.close()

    def __enter__(self) -> StateLock:
        try:
            self.acquire()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@dataclass(frozen=True)
class Unlocked:
    """What ``break_lock`` did: the holder removed (None: there was no lock) and whether
    botctl knew that holder to be gone."""

    holder: LockInfo | None
    holder_gone: bool


def break_lock(where: StateLocation | StateBackend, *, force: bool = False) -> Unlocked:
    """Remove a lock left behind (``botctl unlock``). Refused, unless ``force``, while its
    holder runs on this host, or when botctl cannot tell (another host, unreadable lock)."""
    with using_backend(where) as backend:
        holder = backend.read_lock()
        if holder is None:
            return Unlocked(None, holder_gone=False)
        alive = holder_is_alive(holder)
        if not force and alive is True:
            raise LockError(
                f"refusing to unlock {backend.where}: its holder, {holder.describe()}, is still "
                "running on this host, and removing its lock would let two applies write at "
                "once. Wait for it to finish, or pass --force if you are sure that process is "
                "not botctl (its pid was reused)"
            )
        if not force and alive is None:
            reason = (
                "the lock is unreadable"
                if holder == UNREADABLE_LOCK
                else f"it is held by {holder.describe()}, and botctl cannot tell from this "
                "host whether that process still runs"
            )
            raise LockError(
                f"refusing to unlock {backend.where} without --force: {reason}. Make sure that "
                f"run is over (finished, cancelled or killed), then `botctl unlock --force "
                f"--state {backend.where}`"
            )
        removed = backend.remove_lock(
            holder, f"botctl unlock: removed the lock of {holder.describe()}"
        )
        if removed is None:
            raise LockError(
                f"the lock of {backend.where} changed while botctl looked at it (its holder "
                "finished, or another run took it): run `botctl unlock` again to see the new one"
            )
        return Unlocked(removed, holder_gone=alive is False)
