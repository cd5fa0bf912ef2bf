"""The state lock: one apply at a time per state file, naming its holder.

An exclusively created ``<state>.lock`` file holds the holder's pid, host, start time and
command. A second apply fails fast (or waits up to ``timeout`` seconds) and says who holds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from botctl.errors import LockError


def lock_path_for(state_path: Path) -> Path:
    return state_path.with_name(state_path.name + ".lock")


@dataclass(frozen=True)
class LockInfo:
    pid: int
    host: str
    since: str
    command: str

    def describe(self) -> str:
        return f"pid {self.pid} on {self.host}, since {self.since} ({self.command})"

    def holder_is_dead(self) -> bool:
        if self.host != socket.gethostname():
            return False  # cannot tell for another machine
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def read_lock(state_path: Path) -> LockInfo | None:
    try:
        data = json.loads(lock_path_for(state_path).read_text(encoding="utf-8"))
        return LockInfo(
            pid=int(data["pid"]),
            host=str(data["host"]),
            since=str(data["since"]),
            command=str(data.get("command", "")),
        )
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, OSError):
        return LockInfo(pid=-1, host="?", since="?", command="unreadable lock file")


class StateLock:
    """One apply at a time per state file: an exclusively created lock file naming its holder.
    A second apply fails fast (or waits up to ``timeout`` seconds) and says who holds it."""

    def __init__(self, state_path: Path, *, timeout: float = 0.0, command: str = "apply") -> None:
        self.path = lock_path_for(state_path)
        self.state_path = state_path
        self.timeout = timeout
        self.command = command
        self._held = False

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + self.timeout
        info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
            "command": self.command,
        }
        while True:
            try:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                if time.monotonic() >= deadline:
                    raise self._held_error() from None
                time.sleep(0.1)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(info, handle)
            self._held = True
            return

    def _held_error(self) -> LockError:
        holder = read_lock(self.state_path)
        who = holder.describe() if holder else "another process"
        advice = "wait for it, or pass --lock-timeout SECONDS to wait"
        if holder and holder.holder_is_dead():
            advice = (
                "that process no longer exists; if you are sure no apply is running, "
                f"remove the lock with `botctl unlock --state {self.state_path}`"
            )
        return LockError(f"state {self.state_path} is locked by {who}: {advice}")

    def release(self) -> None:
        if self._held:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            self._held = False

    def __enter__(self) -> StateLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def break_lock(state_path: Path) -> LockInfo | None:
    """Remove a lock left behind (``botctl unlock``); returns who held it."""
    holder = read_lock(state_path)
    with contextlib.suppress(FileNotFoundError):
        lock_path_for(state_path).unlink()
    return holder
