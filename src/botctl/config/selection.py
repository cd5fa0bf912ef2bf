"""Which chatbots a run covers, and which chatbots a Defaults document applies to.

- ``--target NAME|GLOB`` (``metadata.name``, shell-style ``*``, ``?``, ``[...]``), repeatable:
  a chatbot is selected when any of them matches.
- ``-l/--selector`` with kubectl's label syntax: requirements separated by commas, all of which
  must hold: ``key=value`` (or ``==``), ``key!=value``, ``key in (a,b)``, ``key notin (a,b)``,
  ``key`` (the label exists), ``!key`` (it does not). As in Kubernetes, ``!=`` and ``notin`` also
  match a chatbot without the label. Repeated ``-l`` add requirements.
- ``--exclude NAME|GLOB``, repeatable: removes the chatbots it matches.

A ``--target`` or ``--exclude`` that matches no chatbot, or a selection that leaves none, is an
error naming the closest names or labels: a typo must not silently widen or empty a run.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from botctl.errors import BotctlError

Operator = Literal["=", "!=", "in", "notin", "exists", "!exists"]

# Kubernetes label keys (an optional DNS prefix and '/') and values, loosely: the service has no
# labels of its own, so botctl only needs to tell a key from an operator.
_KEY = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.\-/]*[A-Za-z0-9])?")
_VALUE = re.compile(r"([A-Za-z0-9]([A-Za-z0-9_.\-]*[A-Za-z0-9])?)?")
_GLOB_CHARS = frozenset("*?[")


class SelectorError(ValueError):
    """A label selector that does not parse; the message says where and what was expected."""


@dataclass(frozen=True)
class Requirement:
    """One label requirement, from ``-l`` or from a Defaults document's selector."""

    key: str
    operator: Operator
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        value = labels.get(self.key)
        if self.operator == "exists":
            return value is not None
        if self.operator == "!exists":
            return value is None
        if self.operator in ("=", "in"):
            return value is not None and value in self.values
        return value is None or value not in self.values  # != and notin

    def __str__(self) -> str:
        values = sorted(self.values)
        if self.operator == "exists":
            return self.key
        if self.operator == "!exists":
            return f"!{self.key}"
        if self.operator in ("=", "!="):
            return f"{self.key}{self.operator}{values[0]}"
        return f"{self.key} {self.operator} ({','.join(values)})"


def matches_all(requirements: Iterable[Requirement], labels: Mapping[str, str]) -> bool:
    return all(r.matches(labels) for r in requirements)


