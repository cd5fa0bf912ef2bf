"""When the service client retries, and how long it waits first.

Kept apart from ``client.py`` so the HTTP boundary reads as "send, translate" while the rules
of which failure is worth another try, and the arithmetic of backoff and server hints, are
testable without any HTTP. Every source of time and randomness is injectable through
``RetryPolicy`` so tests never depend on the real clock.
"""

from __future__ import annotations

import asyncio
import random as _random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from typing import Literal

import httpx

from botctl.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_RETRY_BASE_DELAY, DEFAULT_RETRY_MAX_DELAY


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

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    base_delay: float = DEFAULT_RETRY_BASE_DELAY
    max_delay: float = DEFAULT_RETRY_MAX_DELAY
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


def announced_window(headers: Mapping[str, str], now: float) -> tuple[float, float] | None:
    """(requests remaining, seconds until the window resets), when the response says."""
    remaining = headers.get("x-ratelimit-remaining")
    reset = headers.get("x-ratelimit-reset")
    if remaining is None or reset is None:
        return None
    try:
        left = float(remaining)
    except ValueError:
        return None
    reset_in = parse_reset(reset, now)
    if reset_in is None or left != left or left < 0:  # NaN, negative: not a window
        return None
    return left, reset_in


def announced_limit(headers: Mapping[str, str]) -> float | None:
    """The requests a window allows (``X-RateLimit-Limit``), when the response says."""
    try:
        limit = float(headers.get("x-ratelimit-limit") or "nan")
    except ValueError:
        return None
    return limit if 0 < limit < float("inf") else None


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


# What an operation promises about repeating it: a read or an absolute write ("idempotent")
# may be sent again whenever the first try failed; a create only when it surely was not applied.
Kind = Literal["read", "idempotent", "create"]

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Failures where the request never left this process: safe to retry even a create.
NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)
# Also never sent, but a bad URL scheme or a local protocol error will not heal by retrying.
NEVER_SENT = (*NOT_SENT, httpx.UnsupportedProtocol, httpx.LocalProtocolError)
_TRANSIENT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)


def may_retry_status(kind: Kind, status: int) -> bool:
    if kind == "create":
        return status == 429  # a refusal: certainly not applied
    return status in RETRY_STATUSES


def may_retry_failure(kind: Kind, exc: httpx.RequestError) -> bool:
    if kind == "create":
        return isinstance(exc, NOT_SENT)
    return isinstance(exc, _TRANSIENT)
