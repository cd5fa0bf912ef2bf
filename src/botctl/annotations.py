"""GitHub Actions workflow commands (``::error file=F,line=L,col=C::message``), escaped so that
no text inside one can become a command of its own.

The runner reads a step's output line by line (a CR ends a line too) and takes a line whose
first non-blank characters are ``::`` as a command: ``::name key=value,key=value::data``. It
splits the properties at ``,`` and ends them at the first ``::``, then unescapes ``%0D``,
``%0A``, ``%3A``, ``%2C`` and ``%25`` in properties and ``%0D``, ``%0A`` and ``%25`` in the
data. So escaping ``%``, CR and LF everywhere, and ``:`` and ``,`` in properties, keeps every
command on its one line with its own properties (the rules of actions/toolkit's ``command.ts``).
Beyond GitHub's rules, for a log a person reads: other control characters (terminal escapes)
are shown as ``\\xNN``, and the legacy ``##[`` and Azure Pipelines' ``##vso[`` prefixes, which
runners look for anywhere in a line, lose their ``[``.

A block of plain text (a rendered plan, text from the service) goes between
``::stop-commands::TOKEN`` and ``::TOKEN::``: the runner ignores every command in between. The
token is a hash of the block, which no text can contain without containing its own hash.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from botctl.errors import BotctlError, ConfigError
from botctl.values import controls_shown

_LEGACY_PREFIX = re.compile(r"##(vso)?\[", re.IGNORECASE)
# file:line:col: [warning: ]message -- errors.Problem's own format, for warnings that reach a
# renderer already formatted (Plan.warnings).
_LOCATED = re.compile(
    r"(?P<file>[^\r\n]+?):(?P<line>\d+):(?P<col>\d+): (?:warning: )?(?P<message>.*)", re.DOTALL
)


def visible(text: str) -> str:
    """Control characters shown as ``\\xNN``; ``##[`` and ``##vso[`` without their ``[``."""
    return _LEGACY_PREFIX.sub(lambda m: m.group()[:-1] + "%5B", controls_shown(text))


# botctl's own colour (render.text.Style): the one escape sequence plain text may keep.
_COLOUR = re.compile(r"(\x1b\[[0-9;]*m)")


def inert(text: str, *, colour: bool = False) -> str:
    """Plain text for a terminal or any CI log, whatever it holds: ``visible`` (control
    characters as ``\\xNN``, so no terminal escape sequence; ``##[``/``##vso[`` defanged),
    and a line whose first non-blank characters are ``::`` (GitHub's runner takes it for a
    workflow command) starting ``%3A:`` instead. ``colour``: botctl's own colour codes are
    kept, and only those."""
    if colour:
        text = "".join(
            part if _COLOUR.fullmatch(part) else visible(part) for part in _COLOUR.split(text)
        )
    else:
        text = visible(text)
    return "\n".join(_not_a_command(line) for line in text.split("\n"))


def _not_a_command(line: str) -> str:
    body = _COLOUR.sub("", line).lstrip()  # the runner trims the line before it looks
    if not body.startswith("::"):
        return line
    at = line.index("::", len(line) - len(line.lstrip()))
    return line[:at] + "%3A" + line[at + 1 :]


def escape_data(text: str) -> str:
    """The message of a command: one line, whatever ``text`` holds."""
    return visible(text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))


def escape_property(text: str) -> str:
    """A property value: additionally never ends the properties (``:``) or one of them (``,``)."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, message: str = "", **properties: str | int | None) -> str:
    """One workflow command line, e.g. ``command("error", msg, file=f, line=3, col=5)``."""
    props = ",".join(
        f"{key}={escape_property(str(value))}"
        for key, value in properties.items()
        if value is not None and value != ""
    )
    return f"::{name}{' ' + props if props else ''}::{escape_data(message)}"


def annotation(
    level: str,
    message: str,
    *,
    title: str,
    file: str | None = None,
    line: int | None = None,
    col: int | None = None,
) -> str:
    """An ``error``/``warning``/``notice`` annotation; with ``file`` (relative to the
    repository), GitHub shows it on that line of the pull request's diff."""
    return command(level, message, file=file, line=line, col=col, title=title)


def located_annotation(level: str, text: str, *, title: str) -> str:
    """An annotation from a problem already formatted as ``file:line:col: message`` (as the
    loader hands warnings on): the place becomes the annotation's, the rest its message."""
    match = _LOCATED.fullmatch(text)
    if match is None:
        return annotation(level, text, title=title)
    return annotation(
        level,
        match["message"],
        title=title,
        file=match["file"],
        line=int(match["line"]),
        col=int(match["col"]),
    )


def inert_block(lines: Iterable[str]) -> list[str]:
    """Plain text lines that the runner shows and never executes (control characters shown
    as ``\\xNN`` as in every command)."""
    body = [visible(line) for line in lines]
    token = "botctl-" + hashlib.sha256("\n".join(body).encode()).hexdigest()[:40]
    return [f"::stop-commands::{token}", *body, f"::{token}::"]


def error_annotations(exc: BotctlError, *, title: str) -> list[str]:
    """An expected failure: each configuration problem on its file, line and column, then
    the count; any other failure as one error."""
    if not isinstance(exc, ConfigError):
        return [annotation("error", str(exc), title=title)]
    lines = [
        annotation(p.severity, p.message, title=title, file=p.file, line=p.line, col=p.col)
        for p in exc.problems
    ]
    errors = sum(p.severity == "error" for p in exc.problems)
    summary = f"{errors} error(s) in the configuration; nothing was sent."
    return [*lines, annotation("error", summary, title=title)]


@dataclass(frozen=True)
class Command:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    data: str = ""


def parse_command(line: str) -> Command | None:
    """A line as the runner reads it (actions/runner ``ActionCommand.TryParseV2``): the
    command it would run, unescaped, or None for a plain line. Reading back what botctl
    printed, and checking that nothing else in it is a command."""
    line = line.lstrip()
    if not line.startswith("::"):
        return None
    end = line.find("::", 2)
    if end < 0:
        return None
    info, data = line[2:end], line[end + 2 :]
    name, _, props = info.partition(" ")
    properties = {}
    for pair in props.strip().split(","):
        key, sep, value = pair.partition("=")
        if sep and key and value:
            properties[key] = _unescape(value, _PROPERTY_ESCAPES)
    return Command(name, properties, _unescape(data, _DATA_ESCAPES))


_DATA_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%25", "%"))
_PROPERTY_ESCAPES = (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%"))


def _unescape(text: str, escapes: tuple[tuple[str, str], ...]) -> str:
    for escaped, char in escapes:  # in the runner's order
        text = text.replace(escaped, char)
    return text
