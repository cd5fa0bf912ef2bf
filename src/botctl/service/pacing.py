"""Client-side pacing of requests per API key, and the counts benchmarks report.

Separate from ``retry.py``: retries react to one refused request, pacing keeps every request
of a client under the rate the service announces (``X-RateLimit-*``), or learned from its
429s when it announces none, or ``--rate-limit``, and honours an exhausted window for all of
them at once.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal

# What the run waits on, told to whoever shows progress: (the key's variable, the seconds
# about to be waited, why: "limit" the service's window or refusals, "pace" --rate-limit).
WaitReason = Literal["limit", "pace"]
OnWait = Callable[[str, float, WaitReason], None]

# Adapting to 429s when the service announces no window: a refusal sets the pace to what the
# service let through in the Retry-After before it (or the second before it); successes
# speed up by 5% each until near the pace refused, then by 0.1% (probing), so the limit is
# found again rarely.
_GUESSED_WINDOW = 1.0  # seconds: the window a 429 without Retry-After is taken to mean
_AT_A_PACE = 3  # requests let through within that window before a 429 says anything of a pace
_AGAIN = 1.5  # refused at the learned pace: at least this much slower
_MARGIN = 1.1  # the learned pace stays this far under the pace refused
_FASTER = 0.95
_NEAR = 1.15  # within this of the pace last refused: probe slowly
_PROBE = 0.999
_RECENT = 256  # request starts remembered, to know the pace a refusal was met at
_STEP = 0.05  # seconds a waiter sleeps at once while the service's pace may change
_MOVED = 1.25  # a pace this much faster or slower than when turns were reserved: reserve again


@dataclass
class RequestStats:
    """What a client did, for benchmarks and the apply summary."""

    requests: Counter[str] = field(default_factory=Counter)  # attempts sent, by HTTP method
    retries: int = 0
    pace_wait: float = 0.0  # seconds spent waiting for the pacer (rate limit or reset gate)
    backoff_wait: float = 0.0  # seconds spent sleeping before retries
    # Answers by (operation, HTTP status, or "error" for no answer): the agent's metrics.
    responses: Counter[tuple[str, str]] = field(default_factory=Counter)
    rate_limited: int = 0  # answers 429 (each retried, or the request failed)
    failed: int = 0  # requests that failed for good
    # Wall seconds during which some request of a key waited on the service's limit, by the
    # key's variable.
    limit_wait: dict[str, float] = field(default_factory=dict)
    # The window each key's answers announced (``X-RateLimit-Limit`` requests, and the
    # longest time until a reset seen), by the key's variable: the agent's watch learns the
    # key's limit from it.
    windows: dict[str, tuple[float, float]] = field(default_factory=dict)
    by_key: Counter[str] = field(default_factory=Counter)  # attempts sent, by the key's variable

    def announced(self, key: str, limit: float, reset_in: float) -> None:
        longest = max(reset_in, self.windows.get(key, (0.0, 0.0))[1])
        self.windows[key] = (limit, longest)

    @property
    def total(self) -> int:
        return sum(self.requests.values())

    def add(self, other: RequestStats) -> None:
        """Fold another client's statistics into these."""
        self.requests.update(other.requests)
        self.by_key.update(other.by_key)
        self.retries += other.retries
        self.pace_wait += other.pace_wait
        self.backoff_wait += other.backoff_wait
        self.responses.update(other.responses)
        self.rate_limited += other.rate_limited
        self.failed += other.failed
        for key, seconds in other.limit_wait.items():
            self.limit_wait[key] = self.limit_wait.get(key, 0.0) + seconds
        for key, (limit, longest) in other.windows.items():
            self.announced(key, limit, longest)


