"""Sync windows: when the agent applies nothing (``--deny-window``). Pure: text in, a window
out; a window and an instant in, whether it holds and until when.

A window is ``DAYS START-END [ZONE]``:

- ``DAYS``: a day (``Mon`` ... ``Sun``, or the whole English name), a range (``Mon-Fri``;
  ``Fri-Mon`` wraps past Sunday), a comma-separated list of either (``Sat,Sun``,
  ``Mon-Wed,Fri``), or ``*`` for every day;
- ``START-END``: ``HH:MM-HH:MM``, the end up to ``24:00`` (the next midnight). An end at or
  before the start crosses midnight: ``Fri 22:00-06:00`` is Friday 22:00 to Saturday 06:00
  (the days name the day a window starts);
- ``ZONE``: an IANA time zone (``Europe/Berlin``), read through ``zoneinfo``; UTC when left
  out.

Times are wall-clock times of the zone, so a window follows daylight saving time:
``00:00-24:00`` lasts 23 hours on the day clocks go forward. A time that does not exist that
day (in the hour skipped) is read as the same time before the change (``02:30`` is then
``03:30`` summer time); a time that happens twice (the hour repeated) is its first occurrence.
Every comparison is made in UTC: two aware datetimes of one zone would otherwise compare by
their wall-clock times.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

_FULL_NAMES = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_TIME = re.compile(r"(\d{1,2}):(\d{2})")
_WEEK = timedelta(days=7)
EXAMPLE = "Sat-Sun 00:00-24:00 Europe/Berlin"
FORMAT = "DAYS HH:MM-HH:MM [ZONE]"


class WindowError(ValueError):
    """A window's text that cannot be read: the message names the column and the part."""


@dataclass(frozen=True)
class DenyWindow:
    text: str  # as given, spaces normalised: how status and logs name it
    days: frozenset[int]  # 0 is Monday
    start: int  # minutes past midnight, 0 to 1439
    end: int  # minutes past midnight, 1 to 1440; at or before ``start``: the next day
    zone: tzinfo
    zone_name: str

    def covering(self, at: datetime) -> datetime | None:
        """When the occurrence of this window that ``at`` falls in ends (UTC); None when
        ``at`` is outside every occurrence."""
        at = at.astimezone(UTC)
        today = at.astimezone(self.zone).date()
        # An occurrence that started yesterday may still run (one crossing midnight).
        for day in (today - timedelta(days=1), today):
            if day.weekday() not in self.days:
                continue
            begins = _instant(day, self.start, self.zone)
            ends = _instant(day, self.end if self.end > self.start else self.end + 1440, self.zone)
            if begins <= at < ends:
                return ends
        return None


@dataclass(frozen=True)
class Held:
    """A window holds: applying waits ``until`` (UTC; None: the windows leave no gap within
    a week)."""

    window: DenyWindow
    until: datetime | None


def _instant(day: date, minutes: int, zone: tzinfo) -> datetime:
    """The wall-clock time ``minutes`` past the midnight starting ``day`` in ``zone``, in
    UTC. The arithmetic is on the wall clock (an aware datetime plus a timedelta keeps its
    zone and moves its wall time); ``fold`` 0 reads a skipped or repeated time as above."""
    local = datetime.combine(day, time(), zone) + timedelta(minutes=minutes)
    return local.astimezone(UTC)


def held(windows: Sequence[DenyWindow], now: datetime) -> Held | None:
    """The window ``now`` falls in, and when applying may resume: the end of that window,
    or of the windows that follow without a gap (``Sat-Sun 00:00-24:00`` holds from Saturday
    00:00 to Monday 00:00)."""
    now = now.astimezone(UTC)
    first = next((w for w in windows if w.covering(now) is not None), None)
    if first is None:
        return None
    until = now
    while until - now <= _WEEK:
        ends = [end for w in windows if (end := w.covering(until)) is not None]
        if not ends:
            return Held(first, until)
        until = max(ends)
    return Held(first, None)


def parse_window(text: str) -> DenyWindow:
    """``text`` as a window; a ``WindowError`` naming the column of what is wrong."""
    tokens = [(m.start() + 1, m.group()) for m in re.finditer(r"\S+", text)]
    if len(tokens) not in (2, 3):
        raise WindowError(
            f"give {FORMAT}, e.g. {EXAMPLE!r} (found {len(tokens)} part(s), not 2 or 3)"
        )
    (days_at, days_text), (times_at, times_text) = tokens[0], tokens[1]
    zone_at, zone_text = tokens[2] if len(tokens) == 3 else (0, "UTC")
    days = _days(days_text, days_at)
    start, end = _times(times_text, times_at)
    zone = _zone(zone_text, zone_at)
    shown = " ".join(t for _, t in tokens) if len(tokens) == 3 else f"{days_text} {times_text} UTC"
    return DenyWindow(shown, days, start, end, zone, zone_text)


def _day(name: str, column: int) -> int:
    lowered = name.lower()
    for number, full in enumerate(_FULL_NAMES):
        if lowered in (full[:3], full):
            return number
    raise WindowError(
        f"column {column}: {name!r} is not a day (Mon, Tue, Wed, Thu, Fri, Sat, Sun; a range "
        "Mon-Fri, a list Sat,Sun, or * for every day)"
    )


def _days(text: str, column: int) -> frozenset[int]:
    if text == "*":
        return frozenset(range(7))
    found: set[int] = set()
    at = column
    for item in text.split(","):
        if not item:
            raise WindowError(f"column {at}: an empty day in {text!r} (a list is Sat,Sun)")
        first, dash, last = item.partition("-")
        begin = _day(first, at)
        if not dash:
            found.add(begin)
        else:
            finish = _day(last, at + len(first) + 1)
            found.update((begin + n) % 7 for n in range((finish - begin) % 7 + 1))
        at += len(item) + 1
    return frozenset(found)


def _minutes(text: str, column: int, *, end: bool) -> int:
    match = _TIME.fullmatch(text)
    hours, minutes = (int(match.group(1)), int(match.group(2))) if match else (99, 99)
    value = hours * 60 + minutes
    if minutes > 59 or value > 1440 or (value == 1440 and not end):
        latest = "24:00" if end else "23:59"
        raise WindowError(f"column {column}: {text!r} is not a time (HH:MM, 00:00 to {latest})")
    return value


def _times(text: str, column: int) -> tuple[int, int]:
    first, dash, last = text.partition("-")
    if not dash:
        raise WindowError(f"column {column}: {text!r} is not a span of time: give HH:MM-HH:MM")
    start = _minutes(first, column, end=False)
    end = _minutes(last, column + len(first) + 1, end=True)
    if start == end:
        raise WindowError(
            f"column {column}: {text!r} is empty: a whole day is 00:00-24:00 (an end before "
            "the start crosses midnight)"
        )
    return start, end


def _zone(name: str, column: int) -> tzinfo:
    if name.upper() == "UTC":
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(
            f"column {column}: {name!r} is not an IANA time zone (as Europe/Berlin, "
            "America/New_York, UTC)"
        ) from None


def describe(found: Held) -> str:
    """In words, for status and logs: the window and when it ends."""
    until = found.until.isoformat(timespec="seconds") if found.until else "no end within a week"
    return f"deny window {found.window.text!r} until {until}"
