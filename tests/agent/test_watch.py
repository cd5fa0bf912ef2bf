"""The drift watch's schedule on a fake clock: the budget makes the slices' size and spacing,
slices go round-robin (the oldest read first) and cover the fleet in the period they
announce, and the oldest read's age is told."""

from __future__ import annotations

import math

import pytest

from botctl.agent.watch import LEARNED_SHARE, Watch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fleet(n: int, prefix: str = "bot") -> list[str]:
    return [f"{prefix}-{i:03d}" for i in range(n)]


def watching(
    n: int, *, rate: float | None = 10.0, budget: float = 20.0, interval: float = 60.0
) -> tuple[Watch, Clock]:
    clock = Clock()
    watch = Watch(budget=budget, interval=interval, clock=clock)
    watch.fleet({"KEY": fleet(n)})
    watch.limit("KEY", rate, "rate-limit" if rate else "unknown")
    return watch, clock


def run_for(watch: Watch, clock: Clock, seconds: float) -> list[tuple[float, tuple[str, ...]]]:
    """Every slice taken (and read at once) until ``seconds`` have passed."""
    end = clock.now + seconds
    seen: list[tuple[float, tuple[str, ...]]] = []
    while True:
        due = watch.due_at()
        assert due is not None
        if due > end:
            return seen
        clock.now = max(clock.now, due)
        taken = watch.take()
        assert taken
        seen.append((clock.now, taken.chatbots))
        watch.done(taken, {"KEY": 1 + len(taken.chatbots)})


def test_the_budget_makes_the_slices_size_and_spacing() -> None:
    # 500 chatbots, the real limit (10/s), 20 %: 2 requests/s, a slice each 10 s of 19
    # chatbots and its list read: 20 requests.
    watch, _ = watching(500)
    shape = watch.shape("KEY")
    assert (shape.budget, shape.size, shape.spacing) == (2.0, 19, 10.0)
    assert shape.slices == math.ceil(500 / 19) == 27
    assert shape.reads == 27 + 500
    # The requests of a round over the budget, to within the last slice's rounding.
    assert math.ceil(shape.reads / 2.0) <= shape.cover <= math.ceil(shape.reads / 2.0) + 10
    # Half the budget: slices of half the size, twice the rounds.
    half, _ = watching(500, budget=10)
    assert (half.shape("KEY").size, half.shape("KEY").spacing) == (9, 10.0)


def test_no_limit_known_reads_the_whole_fleet_every_interval() -> None:
    watch, clock = watching(50, rate=None, interval=30)
    shape = watch.shape("KEY")
    assert (shape.size, shape.spacing, shape.budget) == (50, 30, None)
    seen = run_for(watch, clock, 95)
    assert [len(ids) for _, ids in seen] == [50, 50, 50, 50]
    assert [t - seen[0][0] for t, _ in seen] == [0, 30, 60, 90]


def test_a_small_fleet_is_read_no_more_often_than_the_interval() -> None:
    watch, _ = watching(3, interval=60)
    shape = watch.shape("KEY")
    assert (shape.size, shape.slices, shape.spacing) == (3, 1, 60)


def test_round_robin_covers_the_fleet_within_its_period_and_requests_stay_in_budget() -> None:
    watch, clock = watching(100, rate=10.0, budget=20, interval=1)
    shape = watch.shape("KEY")
    start = clock.now
    seen = run_for(watch, clock, 3 * shape.cover)
    # Slices are full (the last of a round tops up with the oldest reads): every chatbot is
    # read in each period's slices, oldest first.
    assert {len(ids) for _, ids in seen} == {shape.size}
    for start_slice in range(len(seen) - shape.slices):
        window = {c for _, ids in seen[start_slice : start_slice + shape.slices] for c in ids}
        assert window == set(fleet(100))
    # Within any window of the limit's 10 s, the watch's requests stay within 20 % of 100.
    sent = [(t, 1 + len(ids)) for t, ids in seen]
    for t, _ in sent:
        assert sum(n for u, n in sent if t <= u < t + 10) <= 20
    # No chatbot waits longer than the period between two reads.
    last: dict[str, float] = {}
    for t, ids in seen:
        for c in ids:
            assert t - last.get(c, start) <= shape.cover + 1e-9
            last[c] = t


