"""The state lock: one writer at a time per state, naming its holder.

The backend keeps the lock beside the state (``<state>.lock``, a lock commit, a lock object)
and creates it atomically. A second apply fails fast (or waits up to ``timeout`` seconds) and
says who holds it; a lock whose holder is a process of this host that no longer runs (a
killed apply) is taken over, and the taker says so. ``botctl unlock`` breaks a lock left
behind, but not the lock of a process that is still running on this host, and not one held
from another host (where botctl cannot tell whether its holder still runs) without ``--force``.

The agent holds the lock as a ``Lease`` and fences everything it sends with it
(``Lease.fence``, see there).
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Callable
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
    "FENCE_MARGIN",
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
        # What acquiring the lock took over (a dead holder's lock, a lapsed lease), in words
        # for the command to show; None when the lock was free.
        self.took_over: str | None = None

    def acquire(self) -> None:
        info = LockInfo.for_this_process(f"botctl {self.command}")
        deadline = time.monotonic() + self.timeout
        taken: list[str] = []
        while not take_lock(self.backend, info, taken.append):
            if time.monotonic() >= deadline:
                raise self._held_error()
            time.sleep(self.backend.poll_interval)
        self.info = info
        self.took_over = taken[-1] if taken else None

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


def take_lock(
    backend: StateBackend, info: LockInfo, took_over: Callable[[str], None] | None = None
) -> bool:
    """Create the lock naming ``info``, or take it over from a lease that lapsed (its holder
    died or lost touch: it can no longer write, see ``Lease``) or from a holder of this host
    that no longer runs (a killed apply: a live pid, another host's or an unreadable lock is
    never taken). False while it is held. ``took_over`` is told what was taken over."""
    if backend.create_lock(info):
        return True
    current = backend.read_lock()
    if current is None:
        return False
    if current.lapsed():
        why = f"its lease lapsed ({current.describe()})"
    elif holder_is_alive(current) is False:
        why = f"its holder no longer runs ({current.describe()})"
    else:
        return False
    if not backend.replace_lock(current, info, f"{info.command}: lock taken over: {why}"):
        return False  # another taker was first
    if took_over is not None:
        took_over(f"the state's lock was taken over: {why}")
    return True


# The part of the lease a request must find left when it goes out (``Lease.fence``). A
# heartbeat renews every third of the lease, so a holder keeps more than two thirds left
# while it runs; with a third as the margin, a renewal may be late by a whole period before
# the holder stops sending. What the margin covers is the time from the check to the request
# reaching the service (writing it to the socket, the network) and the disagreement of the
# holders' wall clocks, which decide when a standby may take the lease over.
FENCE_MARGIN = 1 / 3


def steady_clock() -> float:
    """Seconds that never go back and keep counting while the machine sleeps (Linux's
    CLOCK_BOOTTIME; ``time.monotonic`` stops during a suspend there, and a lease expires
    during one as during any pause)."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return time.clock_gettime(time.CLOCK_BOOTTIME)
    return time.monotonic()


class Lease:
    """The state lock held as a lease (``botctl agent``): it names its holder and an expiry,
    and a heartbeat thread renews it every third of ``duration``. A standby takes it over
    once it lapses (``take_lock``), so an active holder that dies (SIGKILL) is replaced within
    ``duration``. A holder paused or cut off for longer has lost it: its renewal finds
    another lock, and its writes (through ``LeasedBackend``) are refused.

    What it sends is fenced too: ``fence`` is asked immediately before every request (the
    service client calls it, see ``service.options.Fence``) and refuses unless the lease
    still has ``margin`` seconds left on both this process's steady clock (from the instant
    its last renewal was prepared, so a wall clock stepped back cannot stretch it) and the
    wall clock (which the standbys judge expiry by, so a wall clock stepped forward ends it
    early, never late). A process paused past its lease therefore sends nothing when it
    resumes: not the next operation, and not the retry of a request whose deadline passed
    while it was stopped.

    The lease has its own backend (a git backend's private repository is not shared across
    threads); the expiry is wall-clock time, so the holders' clocks must agree to well within
    ``margin``."""

    def __init__(self, where: StateLocation, *, duration: float, command: str = "agent") -> None:
        self.where = where
        self.duration = duration
        self.margin = duration * FENCE_MARGIN
        self.command = command
        self.info: LockInfo | None = None  # the lease as last written, while held
        self.lost: str | None = None  # why the lease was lost (for the agent's status)
        self.took_over: str | None = None  # what taking it last took over (a lapsed lease)
        self._backend = open_backend(where)
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._valid_until = float("-inf")  # the expiry on ``steady_clock``, while held

    @property
    def held(self) -> bool:
        return self.info is not None and self.remaining() > 0

    def remaining(self) -> float:
        """Seconds the lease has left by both clocks (negative once it lapsed)."""
        info = self.info
        if info is None or info.expires is None:
            return float("-inf")
        return min(self._valid_until - steady_clock(), info.expires - time.time())

    def fence(self) -> None:
        """Nothing may be sent unless the lease is held with ``margin`` seconds to spare:
        ``LeaseLost`` (nothing was sent) otherwise."""
        info, left = self.info, self.remaining()
        if info is None:
            raise LeaseLost(
                f"not sent: this process no longer holds the lease on the state "
                f"({self.lost or 'it was released'})"
            )
        if left < self.margin:
            state = f"lapsed {-left:.1f} s ago" if left <= 0 else f"has {left:.1f} s left"
            raise LeaseLost(
                f"not sent: this process's lease on the state {state}, and a request needs "
                f"{self.margin:g} s of it (its renewal is late: the process was paused, or "
                "the state's storage does not answer)"
            )

    def try_acquire(self) -> bool:
        """Take the lease if it is free or lapsed; start renewing it."""
        with self._guard:
            held = self.info
        if held is not None:
            # Ours, unless it lapsed meanwhile (a paused process): then renewing says.
            return self.remaining() > 0 or self.renew()
        with self._guard:
            started = steady_clock()  # before the expiry is computed: never later than it
            info = LockInfo.for_this_process(f"botctl {self.command}", lease=self.duration)
            taken: list[str] = []
            if not take_lock(self._backend, info, taken.append):
                return False
            self.info, self.lost = info, None
            self.took_over = taken[-1] if taken else None
            self._valid_until = started + self.duration
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
            started = steady_clock()
            renewed = info.renewed(self.duration)
            try:
                message = f"botctl {self.command}: lease renewed"
                ok = self._backend.replace_lock(info, renewed, message)
            except BotctlError as exc:
                # Not reached: kept until it lapses, then dropped (nothing is sent anyway).
                if self.remaining() <= 0:
                    self._drop(f"the lease lapsed: {exc}")
                return False
            if ok:
                self.info = renewed
                self._valid_until = started + self.duration
                return True
            self._drop("another holder took the lease over")
            return False

    def _drop(self, why: str) -> None:
        self.info, self.lost, self._valid_until = None, why, float("-inf")

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
            self._valid_until = float("-inf")
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
        if info is None or self.lease.remaining() <= 0:
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
