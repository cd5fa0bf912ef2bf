"""``--cache-dir`` shared by agents: each process takes a slot of its own.

Two agents started from one working directory (high availability on one machine, a second
agent for another branch) share the default ``--cache-dir``. Sharing the revisions would let
one delete the other's (each keeps only its own good revision) and git fetches into one
repository would collide, so each process claims ``slot-N`` (the first free one): an
exclusive ``flock`` on its lock file, held while the process lives and released by the
kernel when it dies, however it dies. A restarted agent takes its slot back, with its fetched
repository and revisions, so a restart fetches nothing it already had.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from dataclasses import dataclass
from pathlib import Path

from botctl.errors import BotctlError

MAX_SLOTS = 64
LOCK_NAME = ".lock"


@dataclass(frozen=True)
class Slot:
    """A directory of the cache this process alone uses; ``fd`` holds its lock."""

    path: Path
    fd: int

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def claim_slot(cache: Path) -> Slot:
    """The first slot of ``cache`` no living process holds, claimed for this one."""
    try:
        cache.mkdir(parents=True, exist_ok=True, mode=0o700)
        for n in range(MAX_SLOTS):
            slot = cache / f"slot-{n}"
            slot.mkdir(exist_ok=True, mode=0o700)
            fd = os.open(slot / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())  # for a person looking: who holds it
            return Slot(slot, fd)
    except OSError as exc:
        where = exc.filename or cache
        raise BotctlError(f"--cache-dir {cache}: cannot use {where}: {exc.strerror}") from None
    raise BotctlError(
        f"--cache-dir {cache}: all {MAX_SLOTS} slots are held by running agents; give this "
        "one a --cache-dir of its own"
    )
