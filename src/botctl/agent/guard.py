"""The listener's defences against clients that hold it, and against its own errors flooding
the log:

- ``raise_open_file_limit``: the soft ``RLIMIT_NOFILE`` raised to the hard limit at start (a
  soft limit of 1,024 is what a shell or a unit gives by default; the hard one is what the
  administrator allows);
- ``ConnectionGuard``: at most ``max_connections`` open at once, each given ``head_timeout``
  seconds to deliver a whole request head (uvicorn has no such deadline: its keep-alive timer
  is reset by every byte received, so a client sending one byte a minute keeps a connection,
  and a file descriptor, for ever). A connection past the cap evicts the oldest one that is
  not serving a request (a half-sent or idle one), so a flood of half-sent connections never
  locks the probes out;
- ``Throttle``: an error repeated many times a second (``accept`` failing once file
  descriptors run out) is logged once per interval, with how many were left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

# How open files are counted on Linux when the hard limit says "unlimited": the kernel's
# default fs.nr_open, the most a process may ask for.
_UNLIMITED_FILES = 1 << 20


def raise_open_file_limit() -> tuple[int, int] | None:
    """Raise the soft limit on open files to the hard one; (before, after), or None where
    the platform has no such limit."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on Unix
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = _UNLIMITED_FILES if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (ValueError, OSError):
            return soft, soft
        return soft, target
    return soft, soft


class Throttle:
    """Writes a message at most once per ``interval`` seconds per kind; the next one written
    says how many were left out meanwhile."""

    def __init__(
        self,
        write: Callable[[str], None],
        interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.write = write
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._left_out: dict[str, int] = {}

    def __call__(self, kind: str, message: str) -> None:
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return
        self._last[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if left_out and last is not None:
            message += f" ({left_out} more like it in the {now - last:.0f} s before, not logged)"
        # A log line that cannot be written must not become a new error.
        with contextlib.suppress(Exception):
            self.write(message)

    def loop_errors(self) -> Callable[[asyncio.AbstractEventLoop, dict[str, Any]], None]:
        """An event loop exception handler writing through this throttle (``accept`` failing
        with EMFILE is reported this way, many times a second)."""

        def handle(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
            message = str(context.get("message") or "event loop error")
            exc = context.get("exception")
            self(message, f"{message}: {type(exc).__name__}: {exc}" if exc else message)

        return handle

    def handler(self) -> logging.Handler:
        """A logging handler writing through this throttle (uvicorn's own warnings)."""
        throttle = self

        class Through(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:
                text = record.getMessage()
                throttle(text, text)

        return Through(logging.WARNING)


class ConnectionGuard:
    """The connections of one listener: capped, oldest idle evicted first, and each given a
    deadline for its request head. ``closed(reason)`` is told of every connection it closes
    (``evicted``, ``refused``: over the cap with none to evict; ``timeout``)."""

    def __init__(
        self,
        max_connections: int,
        head_timeout: float,
        closed: Callable[[str], None] = lambda reason: None,
    ) -> None:
        self.max_connections = max_connections
        self.head_timeout = head_timeout
        self.closed = closed
        self.open: dict[GuardedProtocol, None] = {}  # insertion order: oldest first

    def protocol(self) -> type[H11Protocol]:
        """uvicorn's h11 protocol, bound to this guard (``uvicorn.Config(http=...)``)."""
        guard = self

        class Bound(GuardedProtocol):
            def __init__(self, *args: Any, **kwargs: Any) -> None:
                super().__init__(*args, **kwargs)
                self.guard = guard

        return Bound

    def admit(self, connection: GuardedProtocol) -> bool:
        """Make room for a new connection; False when every open one is serving a request."""
        if len(self.open) >= self.max_connections:
            oldest = next((c for c in self.open if not c.serving), None)
            if oldest is None:
                self.closed("refused")
                return False
            oldest.drop("evicted")
        self.open[connection] = None
        return True

    def forget(self, connection: GuardedProtocol) -> None:
        self.open.pop(connection, None)


class GuardedProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline for each request head: armed when the
    connection opens and again when a response is complete (the next request's head, on a
    kept-alive connection), disarmed when a whole head has arrived; the body is the
    application's to bound (it reads it under a deadline of its own)."""

    guard: ConnectionGuard
    _deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if not self.guard.admit(self):
            transport.abort()  # frees the file descriptor now (a reset, not a goodbye)
            return
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self.guard.forget(self)
        super().connection_lost(exc)

    def handle_events(self) -> None:
        before = self.cycle
        super().handle_events()
        if self.cycle is not before:  # a whole request head arrived: the application's now
            self._disarm()

    def on_response_complete(self) -> None:
        self._arm()  # first: a pipelined request handled below disarms it again
        super().on_response_complete()

    @property
    def serving(self) -> bool:
        """A request is in progress: its head arrived and its response is not complete."""
        return self.cycle is not None and not self.cycle.response_complete

    def drop(self, reason: str) -> None:
        self._disarm()
        self.guard.forget(self)
        if not self.transport.is_closing():
            self.transport.abort()
        self.guard.closed(reason)

    def _arm(self) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(self.guard.head_timeout, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if not self.serving:
            self.drop("timeout")