class Pacer:
    """Spaces the requests of one client (one API key, shared by all of the run's workers)
    and holds them all while the key's window is exhausted.

    The pace is the slowest of three: ``--rate-limit`` (a floor set by the user); the window
    the service announces (``X-RateLimit-Remaining`` requests left until
    ``X-RateLimit-Reset``: the requests are spread evenly over it, so a run never drains the
    window and then bounces off it); and, when the service announces nothing, the pace
    learned from its 429s (halved at each refusal, sped up slowly at each success).

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
        on_wait: OnWait | None = None,
        name: str = "",
    ) -> None:
        self._floor = 1.0 / rate if rate > 0 else 0.0
        self._announced = 0.0  # from the service's window
        self._learned = 0.0  # from 429s without a window
        self._clock = clock
        self._sleep = sleep
        self._on_wait = on_wait
        self._name = name
        self._next_slot = float("-inf")
        self._blocked_until = float("-inf")
        self._last_start = float("-inf")
        self._starts: deque[float] = deque(maxlen=_RECENT)
        self._generation = 0  # bumped when reserved turns no longer fit the pace
        self._slowed_at = float("-inf")  # when 429s last slowed the pace
        self._waiting = 0  # requests waiting on the service's limit now
        self._waiting_since = 0.0
        self.limit_waited = 0.0  # wall seconds some request waited on the service's limit
        self._refused_at = 0.0  # the interval requests were refused at
        self._reserved_at = 0.0  # the interval turns were reserved at

    @property
    def interval(self) -> float:
        """Seconds between two request starts, now."""
        return max(self._floor, self._announced, self._learned)

    def block_for(self, seconds: float) -> None:
        """No request starts within ``seconds`` from now (a reset gate, shared by all)."""
        self._blocked_until = max(self._blocked_until, self._clock() + seconds)

    def _repace(self) -> None:
        """Turns reserved at a pace far from today's are given up and reserved again."""
        now, then = self.interval, self._reserved_at
        if now == then:
            return
        if not then or not now or now > then * _MOVED or now * _MOVED < then:
            self._reserved_at = now
            self._next_slot = self._last_start + now
            self._generation += 1

    def announced(self, remaining: float, reset_in: float) -> None:
        """The service said ``remaining`` requests are left until its window resets in
        ``reset_in`` seconds: spread them over it (none left: hold all until the reset)."""
        if remaining <= 0:
            self.block_for(reset_in)
            return
        self._announced = reset_in / remaining
        self._learned = 0.0  # the service says; no need to guess
        self._repace()

    def refused(self, *, announced: bool, sent_at: float, retry_after: float | None) -> None:
        """A 429 for a request sent at ``sent_at``. Without a window to go by, slow down,
        once per slowdown (requests already sent at the old pace are refused too, and say
        nothing new): to the pace of the requests the service let through during the
        ``retry_after`` before it (the window it implies; a second without one): fewer
        than three, and the client was not sending at a pace, the refusal is only waited
        out; refused again at the learned pace, slower still."""
        if announced or sent_at < self._slowed_at:
            return
        window = retry_after or _GUESSED_WINDOW
        let_through = sum(1 for t in self._starts if sent_at - window <= t < sent_at)
        if let_through < _AT_A_PACE:  # not sending at any pace: a refusal to wait out, no more
            return
        estimate = window / let_through
        if self._learned:
            estimate = max(estimate, self._learned * _AGAIN)
        self._refused_at = max(estimate, 0.005)
        self._learned = self._refused_at * _MARGIN
        self._slowed_at = self._clock()
        self._repace()

    def succeeded(self) -> None:
        """An answer that was no 429: speed up, quickly while well below the pace last
        refused, then slowly (probing for the limit, found again rarely)."""
        if not self._learned:
            return
        near = self._learned <= self._refused_at * _NEAR
        self._learned *= _PROBE if near else _FASTER
        self._repace()

    def _enter(self) -> None:
        if not self._waiting:
            self._waiting_since = self._clock()
        self._waiting += 1

    def _leave(self) -> None:
        self._waiting -= 1
        if not self._waiting:
            self.limit_waited += self._clock() - self._waiting_since

    async def acquire(self) -> float:
        """Wait for this request's turn; returns the seconds waited.

        A turn is reserved (``_next_slot``) when asked for. While the pace is the service's
        (announced or learned), it moves with every answer: a waiter then sleeps in short
        steps and reserves again once the pace changed a lot, so eight workers that reserved
        turns at a slow pace do not keep them once the window says the pace is fast again."""
        waited = 0.0
        while True:
            now = self._clock()
            slot = max(now, self._next_slot, self._blocked_until)
            gated = self._blocked_until >= slot
            interval = self.interval
            if interval:
                self._next_slot = slot + interval
            if slot <= now:
                self._last_start = now
                self._starts.append(now)
                return waited
            left = slot - now
            limit = gated or interval > self._floor
            if self._on_wait is not None:
                self._on_wait(self._name, left, "limit" if limit else "pace")
            if limit:
                self._enter()
            try:
                if self._announced or self._learned:
                    generation = self._generation
                    # Steps of at least half the floor's spacing: a pace the floor holds
                    # back (the agent's watch, at its budget) changes nothing sooner.
                    quantum = max(_STEP, self._floor / 2)
                    while left > 0 and generation == self._generation:
                        step = min(left, quantum)
                        await self._sleep(step)
                        waited += step
                        left -= step
                else:
                    await self._sleep(left)
                    waited += left
                    left = 0.0
            finally:
                if limit:
                    self._leave()
            if left > 0:
                continue  # the pace changed: reserve again
            # A gate raised while we slept (another response said "window exhausted")
            # applies to us too; otherwise our reserved slot has come.
            if self._blocked_until <= self._clock():
                self._last_start = self._clock()
                self._starts.append(self._last_start)
                return waited