class _Parser:
    """kubectl's selector grammar: ``requirement (',' requirement)*``."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def fail(self, expected: str) -> SelectorError:
        got = repr(self.text[self.pos :]) if self.pos < len(self.text) else "the end"
        return SelectorError(
            f"{self.text!r}: expected {expected} at column {self.pos + 1}, got {got}"
        )

    def skip_spaces(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def take(self, literal: str) -> bool:
        self.skip_spaces()
        if self.text.startswith(literal, self.pos):
            self.pos += len(literal)
            return True
        return False

    def word(self, pattern: re.Pattern[str], what: str, *, empty: bool = False) -> str:
        self.skip_spaces()
        match = pattern.match(self.text, self.pos)
        if match is None or not (match.group() or empty):
            raise self.fail(what)
        self.pos = match.end()
        return match.group()

    def keyword(self) -> str | None:
        """``in`` or ``notin`` as a whole word (a key may start with either)."""
        self.skip_spaces()
        for word in ("notin", "in"):
            end = self.pos + len(word)
            if self.text.startswith(word, self.pos) and (
                end == len(self.text) or not (self.text[end].isalnum() or self.text[end] in "_.-/")
            ):
                self.pos = end
                return word
        return None

    def requirements(self) -> list[Requirement]:
        found = [self.requirement()]
        while self.take(","):
            found.append(self.requirement())
        self.skip_spaces()
        if self.pos != len(self.text):
            raise self.fail("',' or the end")
        return found

    def requirement(self) -> Requirement:
        if self.take("!"):
            return Requirement(self.word(_KEY, "a label key"), "!exists")
        key = self.word(_KEY, "a label key")
        # key= and key!= compare with an empty value, as in kubectl; a list takes no empty one.
        if self.take("!="):
            value = self.word(_VALUE, "a label value", empty=True)
            return Requirement(key, "!=", frozenset([value]))
        if self.take("==") or self.take("="):
            value = self.word(_VALUE, "a label value", empty=True)
            return Requirement(key, "=", frozenset([value]))
        operator = self.keyword()
        if operator is None:
            self.skip_spaces()
            if self.pos == len(self.text) or self.text[self.pos] == ",":
                return Requirement(key, "exists")
            raise self.fail("'=', '==', '!=', 'in', 'notin', ',' or the end")
        if not self.take("("):
            raise self.fail(f"'(' after '{operator}'")
        values = [self.word(_VALUE, "a label value")]
        while self.take(","):
            values.append(self.word(_VALUE, "a label value"))
        if not self.take(")"):
            raise self.fail("',' or ')'")
        return Requirement(key, "in" if operator == "in" else "notin", frozenset(values))


def parse_selector(text: str) -> tuple[Requirement, ...]:
    """kubectl label selector syntax -> requirements; raises SelectorError."""
    if not text.strip():
        raise SelectorError("an empty selector: give requirements such as team=support")
    return tuple(_Parser(text).requirements())


@dataclass(frozen=True)
class Selection:
    targets: tuple[str, ...] = ()  # names or globs; empty: every chatbot
    selector: tuple[Requirement, ...] = ()
    excludes: tuple[str, ...] = ()

    @property
    def everything(self) -> bool:
        return not (self.targets or self.selector or self.excludes)

    def covers(self, name: str, labels: Mapping[str, str]) -> bool:
        """Whether a chatbot of this name and labels is selected; never an error (for the
        configuration at an earlier revision, where a --target may name nothing yet)."""
        return (
            (not self.targets or any(_matches(t, name) for t in self.targets))
            and matches_all(self.selector, labels)
            and not any(_matches(e, name) for e in self.excludes)
        )

    def describe(self) -> str:
        parts = [f"--target {t!r}" for t in self.targets]
        if self.selector:
            parts.append(f"-l {','.join(map(str, self.selector))!r}")
        parts += [f"--exclude {e!r}" for e in self.excludes]
        return " ".join(parts)


def _matches(pattern: str, name: str) -> bool:
    if _GLOB_CHARS.isdisjoint(pattern):
        return pattern == name
    return fnmatch.fnmatchcase(name, pattern)


def _close(word: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=3, cutoff=0.6)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def _unmatched(option: str, patterns: Sequence[str], names: Sequence[str]) -> list[str]:
    problems = []
    for pattern in patterns:
        if not any(_matches(pattern, name) for name in names):
            problems.append(f"{option} {pattern!r} matches no chatbot{_close(pattern, names)}")
    return problems


def _label_hints(selector: Sequence[Requirement], labels: Sequence[Mapping[str, str]]) -> str:
    in_use = sorted({f"{k}={v}" for bot in labels for k, v in bot.items()})
    keys = sorted({k for bot in labels for k in bot})
    hints = []
    for requirement in selector:
        if requirement.key not in keys:
            close = _close(requirement.key, keys)
            hints.append(f"no chatbot has the label {requirement.key!r}{close}")
        elif requirement.operator in ("=", "in"):
            for value in sorted(requirement.values):
                pair = f"{requirement.key}={value}"
                if pair not in in_use:
                    hints.append(f"no chatbot has {pair}{_close(pair, in_use)}")
    listing = "labels in use: " + (", ".join(in_use) if in_use else "none")
    return "; ".join([*hints, listing])


def select_names(bots: Sequence[tuple[str, Mapping[str, str]]], selection: Selection) -> list[str]:
    """The names of ``bots`` (name, labels) that ``selection`` covers, in their order; raises
    BotctlError when a --target or --exclude matches nothing or nothing is left."""
    if selection.everything:
        return [name for name, _ in bots]
    names = [name for name, _ in bots]
    problems = _unmatched("--target", selection.targets, names)
    problems += _unmatched("--exclude", selection.excludes, names)
    if problems:
        raise BotctlError("; ".join(problems) + f"; chatbots: {', '.join(names)}")
    kept = [name for name, labels in bots if selection.covers(name, labels)]
    if not kept:
        message = f"the selection {selection.describe()} matches no chatbot"
        if selection.selector:
            message += ": " + _label_hints(selection.selector, [labels for _, labels in bots])
        raise BotctlError(message)
    return kept
