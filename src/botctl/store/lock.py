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
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from botctl.errors import BotctlError, LockError
from botctl.store.backend import (
    UNREADABLE_LOCK,
    LeaseLost,
    LockInfo,
    Snapshot,
    StateBackend,
    Version,
)
from botctl.store.backends import StateLocation, open_backend, using_backend
from botctl.store.backends.path import lock_path_for

__all__ = [
    "Lease",
    "LeasedBackend",
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
        while not take_lock(self.backend, info):
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


def take_lock(backend: StateBackend, info: LockInfo) -> bool:
    """Create the lock naming ``info``, or take it over from a lease that lapsed (its holder
    died or lost touch: it can no longer write, see ``Lease``). False while it is held."""
    if backend.create_lock(info):
        return True
    current = backend.read_lock()
    if current is None or not current.lapsed():
        return False
    return backend.replace_lock(
        current, info, f"{info.command}: lock taken over from a lapsed lease ({current.holder})"
    )


class Lease:
    """The state lock held as a lease (``botctl agent``): it names its holder and an expiry,
    and a heartbeat thread renews it every third of ``duration``. A standby takes it over
    once it lapses (``take_lock``), so an active holder that dies (SIGKILL) is replaced within
    ``duration``. A holder paused or cut off for longer has lost it: its renewal finds
    another lock, and its writes (through ``LeasedBackend``) are refused.

    The lease has its own backend (a git backend's private repository is not shared across
    threads); the expiry is wall-clock time, so the holders' clocks must agree to well within
    ``duration``."""

    def __init__(self, where: StateLocation, *, duration: float, command: str = "agent") -> None:
        self.where = where
        self.duration = duration
        self.command = command
        self.info: LockInfo | None = None  # the lease as last written, while held
        self.lost: str | None = None  # why the lease was lost (for the agent's status)
        self._backend = open_backend(where)
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def held(self) -> bool:
        info = self.info
        return info is not None and not info.lapsed()

    def try_acquire(self) -> bool:
        """Take the lease if it is free or lapsed; start renewing it."""
        with self._guard:
            held = self.info
        if held is not None:
            # Ours, unless it lapsed meanwhile (a paused process): then renewing says.
            return not held.lapsed() or self.renew()
        with self._guard:
            info = LockInfo.for_this_process(f"botctl {self.command}", lease=self.duration)
            if not take_lock(self._backend, info):
                return False
            self.info, self.lost = info, None
        if self._thread is None or not self._thread.is_alive():
            self._stop.clear()
            self._thread = threading.Thread(target=self._heartbeat, name="lease", daemon=True)
            self._thread.start()
        return True

    def holder(self) -> LockInfo | None:
        """Who holds the lock now, as stored."""
        with self._guard:
            return self._backend.read_lock()

    def renew(self) -> bool:
        """Extend the lease; False (and the lease dropped) when it is no longer ours."""
        with self._guard:
            info = self.info
            if info is None:
                return False
            renewed = info.renewed(self.duration)
            try:
                message = f"botctl {self.command}: lease renewed"
                ok = self._backend.replace_lock(info, renewed, message)
            except BotctlError as exc:
                # Not reached: kept until it lapses, then dropped (writes are refused anyway).
                if info.lapsed():
                    self.info, self.lost = None, f"the lease lapsed: {exc}"
                return False
            if ok:
                self.info = renewed
                return True
            self.info, self.lost = None, "another holder took the lease over"
            return False

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.duration / 3):
            if self.info is None:
                return
            self.renew()

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.duration)
        with self._guard:
            info, self.info = self.info, None
            if info is not None:
                with contextlib.suppress(BotctlError):
                    self._backend.remove_lock(info, f"botctl {self.command}: lease released")

    def close(self) -> None:
        self.release()
        self._backend.close()


class LeasedBackend(StateBackend):
    """A state backend whose writes go through only while ``lease`` is held: each is a
    ``write_fenced`` against the lease as last renewed. Everything else is ``inner``'s."""

    def __init__(self, inner: StateBackend, lease: Lease) -> None:
        self.inner = inner
        self.lease = lease
        self.where = inner.where
        self.poll_interval = inner.poll_interval

    def read(self) -> Snapshot:
        return self.inner.read()

    def write(self, text: str, expected: Version, message: str) -> Version:
        info = self.lease.info
        if info is None or info.lapsed():
            raise LeaseLost(
                f"state {self.where}: this process no longer holds the lease "
                f"({self.lease.lost or 'it lapsed'}); nothing was written"
            )
        return self.inner.write_fenced(text, expected, message, info)

    def create_lock(self, info: LockInfo) -> bool:
        return self.inner.create_lock(info)

    def read_lock(self) -> LockInfo | None:
        return self.inner.read_lock()

    def remove_lock(self, expected: LockInfo | None, message: str) -> LockInfo | None:
        return self.inner.remove_lock(expected, message)

    def replace_lock(self, expected: LockInfo, new: LockInfo, message: str) -> bool:
        return self.inner.replace_lock(expected, new, message)

    def key_file(self) -> Path | None:
        return self.inner.key_file()


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
