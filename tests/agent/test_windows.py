"""Sync windows (``agent.windows``): the grammar, its located errors, and when a window holds:
days, ranges that wrap, midnight crossed, daylight saving time in both directions, windows
that follow one another."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from botctl.agent.windows import WindowError, describe, held, parse_window


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def until(spec: str | list[str], now: str) -> datetime | str | None:
    """When the windows of ``spec`` let applying resume, for ``now``; "open" when none holds."""
    specs = [spec] if isinstance(spec, str) else spec
    found = held([parse_window(s) for s in specs], at(now))
    return "open" if found is None else found.until


@pytest.mark.parametrize(
    ("text", "days", "start", "end", "shown"),
    [
        ("Sat-Sun 00:00-24:00 Europe/Berlin", {5, 6}, 0, 1440, "Sat-Sun 00:00-24:00 Europe/Berlin"),
        ("mon,WED,friday 9:00-17:30", {0, 2, 4}, 540, 1050, "mon,WED,friday 9:00-17:30 UTC"),
        ("Fri-Mon 22:00-06:00 UTC", {4, 5, 6, 0}, 1320, 360, "Fri-Mon 22:00-06:00 UTC"),
        ("Mon-Wed,Sat  12:00-13:00   Asia/Tokyo", {0, 1, 2, 5}, 720, 780, None),
        ("* 00:00-01:00 utc", set(range(7)), 0, 60, "* 00:00-01:00 utc"),
    ],
)
def test_a_window_is_read(
    text: str, days: set[int], start: int, end: int, shown: str | None
) -> None:
    window = parse_window(text)
    assert (set(window.days), window.start, window.end) == (days, start, end)
    assert window.text == (shown or " ".join(text.split()))


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "give DAYS HH:MM-HH:MM [ZONE]"),
        ("Sat-Sun", "found 1 part(s)"),
        ("Sat 00:00-01:00 Europe/Berlin extra", "found 4 part(s)"),
        ("Sat-Sum 00:00-24:00 Europe/Berlin", "column 5: 'Sum' is not a day"),
        ("Sat,,Sun 00:00-24:00", "column 5: an empty day"),
        ("Mon,Tue,Xyz 00:00-24:00", "column 9: 'Xyz' is not a day"),
        ("Sat 25:00-26:00", "column 5: '25:00' is not a time"),
        ("Sat 10:00-10:61", "column 11: '10:61' is not a time (HH:MM, 00:00 to 24:00)"),
        ("Sat 24:00-01:00", "column 5: '24:00' is not a time (HH:MM, 00:00 to 23:59)"),
        ("Sat 10:00", "column 5: '10:00' is not a span of time"),
        ("Sat 10:00-10:00", "column 5: '10:00-10:00' is empty"),
        ("Sat 9am-5pm", "column 5: '9am' is not a time"),
        ("Sat 00:00-24:00 Europe/Berln", "column 17: 'Europe/Berln' is not an IANA time zone"),
        ("Sat 00:00-24:00 ../../etc/passwd", "column 17: '../../etc/passwd' is not an IANA"),
    ],
)
def test_a_bad_window_is_a_located_error(text: str, said: str) -> None:
    with pytest.raises(WindowError) as raised:
        parse_window(text)
    assert said in str(raised.value)


def test_days_and_hours_of_a_plain_window() -> None:
    spec = "Mon-Fri 09:00-17:00 UTC"
    assert until(spec, "2025-06-02T09:00:00+00:00") == at("2025-06-02T17:00:00+00:00")  # Monday
    assert until(spec, "2025-06-02T16:59:59+00:00") == at("2025-06-02T17:00:00+00:00")
    assert until(spec, "2025-06-02T17:00:00+00:00") == "open"  # the end is not inside
    assert until(spec, "2025-06-02T08:59:59+00:00") == "open"
    assert until(spec, "2025-06-07T12:00:00+00:00") == "open"  # Saturday


def test_a_window_that_crosses_midnight_belongs_to_the_day_it_starts() -> None:
    spec = "Fri 22:00-06:00 Europe/Berlin"  # summer: UTC+2
    assert until(spec, "2025-06-06T20:00:00+00:00") == at("2025-06-07T04:00:00+00:00")  # Fri 22:00
    assert until(spec, "2025-06-07T03:00:00+00:00") == at("2025-06-07T04:00:00+00:00")  # Sat 05:00
    assert until(spec, "2025-06-07T04:00:00+00:00") == "open"  # Sat 06:00
    assert until(spec, "2025-06-06T19:59:00+00:00") == "open"  # Fri 21:59
    # Saturday 23:00 is no window: it starts on Fridays only.
    assert until(spec, "2025-06-07T21:00:00+00:00") == "open"
    # Thursday night neither.
    assert until(spec, "2025-06-05T22:00:00+00:00") == "open"


def test_a_range_of_days_wraps_past_sunday() -> None:
    spec = "Fri-Mon 12:00-13:00 UTC"
    for day in ("2025-06-06", "2025-06-07", "2025-06-08", "2025-06-09"):
        assert until(spec, f"{day}T12:30:00+00:00") == at(f"{day}T13:00:00+00:00")
    for day in ("2025-06-10", "2025-06-11", "2025-06-12"):
        assert until(spec, f"{day}T12:30:00+00:00") == "open"


def test_windows_that_follow_one_another_hold_until_the_gap() -> None:
    # The weekend: Saturday 00:00 to Monday 00:00 Berlin time, one hold.
    weekend = "Sat-Sun 00:00-24:00 Europe/Berlin"
    assert until(weekend, "2025-06-07T10:00:00+00:00") == at("2025-06-08T22:00:00+00:00")
    # Two windows in two zones that overlap: the later end counts.
    both = ["Mon 09:00-12:00 UTC", "Mon 12:00-14:00 Europe/London"]  # 11:00-13:00 UTC
    assert until(both, "2025-06-02T09:30:00+00:00") == at("2025-06-02T13:00:00+00:00")
    assert until(both[:1], "2025-06-02T09:30:00+00:00") == at("2025-06-02T12:00:00+00:00")
    # Every hour of every day: no end within a week, said as such.
    always = held([parse_window("* 00:00-24:00 UTC")], at("2025-06-02T00:00:00+00:00"))
    assert always is not None
    assert always.until is None
    assert describe(always) == "deny window '* 00:00-24:00 UTC' until no end within a week"


def test_a_whole_day_follows_daylight_saving_time() -> None:
    spec = "Sun 00:00-24:00 Europe/Berlin"
    # 30 March 2025: clocks go forward at 02:00 (CET, UTC+1, to CEST, UTC+2): 23 hours.
    begins, ends = at("2025-03-29T23:00:00+00:00"), at("2025-03-30T22:00:00+00:00")
    assert until(spec, "2025-03-29T22:59:59+00:00") == "open"
    assert until(spec, begins.isoformat()) == ends
    assert ends - begins == timedelta(hours=23)
    # 26 October 2025: clocks go back at 03:00: 25 hours.
    begins, ends = at("2025-10-25T22:00:00+00:00"), at("2025-10-26T23:00:00+00:00")
    assert until(spec, begins.isoformat()) == ends
    assert until(spec, "2025-10-26T22:59:59+00:00") == ends
    assert ends - begins == timedelta(hours=25)


def test_a_time_in_the_skipped_hour_is_read_as_before_the_change() -> None:
    # 02:30 does not exist on 30 March 2025 in Berlin: it is read at UTC+1 (01:30 UTC, which
    # the clocks show as 03:30); the end, 04:00 CEST, is 02:00 UTC.
    spec = "Sun 02:30-04:00 Europe/Berlin"
    assert until(spec, "2025-03-30T01:29:59+00:00") == "open"
    assert until(spec, "2025-03-30T01:30:00+00:00") == at("2025-03-30T02:00:00+00:00")


def test_the_repeated_hour_is_held_both_times() -> None:
    # On 26 October 2025 Berlin's clocks show 02:00-03:00 twice (00:00-01:00 UTC in summer
    # time, 01:00-02:00 UTC in winter time): the window starts at the first and ends at 03:00
    # winter time, so both are inside.
    spec = "Sun 02:00-03:00 Europe/Berlin"
    assert until(spec, "2025-10-25T23:59:59+00:00") == "open"
    for instant in (
        "2025-10-26T00:00:00+00:00",
        "2025-10-26T00:30:00+00:00",
        "2025-10-26T01:30:00+00:00",
    ):
        assert until(spec, instant) == at("2025-10-26T02:00:00+00:00")
    assert until(spec, "2025-10-26T02:00:00+00:00") == "open"


def test_the_zone_of_the_window_not_of_the_clock_decides_the_day() -> None:
    # Monday 08:00 in Tokyo is Sunday 23:00 UTC.
    spec = "Mon 08:00-09:00 Asia/Tokyo"
    assert until(spec, "2025-06-01T23:30:00+00:00") == at("2025-06-02T00:00:00+00:00")
    assert until("Mon 08:00-09:00 UTC", "2025-06-01T23:30:00+00:00") == "open"


@given(
    start=st.integers(0, 1439),
    length=st.integers(1, 1439),
    day=st.integers(0, 6),
    offset=st.integers(0, 3 * 1440),
)
def test_a_utc_window_holds_exactly_its_minutes(
    start: int, length: int, day: int, offset: int
) -> None:
    """In UTC, where no clock moves, a window holds an instant iff the instant is less than
    its length past one of its starts (the start day's, or the day before's)."""
    end = (start + length) % 1440 or 1440
    names = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
    spec = f"{names[day]} {start // 60:02d}:{start % 60:02d}-{end // 60:02d}:{end % 60:02d} UTC"
    monday = datetime(2025, 6, 2, tzinfo=UTC)  # a Monday
    now = monday + timedelta(minutes=offset)
    starts = [monday + timedelta(days=day + 7 * k, minutes=start) for k in (-1, 0, 1)]
    inside = [s for s in starts if s <= now < s + timedelta(minutes=length)]
    found = held([parse_window(spec)], now)
    if inside:
        assert found is not None
        assert found.until == inside[0] + timedelta(minutes=length)
    else:
        assert found is None
