"""Markdown building blocks for plan and drift comments: text that shows exactly as written
and cannot open a block of its own, code fences no content can close, and a character budget
(a GitHub comment holds 65,536 characters; a longer one is refused, not truncated)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from botctl.values import controls_shown

# What can start inline Markdown (emphasis, code, links, images, HTML, entities, strikethrough,
# table cells) or reach people (@mentions, #references); block syntax cannot start mid-line.
_ACTIVE = re.compile(r"([\\`*_\[\]<>&|~!@#])")
_BACKTICKS = re.compile(r"`+")


def text(value: str) -> str:
    """Inline text (never at the start of a line) shown as written: CommonMark lets a
    backslash escape any ASCII punctuation, so no link, HTML, emphasis, mention or table cell
    border can start inside it; control characters (bidirectional ones too) as ``\\xNN``."""
    return _ACTIVE.sub(r"\\\1", controls_shown(" ".join(value.splitlines())))


def code(value: str) -> str:
    """A code span, safe in a table cell: delimited by more backticks than any run inside it,
    with ``|`` escaped (GitHub splits table cells at ``|`` even inside code spans), control
    characters (bidirectional ones too) as ``\\xNN``."""
    value = controls_shown(" ".join(value.splitlines())).replace("|", "\\|")
    ticks = "`" * (max((len(run) for run in _BACKTICKS.findall(value)), default=0) + 1)
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{ticks}{pad}{value}{pad}{ticks}"


def fence(lines: Sequence[str], info: str = "") -> tuple[str, str]:
    """Opening and closing fence for a code block holding ``lines``: longer than any run of
    backticks in them, so no line can close the block early."""
    longest = max((len(run) for line in lines for run in _BACKTICKS.findall(line)), default=0)
    ticks = "`" * max(3, longest + 1)
    return ticks + info, ticks


@dataclass(frozen=True)
class Row:
    """Lines added whole or not at all; ``counts`` is what leaving them out leaves out, e.g.
    ``{"change": 1}``."""

    lines: tuple[str, ...]
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class Budget:
    """A document's lines under a limit in characters (None: no limit).

    Sections are added in order of importance; each keeps room for its closing lines and a
    "... N more" note, so a document cut short is still well-formed and says what it left
    out. ``TAIL`` characters always stay free for the document's last note."""

    limit: int | None
    lines: list[str] = field(default_factory=list)
    size: int = 0
    left_out: Counter[str] = field(default_factory=Counter)

    TAIL = 200

    def fits(self, lines: Sequence[str], reserve: int = 0) -> bool:
        if self.limit is None:
            return True
        return self.size + _size(lines) + reserve + self.TAIL <= self.limit

    def add(self, *lines: str) -> None:
        self.lines.extend(lines)
        self.size += _size(lines)

    def section(
        self,
        opener: Sequence[str],
        rows: Sequence[Row],
        closer: Sequence[str],
        note: str,
        *,
        counted: bool = True,
    ) -> None:
        """``opener``, as many ``rows`` as fit, a note naming what was left out (``note``
        formatted with ``more``, e.g. "... {more}"), ``closer``. A section that cannot open
        is left out whole; ``counted``: its rows are named in the document's last note (not
        for a section that only repeats, in detail, what an earlier one listed)."""
        room = len(note) + 200  # the note with its counts filled in
        if not rows:
            return
        if not self.fits([*opener, *closer], room):
            for row in rows:
                if counted:
                    self.left_out.update(row.counts)
            return
        self.add(*opener)
        missing: Counter[str] = Counter()
        cut = False
        for row in rows:
            # Once a row does not fit, none after it is shown: what is left out is one run.
            cut = cut or not self.fits([*row.lines, *closer], room)
            if cut:
                missing.update(row.counts)
            else:
                self.add(*row.lines)
        if missing:
            self.add(note.format(more=more(missing)))
        self.add(*closer)

    def tail(self, note: str) -> None:
        """The last line: what whole sections were left out, if any."""
        if self.left_out:
            self.add("", note.format(more=more(self.left_out)))

    def render(self) -> str:
        return "\n".join(self.lines) + "\n"


def more(counts: Counter[str]) -> str:
    """``Counter({"change": 3, "unmanaged attribute": 1})`` -> "3 more changes, 1 more
    unmanaged attribute"."""
    return ", ".join(
        f"{n} more {noun}{'' if n == 1 else 's'}" for noun, n in counts.items() if n > 0
    )


def _size(lines: Sequence[str]) -> int:
    return sum(len(line) + 1 for line in lines)
