"""The drift watch's schedule: which chatbots to read next, and when, within a budget.

The agent reads the service to find drift, and every read counts against the key's rate
limit, which CI's plans and the customer's other integrations share. So the watch spends at
most ``--watch-budget`` percent of each key's limit: it reads the chatbots of a key in
slices, the ones read longest ago first (round-robin: a chatbot just read by an apply waits
its turn again), each slice a chatbot-list read and the chatbots' own reads, spaced so that
the slice's requests divided by the time to the next slice stay within the budget. A key's
fleet is covered every ``slices * spacing`` seconds: its reads in a round (each slice's list
read and every chatbot's) divided by its budget, or ``--interval`` when that is longer (the
watch never reads a chatbot more often than the interval says).

A key's limit is the operator's ``--rate-limit`` (or ``rateLimit``) when given, else what the
service announces (``X-RateLimit-Limit`` requests per window, the window taken as the longest
time to reset seen: a window seen early counts short, so the estimate starts high and only
comes down, and counts at ``LEARNED_SHARE`` of it); unknown, the key's whole fleet is read
once per ``--interval``.

Pure: the clock is handed in; ``tests/agent/test_watch.py`` drives it with a fake one.
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

LimitSource = Literal["rate-limit", "announced", "unknown"]
DEFAULT_BUDGET = 20.0  # percent of a key's limit
DEFAULT_SLICE = 10.0  # seconds between slices at the budget: the service's window
_LEARNING = 0.5  # weight of a slice's measured cost of a chatbot in the running estimate
# A learned limit counts at this share: every reset seen is at most the window, so the window
# seen can only be shorter than the real one, and the rate it gives higher (a token bucket's
# reset, when it is full again, is rarely seen from empty: 10-20 % short in the sandbox).
LEARNED_SHARE = 0.8


@dataclass(frozen=True)
class Window:
    """What a key's answers announced: ``limit`` requests per window, and the longest time
    until a window's reset seen (the window's length, as far as can be told)."""

    limit: float
    longest_reset: float

    def rate(self) -> float | None:
        """The limit in requests per second, as far as it can be told (an upper bound)."""
        return self.limit / self.longest_reset if self.longest_reset > 0 else None


@dataclass
class _Key:
    """One API key's part of the watch."""

    name: str
    chatbots: tuple[str, ...] = ()
    rate: float | None = None  # the key's limit, requests per second; None: unknown
    source: LimitSource = "unknown"
    per_chatbot: float = 1.0  # requests a chatbot's own reads take (learned)
    # When its last slice was read (or its whole fleet): the next is due one spacing on, as
    # the spacing is now (a limit learned meanwhile counts at once). None: due now.
    since: float | None = None
    window: Window | None = None


@dataclass(frozen=True)
class Slice:
    """The chatbots to read now, by key; ``at``: when it was taken (its keys' next slices
    are due one spacing on from then, so a slice read at the budget's pace, which takes
    about a spacing, is followed by the next at once)."""

    parts: Mapping[str, tuple[str, ...]]
    at: float = 0.0

    @property
    def chatbots(self) -> tuple[str, ...]:
        return tuple(c for ids in self.parts.values() for c in ids)

    def __bool__(self) -> bool:
        return any(self.parts.values())


@dataclass(frozen=True)
class Shape:
    """A key's slices: ``size`` chatbots each, one every ``spacing`` seconds, ``slices`` to
    cover its ``chatbots``; ``reads``: the requests of a round; ``budget``: requests per
    second the watch may spend (None: no limit known)."""

    chatbots: int
    size: int
    spacing: float
    slices: int
    reads: float
    budget: float | None

    @property
    def cover(self) -> float:
        return self.slices * self.spacing


