"""The pacer under the service's limit, on virtual clocks: spreading requests over the window
the service announces, and learning a pace from 429s when it announces none."""

from __future__ import annotations

import asyncio

import pytest

from botctl.service.pacing import Pacer
from tests.service.test_client import FakeTime


def waits(pacer: Pacer, count: int) -> list[float]:
    """What each of ``count`` concurrent requests waits for its turn (on a frozen clock)."""

    async def main() -> list[float]:
        return list(await asyncio.gather(*[pacer.acquire() for _ in range(count)]))

    return sorted(asyncio.run(main()))


def test_an_announced_window_is_spread_evenly() -> None:
    time = FakeTime(advance=False)
    pacer = Pacer(0.0, time.clock, time.sleep)
    pacer.announced(remaining=50, reset_in=10.0)  # 50 left for 10 s: one every 0.2 s
    assert pacer.interval == pytest.approx(0.2)
    assert waits(pacer, 4) == pytest.approx([0.0, 0.2, 0.4, 0.6])


def test_turns_reserved_at_a_slow_pace_are_given_up_when_the_window_speeds_up() -> None:
    time = FakeTime(advance=False)
    pacer = Pacer(0.0, time.clock, time.sleep)
    pacer.announced(remaining=1, reset_in=2.0)  # one left for 2 s: slow

    async def main() -> list[float]:
        waiters = [asyncio.create_task(pacer.acquire()) for _ in range(4)]
        await asyncio.sleep(0)  # each has reserved its turn: now, 2 s, 4 s, 6 s
        pacer.announced(remaining=9, reset_in=0.9)  # refilled: one every 0.1 s
        return list(await asyncio.gather(*waiters))

    waited = sorted(asyncio.run(main()))
    assert waited[0] == 0.0
    assert waited[-1] < 0.5  # not the 6 s the slow pace reserved


def test_an_exhausted_window_holds_everyone_until_its_reset() -> None:
    time = FakeTime()
    pacer = Pacer(0.0, time.clock, time.sleep)
    reset = time.now + 3.0
    pacer.announced(remaining=0, reset_in=3.0)

    async def one() -> float:
        await pacer.acquire()
        return time.now

    async def main() -> list[float]:
        return list(await asyncio.gather(one(), one()))

    assert all(started >= reset for started in asyncio.run(main()))


def test_the_users_rate_limit_is_a_floor_the_window_never_lifts() -> None:
    time = FakeTime()
    pacer = Pacer(2.0, time.clock, time.sleep)
    pacer.announced(remaining=100, reset_in=1.0)
    assert pacer.interval == pytest.approx(0.5)


def test_without_a_window_a_429_sets_the_pace_the_service_let_through() -> None:
    time = FakeTime()
    pacer = Pacer(0.0, time.clock, time.sleep)
    for _ in range(10):  # ten let through within the last second
        asyncio.run(pacer.acquire())
        time.now += 0.05
    refused_at = time.now
    pacer.refused(announced=False, sent_at=refused_at, retry_after=1.0)
    assert pacer.interval == pytest.approx(0.1 * 1.1)  # 10 per second, with a margin
    # The other requests already sent at the old pace say nothing new.
    pacer.refused(announced=False, sent_at=refused_at - 0.01, retry_after=1.0)
    assert pacer.interval == pytest.approx(0.11)
    # Refused again at the learned pace: slower still.
    for _ in range(5):
        time.now += 0.2
        asyncio.run(pacer.acquire())
    pacer.refused(announced=False, sent_at=time.now, retry_after=1.0)
    slowed = pacer.interval
    assert slowed >= 0.11 * 1.5
    for _ in range(50):  # successes speed it up again, slowly near the pace refused
        pacer.succeeded()
    assert 0.9 * slowed < pacer.interval < slowed


def test_a_lone_refusal_is_waited_out_without_slowing_the_run() -> None:
    time = FakeTime()
    pacer = Pacer(0.0, time.clock, time.sleep)
    asyncio.run(pacer.acquire())
    pacer.refused(announced=False, sent_at=time.now, retry_after=30.0)
    assert pacer.interval == 0.0


def test_an_announced_window_overrides_what_429s_taught() -> None:
    time = FakeTime()
    pacer = Pacer(0.0, time.clock, time.sleep)
    for _ in range(4):
        asyncio.run(pacer.acquire())
        time.now += 0.1
    pacer.refused(announced=False, sent_at=time.now, retry_after=2.0)
    assert pacer.interval == pytest.approx(0.5 * 1.1)  # 4 let through in 2 s
    pacer.announced(remaining=10, reset_in=1.0)
    assert pacer.interval == pytest.approx(0.1)
    pacer.refused(announced=True, sent_at=time.now + 1, retry_after=1.0)  # its window says
    assert pacer.interval == pytest.approx(0.1)
