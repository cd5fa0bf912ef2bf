"""Whether a cycle may apply now, and why not: the agent suspended (``botctl agent suspend``),
or a deny window holding (``--deny-window``), unless ``botctl agent sync --override-window``
asked for one apply anyway. Plain data and decisions, a clock given; the requests that change
them are ``steering``'s, the state that keeps the suspension ``persist``'s.

A hold stops applying only: drift is still read, statuses and notifications still say what
is out of sync. An override lifts a window for the first decision made after it (the cycle
its sync asked for, or the one in progress if that decides first), never a suspension.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from botctl.agent.windows import DenyWindow, Held, describe, held
from botctl.resources.agentrecord import Suspension

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="seconds")


@dataclass(frozen=True)
class Hold:
    """Why nothing is applied now."""

    kind: Literal["suspended", "window"]
    words: str
    until: datetime | None = None  # a window's end (None: not within a week, or a suspension)

    def to_document(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "words": self.words,
            "until": iso(self.until) if self.until else None,
        }


@dataclass(frozen=True)
class Override:
    reason: str
    by: str | None
    at: str

    def to_document(self) -> dict[str, Any]:
        return {"reason": self.reason, "by": self.by, "at": self.at}


def suspension_words(suspension: Suspension) -> str:
    by = f" by {suspension.by}" if suspension.by else ""
    why = f": {suspension.reason}" if suspension.reason else ""
    return f"suspended{by} since {suspension.since}{why}"


class Controls:
    def __init__(self, windows: tuple[DenyWindow, ...] = (), clock: Clock = utc_now) -> None:
        self.windows = windows
        self.clock = clock
        self.suspended: Suspension | None = None
        self.override: Override | None = None  # asked for, not used yet
        # Whether the suspension was read from the state since this replica took the lease
        # (the replica that held it before may have changed it).
        self.known = False

    def window(self) -> Held | None:
        """The deny window holding now, and its end."""
        return held(self.windows, self.clock()) if self.windows else None

    def hold(self) -> Hold | None:
        """What holds applying now, a pending override not counted."""
        if self.suspended is not None:
            return Hold("suspended", suspension_words(self.suspended))
        found = self.window()
        if found is not None:
            return Hold("window", describe(found), found.until)
        return None

    def decide(self) -> tuple[Hold | None, Override | None]:
        """For a cycle that may apply: what holds it (None: it applies), and the override
        used to lift a window, if one was. A pending override is spent by this decision
        whatever it finds: the sync it came with has run."""
        hold, override = self.hold(), self.override
        self.override = None
        if hold is not None and hold.kind == "window" and override is not None:
            return None, override
        return hold, None

    def to_document(self) -> dict[str, Any]:
        """``/status``'s view: the suspension, the window holding now, every window, and an
        override not used yet."""
        found = self.window()
        return {
            "suspended": self.suspended.to_json() if self.suspended else None,
            "denyWindow": {
                "window": found.window.text,
                "until": iso(found.until) if found.until else None,
            }
            if found
            else None,
            "denyWindows": [w.text for w in self.windows],
            "windowOverride": self.override.to_document() if self.override else None,
        }
