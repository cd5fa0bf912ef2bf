"""State in a file (the default, ``.botctl/state.json``), its lock in ``<state>.lock``.

Versions are the SHA-256 of the file's bytes. A write takes an advisory ``flock`` on the
state's directory, compares the file's hash with the version read, and only then replaces
the file (temporary file, fsync, rename): two botctl processes on one machine cannot both
pass the comparison. What is left: a process that ignores the flock (an editor, ``cp``) can
replace the file between the comparison and the rename, and on network file systems
``flock`` may not reach other machines. The state lock is the primary guard against both;
the compare-and-swap catches what gets past it.

State, lock and temporary files are created 0600: the state may hold what botctl sent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

from botctl.errors import StateError, StateWriteError
from botctl.store.backend import (
    LockInfo,
    LostCompareAndSwap,
    Snapshot,
    StateBackend,
    Version,
)
from botctl.store.files import create_file, read_bytes_if_any, write_atomically

# Seconds a write waits for another botctl's compare-and-swap on the same directory (held
# for a few milliseconds by a process that runs).
FLOCK_WAIT = 10.0


def lock_path_for(state_path: Path) -> Path:
    return state_path.with_name(state_path.name + ".lock")


def _version_of(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


class PathBackend(StateBackend):
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock_path = lock_path_for(path)
        self.where = str(path)

    def key_file(self) -> Path | None:
        return self.path.with_name(self.path.name + ".key")

    def read(self) -> Snapshot:
        data = self._read_bytes()
        if data is None:
            return Snapshot(None, None)
        try:
            return Snapshot(data.decode("utf-8"), _version_of(data))
        except UnicodeDecodeError:
            raise StateError(f"state file {self.where} is not UTF-8 text") from None

    def _read_bytes(self) -> bytes | None:
        try:
            return read_bytes_if_any(self.path)  # a FIFO is refused, never waited on
        except OSError as exc:
            raise StateError(f"cannot read state file {self.where}: {exc.strerror}") from None

    def write(self, text: str, expected: Version, message: str) -> Version:
        with self._directory_locked():
            return self._compare_and_write(text, expected)

    def write_fenced(self, text: str, expected: Version, message: str, lease: LockInfo) -> Version:
        # The lease is looked at under the same flock its renewal and takeover take: no other
        # botctl on this machine can take it between the look and the write.
        with self._directory_locked():
            self.check_lease(self.read_lock(), lease)
            return self._compare_and_write(text, expected)

    def _compare_and_write(self, text: str, expected: Version) -> Version:
        data = self._read_bytes()
        if (None if data is None else _version_of(data)) != expected:
            raise LostCompareAndSwap(self.where)
        try:
            write_atomically(self.path, text)
        except OSError as exc:
            raise StateWriteError(f"cannot write state file {self.where}: {exc.strerror}") from None
        return _version_of(text.encode("utf-8"))

    def replace_lock(self, expected: LockInfo, new: LockInfo, message: str) -> bool:
        with self._directory_locked():
            if self.read_lock() != expected:
                return False
            try:
                write_atomically(self.lock_path, new.to_text())
            except OSError as exc:
                raise StateError(
                    f"cannot write the lock {self.lock_path}: {exc.strerror}"
                ) from None
            return True

    @contextlib.contextmanager
    def _directory_locked(self) -> Iterator[None]:
        """Serialise botctl's compare-and-swap writers of this directory (held for the
        comparison and the rename only, a few milliseconds)."""
        directory = self.path.parent
        try:
            directory.mkdir(parents=True, exist_ok=True)
            fd = os.open(directory, os.O_RDONLY)
        except OSError as exc:
            raise StateError(f"cannot use the directory of {self.where}: {exc.strerror}") from None
        try:
            self._flock(fd)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def _flock(self, fd: int) -> None:
        """The directory's flock within ``FLOCK_WAIT`` seconds. Never a blocking wait: a
        process stopped while it holds the flock (SIGSTOP, a frozen container) would hold
        every other botctl of this machine with it, a standby's takeover included; past the
        wait, this write or renewal fails (and the agent's cycle backs off and tries again)."""
        deadline = time.monotonic() + FLOCK_WAIT
        pause = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise StateError(
                        f"cannot write {self.where}: another botctl process on this machine has "
                        f"held its directory's lock for over {FLOCK_WAIT:g} s (a process "
                        "stopped or frozen while writing?); nothing was written"
                    ) from None
            time.sleep(pause)
            pause = min(pause * 2, 0.1)

    def create_lock(self, info: LockInfo) -> bool:
        try:
            return create_file(self.lock_path, info.to_text())
        except OSError as exc:  # a full disk: nothing was linked, so nobody's lock
            raise StateError(f"cannot create the lock {self.lock_path}: {exc.strerror}") from None

    def read_lock(self) -> LockInfo | None:
        try:
            data = read_bytes_if_any(self.lock_path)  # a FIFO is refused, never waited on
        except OSError as exc:
            raise StateError(f"cannot read the lock {self.lock_path}: {exc.strerror}") from None
        if data is None:
            return None
        return LockInfo.from_text(data.decode("utf-8", errors="replace"))

    def remove_lock(self, expected: LockInfo | None, message: str) -> LockInfo | None:
        with self._directory_locked():
            current = self.read_lock()
            if current is None or (expected is not None and current != expected):
                return None
            with contextlib.suppress(FileNotFoundError):
                self.lock_path.unlink()
            return current
