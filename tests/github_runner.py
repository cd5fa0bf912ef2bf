"""What a CI runner would execute when it reads botctl's output: an oracle for the tests,
written from actions/runner (``ActionCommand.TryParseV2``/``TryParse`` and the command
manager's stop-commands handling) and Azure Pipelines' ``##vso[`` logging commands, and kept
independent of ``botctl.annotations`` on purpose: a test must not check the escaping with the
code under test.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# .NET's line reader ends a line at CR, LF or CR LF.
_LINES = re.compile(r"\r\n|\r|\n")
_VSO = re.compile(r"##vso\[", re.IGNORECASE)


@dataclass(frozen=True)
class Executed:
    name: str
    properties: dict[str, str] = field(default_factory=dict)
    data: str = ""


def _unescape(text: str, pairs: list[tuple[str, str]]) -> str:
    for escaped, char in pairs:
        text = text.replace(escaped, char)
    return text


_DATA = [("%0D", "\r"), ("%0A", "\n"), ("%25", "%")]
_PROPERTY = [("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")]
_LEGACY = [("%3B", ";"), ("%0D", "\r"), ("%0A", "\n"), ("%5D", "]"), ("%25", "%")]


def _v2(line: str) -> Executed | None:
    line = line.lstrip()
    if not line.startswith("::"):
        return None
    end = line.find("::", 2)
    if end < 0:
        return None
    info = line[2:end]
    name, _, rest = info.partition(" ")
    if not name:
        return None
    props = {}
    for pair in rest.strip().split(","):
        parts = [p for p in pair.split("=", 1) if p]
        if len(parts) == 2:
            props[parts[0]] = _unescape(parts[1], _PROPERTY)
    return Executed(name, props, _unescape(line[end + 2 :], _DATA))


def _legacy(line: str) -> Executed | None:
    start = line.find("##[")
    if start < 0:
        return None
    close = line.find("]", start)
    if close < 0:
        return None
    info = line[start + 3 : close]
    name = info.split(" ", 1)[0]
    return Executed(name, {}, _unescape(line[close + 1 :], _LEGACY)) if name else None


def executed(output: str) -> list[Executed]:
    """Every command the runner would act on, in order; ``##vso[`` lines as ``vso``."""
    commands: list[Executed] = []
    stop_token: str | None = None
    for line in _LINES.split(output):
        if _VSO.search(line):
            commands.append(Executed("vso", {}, line))
        parsed = _v2(line)
        if stop_token is not None:
            if parsed is not None and parsed.name == stop_token:
                stop_token = None
            continue
        if parsed is None:
            parsed = _legacy(line)
        if parsed is None:
            continue
        commands.append(parsed)
        if parsed.name == "stop-commands":
            stop_token = parsed.data
    return commands


def names(output: str) -> list[str]:
    return [c.name for c in executed(output)]
