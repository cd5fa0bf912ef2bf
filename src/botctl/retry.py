"""Retry timing and request pacing for the service client.

Kept apart from ``client.py`` so the HTTP boundary reads as "send, classify, retry" while the
arithmetic of when to send lives here, testable without any HTTP. Every source of time and
randomness is injectable through ``RetryPolicy`` so tests never depend on the real clock.
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime


async def _real_sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a request is retried.

    ``max_attempts`` counts the first try. Without a server hint the delay before retry *n* is
    "full jitter": uniform in ``[0, min(max_delay, base_delay * 2**(n-1))]``, which spreads
    concurrent retriers apart instead of having them collide again. A server hint
    (``Retry-After`` or an exhausted ``X-RateLimit-*`` window) is honoured exactly, capped at
    ``max_delay`` so a bogus header cannot stall a run for hours.

    ``sleep``, ``random``, ``clock`` (monotonic seconds) and ``wall_clock`` (Unix seconds, to
    interpret HTTP dates and Unix-ms resets) exist for tests.
    """

    max_attempts: int = 5
    base_delay: float = 0.5
    max_delay: float = 30.0
    sleep: Callable[[float], Awaitable[None]] = _real_sleep
    random: Callable[[], float] = _random.random
    clock: Callable[[], float] = time.monotonic
    wall_clock: Callable[[], float] = time.time

    def backoff(self, attempt: int) -> float:
        """Jittered delay after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (attempt - 1))
        return self.random() * ceiling

    def cap(self, delay: float) -> float:
        return max(0.0, min(self.max_delay, delay))


DEFAULT_RETRY = RetryPolicy()


def parse_retry_after(value: str, now: float) -> float | None:
    """``Retry-After`` as seconds from ``now``: delta-seconds or an HTTP date (RFC 9110)."""
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, moment.timestamp() - now)


def parse_reset(value: str, now: float) -> float | None:
    """``X-RateLimit-Reset`` as seconds from ``now``.

    The service documents Unix milliseconds (API-NOTES); other deployments of the same
    infrastructure send Unix seconds or a delta, so the magnitude decides which one it is.
    """
    try:
        number = float(value.strip())
    except ValueError:
        return None
    if number > 1e11:  # Unix milliseconds (1e11 ms is 1973)
        return max(0.0, number / 1000 - now)
    if number > 1e8:  # Unix seconds
        return max(0.0, number - now)
    return max(0.0, number)  # delta seconds


def window_exhausted_delay(headers: Mapping[str, str], now: float) -> float | None:
    """Seconds until the rate-limit window resets, when the response says it is used up."""
    remaining = headers.get("x-ratelimit-remaining")
    reset = headers.get("x-ratelimit-reset")
    if remaining is None or reset is None:
        return None
    try:
        if float(remaining) > 0:
            return None
    except ValueError:
        return None
    return parse_reset(reset, now)


def server_delay(headers: Mapping[str, str], now: float) -> float | None:
    """The wait a refusal asks for: ``Retry-After`` first, then an exhausted window."""
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        delay = parse_retry_after(retry_after, now)
        if delay is not None:
            return delay
    return window_exhausted_delay(headers, now)


@dataclass
class RequestStats:
    """What a client did, for benchmarks and the apply summary."""

    requests: Counter[str] = field(default_factory=Counter)  # attempts sent, by HTTP method
    retries: int = 0
    pace_wait: float = 0.0  # seconds spent waiting for the pacer (rate limit or reset gate)
    backoff_wait: float = 0.0  # seconds spent sleeping before retries

    @property
    def total(self) -> int:
        return sum(self.requests.values())


class Pacer:
    """Spaces requests of one client (one API key) evenly, and holds them all while the
    service says the key's window is exhausted.

    Evenly spaced slots rather than a bursty token bucket: the service's windowed limit
    (v2 documents 100 per 10 s) is met by any even spacing at the same average rate, and no
    burst can overshoot a window that started before the run. Slots are reserved without an
    ``await`` between reading and updating, so concurrent callers on one event loop never
    take the same slot.
    """

    def __init__(
        self,
        rate: float,
        clock: Callable[[], float],
        sleep: Callable[[float], Awaitable[None]],
    ) -> None:
        self._interval = 1.0 / rate if rate > 0 else 0.0
        self._clock = clock
        self._sleep = sleep
        self._next_slot = float("-inf")
        self._blocked_until = float("-inf")

    def block_for(self, seconds: float) -> None:
        """No request starts within ``seconds`` from now (a reset gate, shared by all)."""
        self._blocked_until = max(self._blocked_until, self._clock() + seconds)

    async def acquire(self) -> float:
        """Wait for this request's turn; returns the seconds waited."""
        waited = 0.0
        while True:
            now = self._clock()
            slot = max(now, self._next_slot, self._blocked_until)
            if self._interval:
                self._next_slot = slot + self._interval
            if slot <= now:
                return waited
            await self._sleep(slot - now)
            waited += slot - now
            # A gate raised while we slept (another response said "window exhausted")
            # applies to us too; otherwise our reserved slot has come.
            if self._blocked_until <= self._clock():
                return waited