def test_a_chatbot_read_by_an_apply_waits_its_turn_and_new_ones_are_read_first() -> None:
    watch, clock = watching(40, rate=10.0, interval=1)
    first = watch.take().chatbots
    assert first == tuple(fleet(19))
    watch.done(watch.take())
    clock.now += watch.shape("KEY").spacing
    watch.read(["bot-019", "bot-020"])  # an apply read these
    assert watch.take().chatbots == tuple(fleet(40)[21:40])
    watch.done(watch.take())
    watch.read(fleet(19))  # all but the one new chatbot read, once more
    watch.fleet({"KEY": [*fleet(40), "a-new-one", "z-new-one"]})
    clock.now += watch.shape("KEY").spacing
    assert watch.take().chatbots[:2] == ("a-new-one", "z-new-one")


def test_the_oldest_read_and_its_age() -> None:
    watch, clock = watching(4, interval=60)
    assert watch.oldest() == ("bot-000", 0.0)
    clock.now += 5
    assert watch.oldest() == ("bot-000", 5.0)  # never read: since the watch started
    watch.read(fleet(4))
    clock.now += 7
    watch.read(["bot-000", "bot-001", "bot-003"])
    clock.now += 2
    assert watch.oldest() == ("bot-002", 9.0)
    doc = watch.to_document()
    assert (doc["oldestRead"], doc["oldestReadSeconds"], doc["budgetPercent"]) == (
        "bot-002",
        9.0,
        20.0,
    )
    assert doc["keys"][0]["limitFrom"] == "rate-limit"


def test_a_preempted_slice_is_read_next() -> None:
    watch, clock = watching(40, rate=10.0, interval=1)
    taken = watch.take()
    # Preempted: never done. Still due, the same chatbots.
    due = watch.due_at()
    assert due is not None
    assert due <= clock.now
    assert watch.take() == taken


def test_an_announced_window_is_learned_and_the_operators_limit_wins() -> None:
    clock = Clock()
    watch = Watch(clock=clock)
    watch.fleet({"A": fleet(10, "a"), "B": fleet(10, "b")})
    watch.announced("A", 100, 4.0)
    # 100 per 4 s as far as seen: a window seen can only be shorter than the real one, so
    # the rate it gives counts at 80 %.
    assert watch.keys["A"].rate == 25.0 * LEARNED_SHARE == 20.0
    watch.announced("A", 100, 10.0)
    watch.announced("A", 100, 2.0)
    assert (watch.keys["A"].rate, watch.keys["A"].source) == (8.0, "announced")
    watch.limit("B", 5.0, "rate-limit")
    watch.announced("B", 100, 10.0)
    assert (watch.keys["B"].rate, watch.keys["B"].source) == (5.0, "rate-limit")


def test_what_a_chatbot_costs_is_learned_from_the_slices() -> None:
    watch, _ = watching(100, rate=10.0, interval=1)
    taken = watch.take()
    watch.done(taken, {"KEY": 1 + 3 * len(taken.chatbots)})  # three reads each
    assert watch.keys["KEY"].per_chatbot == pytest.approx(2.0)
    assert watch.shape("KEY").size == 9  # (20 - 1) // 2


def test_a_limit_learned_after_a_whole_read_counts_at_once() -> None:
    watch, clock = watching(60, rate=None, interval=60)
    watch.restart()  # the first sync read everything, before any window was announced
    assert watch.due_at() == clock.now + 60
    watch.announced("KEY", 10, 0.8)  # learned from that sync's answers: 10/s, 2/s for it
    assert watch.due_at() == clock.now + watch.shape("KEY").spacing == clock.now + 15