@dataclass
class Watch:
    """The schedule; see the module. ``budget``: percent of each key's limit; ``interval``:
    the least time between two reads of a chatbot; ``slice_seconds``: the spacing of slices
    at the budget (the larger, the fewer list reads per round)."""

    budget: float = DEFAULT_BUDGET
    interval: float = 60.0
    slice_seconds: float = DEFAULT_SLICE
    clock: Callable[[], float] = time.monotonic
    keys: dict[str, _Key] = field(default_factory=dict)
    last_read: dict[str, float] = field(default_factory=dict)  # chatbot id -> clock time
    started: float | None = None

    # --- what to read --------------------------------------------------------------------

    def fleet(self, by_key: Mapping[str, Sequence[str]]) -> None:
        """The chatbots to watch, by key (a revision's). Known ones keep their last read;
        new ones were never read (read first); gone ones are forgotten."""
        now = self.clock()
        if self.started is None:
            self.started = now
        for name in list(self.keys):
            if name not in by_key:
                del self.keys[name]
        for name, ids in by_key.items():
            key = self.keys.setdefault(name, _Key(name))
            key.chatbots = tuple(sorted(set(ids)))
        watched = {c for key in self.keys.values() for c in key.chatbots}
        for chatbot_id in list(self.last_read):
            if chatbot_id not in watched:
                del self.last_read[chatbot_id]

    def limit(self, name: str, rate: float | None, source: LimitSource) -> None:
        """A key's limit in requests per second (None: unknown), and where it comes from."""
        key = self.keys.get(name)
        if key is not None:
            key.rate, key.source = (rate, source) if rate else (None, "unknown")

    def announced(self, name: str, limit: float, reset_in: float) -> None:
        """What a key's answer announced: learn its limit (``--rate-limit`` wins)."""
        key = self.keys.get(name)
        if key is None or limit <= 0:
            return
        longest = max(reset_in, key.window.longest_reset if key.window else 0.0)
        key.window = Window(limit, longest)
        if key.source != "rate-limit":
            rate = key.window.rate()
            self.limit(name, rate * LEARNED_SHARE if rate else None, "announced")

    def pace(self, name: str) -> float | None:
        """The requests per second a slice of the key is read at: its budget (None: no
        limit known, read as the run's pacing says)."""
        return self.shape(name).budget

    def shape(self, name: str) -> Shape:
        key = self.keys[name]
        n = len(key.chatbots)
        if key.rate is None or n == 0:
            return Shape(n, n, self.interval, 1, 1 + n * key.per_chatbot, None)
        budget = key.rate * self.budget / 100.0
        # One slice's requests at the budget: its list read and ``size`` chatbots' reads.
        per_slice = max(1.0 + key.per_chatbot, budget * self.slice_seconds)
        size = max(1, min(n, int((per_slice - 1.0) // key.per_chatbot)))
        slices = math.ceil(n / size)
        spacing = max((1.0 + size * key.per_chatbot) / budget, self.interval / slices)
        return Shape(n, size, spacing, slices, slices + n * key.per_chatbot, budget)

    def due_at(self) -> float | None:
        """When the next slice is due (clock time); None with nothing to watch."""
        due = [self._due(name) for name, k in self.keys.items() if k.chatbots]
        return min(due) if due else None

    def _due(self, name: str) -> float:
        since = self.keys[name].since
        return self.clock() if since is None else since + self.shape(name).spacing

    def take(self) -> Slice:
        """The chatbots due now: for each key whose slice is due, its ``size`` chatbots read
        longest ago (never read first; ties by id). Nothing changes until ``done``."""
        now = self.clock()
        parts: dict[str, tuple[str, ...]] = {}
        for name, key in self.keys.items():
            if key.chatbots and self._due(name) <= now:
                size = self.shape(name).size
                order = heapq.nsmallest(
                    size, key.chatbots, key=lambda c: (self.last_read.get(c, -math.inf), c)
                )
                parts[name] = tuple(order)
        return Slice(parts, now)

    # --- what was read -------------------------------------------------------------------

    def done(self, read: Slice, requests: Mapping[str, int] | None = None) -> None:
        """``read`` was read (not preempted, not failed): its chatbots' reads are now, its
        keys' next slices one spacing after it was taken; ``requests``: what each key's part
        sent, to learn what a chatbot's reads cost."""
        now = self.clock()
        for name, ids in read.parts.items():
            key = self.keys.get(name)
            if key is None:
                continue
            sent = (requests or {}).get(name)
            if sent and ids:
                measured = max(1.0, (sent - 1) / len(ids))
                key.per_chatbot += _LEARNING * (measured - key.per_chatbot)
            self.read(ids, now)
            # Read at the budget's pace, the next slice follows from when this one began; no
            # limit known, a whole round an interval after it ended (as a fetch is).
            key.since = read.at if key.rate is not None else now

    def read(self, chatbot_ids: Iterable[str], at: float | None = None) -> None:
        """Chatbots read by another pass (a revision's apply, its read-back)."""
        now = self.clock() if at is None else at
        for chatbot_id in chatbot_ids:
            self.last_read[chatbot_id] = now

    def restart(self) -> None:
        """Every key's whole fleet was just read (``read``): its next slice one spacing on."""
        now = self.clock()
        for key in self.keys.values():
            key.since = now

    # --- what it says --------------------------------------------------------------------

    def cover_seconds(self) -> float | None:
        """The time to read every chatbot once (the slowest key's round)."""
        covers = [self.shape(n).cover for n, k in self.keys.items() if k.chatbots]
        return max(covers) if covers else None

    def oldest(self) -> tuple[str | None, float | None]:
        """The chatbot read longest ago and the age of that read (a chatbot never read:
        the time since the watch started)."""
        now = self.clock()
        watched = [c for key in self.keys.values() for c in key.chatbots]
        if not watched:
            return None, None
        first = min(watched, key=lambda c: (self.last_read.get(c, -math.inf), c))
        at = self.last_read.get(first, self.started if self.started is not None else now)
        return first, max(0.0, now - at)

    def to_document(self) -> dict[str, Any]:
        oldest, age = self.oldest()
        cover = self.cover_seconds()
        return {
            "budgetPercent": self.budget,
            "coverSeconds": None if cover is None else round(cover, 1),
            "oldestReadSeconds": None if age is None else round(age, 1),
            "oldestRead": oldest,
            "keys": [self._key_document(name) for name in sorted(self.keys)],
        }

    def _key_document(self, name: str) -> dict[str, Any]:
        key, shape = self.keys[name], self.shape(name)
        return {
            "apiKeyEnv": name,
            "limitPerSecond": None if key.rate is None else round(key.rate, 3),
            "limitFrom": key.source,
            "budgetPerSecond": None if shape.budget is None else round(shape.budget, 3),
            "chatbots": shape.chatbots,
            "sliceSize": shape.size,
            "sliceSeconds": round(shape.spacing, 2),
            "readsPerRound": round(shape.reads, 1),
            "coverSeconds": round(shape.cover, 1),
            "nextSliceInSeconds": round(max(0.0, self._due(name) - self.clock()), 1),
        }
