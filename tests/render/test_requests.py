"""What a plan says of the requests it sends and how long they take: counted per API key,
unknown where the contacts were not counted, timed only at a known pace."""

from __future__ import annotations

import pytest

from botctl.plan import BotRef, Operation, Plan
from botctl.render.text import PACED_FROM, duration, pace_line, requests_phrase

A = BotRef("a", "bot-a", "KEY_A")
B = BotRef("b", "bot-b", "KEY_B")


def op(bot: BotRef, subject: str, reads: int | None = 0, updates: int | None = 0) -> Operation:
    return Operation(
        bot, "update_attribute", subject, {}, {}, contact_reads=reads, contact_updates=updates
    )


def test_the_slowest_key_sets_the_time() -> None:
    plan = Plan(
        operations=(
            op(A, "x", reads=2, updates=40),
            op(B, "y"),
            op(B, "z"),
        ),
        rate_limit=4,
    )
    requests = plan.requests()
    assert (requests.total, requests.writes) == (45, 3)
    assert requests.per_key == {"KEY_A": 43, "KEY_B": 2}
    assert requests.seconds == 43 / 4
    assert pace_line(plan) == "Time at --rate-limit 4/s per API key: about 11 s."
    assert requests_phrase(requests) == (
        "45 request(s) to send: 40 contact update(s) at most, 2 contact read(s)"
    )


def test_uncounted_contacts_make_the_total_and_the_time_unknown() -> None:
    plan = Plan(operations=(op(A, "x", reads=None, updates=None),), rate_limit=9)
    assert plan.requests().total is None
    assert plan.requests().seconds is None
    assert plan.requests().to_document()["seconds"] is None
    assert "not known" in (pace_line(plan) or "")
    assert "not counted" in requests_phrase(plan.requests())


def test_without_a_pace_time_is_named_unknown_only_when_it_matters() -> None:
    small = Plan(operations=tuple(op(A, str(i)) for i in range(PACED_FROM)))
    assert pace_line(small) is None
    large = Plan(operations=tuple(op(A, str(i)) for i in range(PACED_FROM + 1)))
    assert (pace_line(large) or "").startswith("Time: not estimated: no rate limit is known")
    moving = Plan(operations=(op(A, "x", reads=1, updates=3),))
    assert pace_line(moving) is not None
    assert Plan().requests().seconds is None  # no pace: never a guess
    assert Plan(rate_limit=5).requests().seconds == 0.0


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.42, "0.4 s"), (50.4, "50 s"), (126, "2 min 6 s"), (7530, "2 h 5 min")],
)
def test_duration(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown
