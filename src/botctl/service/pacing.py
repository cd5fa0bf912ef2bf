"""Client-side pacing of requests per API key, and the counts benchmarks report.

Separate from ``retry.py``: retries react to one refused request, pacing keeps every request
of a client under a known rate (``--rate-limit``) and honours an exhausted window for all of
them at once.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field


@dataclass
class RequestStats:
    """What a client did, for benchmarks and the apply summary."""

    requests: Counter[str] = field(default_factory=Counter)  # attempts sent, by HTTP method
    retries: int = 0
    pace_wait: float = 0.0  # seconds spent waiting for the pacer (rate limit or reset gate)
    backoff_wait: float = 0.0  # seconds spent sleeping before retries
    # Answers by (operation, HTTP status, or "error" for no answer): the agent's metrics.
    responses: Counter[tuple[str, str]] = field(default_factory=Counter)
    throttled: int = 0  # answers 429

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def add(self, other: RequestStats) -> None:
        """Fold another client's statistics into these."""
        self.requests.update(other.requests)
        self.retries += other.retries
        self.pace_wait += other.pace_wait
        self.backoff_wait += other.backoff_wait
        self.responses.update(other.responses)
        self.throttled += other.throttled


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
