"""Workflow commands: GitHub's escaping rules, and no text inside a command or an inert block
can become a command of its own (checked with an independent model of the runner)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from botctl.annotations import (
    annotation,
    command,
    error_annotations,
    escape_data,
    escape_property,
    inert,
    inert_block,
    located_annotation,
    parse_command,
)
from botctl.errors import ConfigError, Problem, ServiceError
from tests.github_runner import executed, names

HOSTILE = [
    "x\n::set-output name=leak::1",
    "::add-mask::secret",
    "a\r::error::forged",
    "%0A::set-env name=A::b",
    "##vso[task.setvariable variable=A]1",
    "##[set-output name=x;]y",
    "::stop-commands::x",
    "\x1b[2K\x1b[1A::warning::fake",
    "a,b:c=d::e",
    "\u2028::debug::x\x85y",
]


def test_github_escaping_rules() -> None:
    assert escape_data("100% done\r\nnext") == "100%25 done%0D%0Anext"
    assert escape_property("a:b,c%") == "a%3Ab%2Cc%25"
    assert escape_data("a:b,c") == "a:b,c"  # ':' and ',' are only special in properties
    assert command("notice", "hi") == "::notice::hi"
    assert command("error", "m", file="a.yaml", line=3, col=5, title="t") == (
        "::error file=a.yaml,line=3,col=5,title=t::m"
    )


def test_terminal_escapes_and_legacy_prefixes_are_shown_not_kept() -> None:
    assert escape_data("\x1b[31mred\x9b") == "\\x1b[31mred\\x9b"
    assert escape_data("tab\tkept") == "tab\tkept"
    assert escape_data("##vso[task.x]1 ##[debug]y") == "##vso%5Btask.x]1 ##%5Bdebug]y"


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_stays_inside_its_one_annotation(text: str) -> None:
    line = annotation("warning", text, title=text, file=f"{text}.yaml", line=2, col=3)
    assert "\n" not in line
    assert "\r" not in line
    (only,) = executed(line)
    assert only.name == "warning"
    assert set(only.properties) == {"file", "line", "col", "title"}
    assert only.properties["line"] == "2"
    assert names(line) == ["warning"]


@given(st.text(), st.text(), st.text())
def test_any_text_round_trips_through_the_runner(message: str, title: str, file: str) -> None:
    line = annotation("error", message, title=title or "t", file=file or "f")
    (only,) = executed(line)
    assert only.name == "error"
    # What the runner shows is the text, with control characters made visible.
    visible = escape_data(message).replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")
    assert only.data == visible
    assert parse_command(line) is not None


@given(st.lists(st.text(), max_size=8))
def test_an_inert_block_runs_nothing_whatever_it_holds(lines: list[str]) -> None:
    block = "\n".join(["::group::g", *inert_block([*lines, *HOSTILE]), "::endgroup::"])
    assert names(block) == ["group", "stop-commands", "endgroup"]


def test_inert_block_token_is_the_hash_of_its_content() -> None:
    first, second = inert_block(["a"]), inert_block(["b"])
    assert first[0] != second[0]
    assert first[0] == inert_block(["a"])[0]  # deterministic: renderers stay pure
    assert first[-1] == f"::{first[0].removeprefix('::stop-commands::')}::"


def test_located_warning_lands_on_its_file_and_line() -> None:
    text = str(Problem("bots/a b.yaml", 7, 9, "name 'renewal-date' breaks style", "warning"))
    (only,) = executed(located_annotation("warning", text, title="botctl"))
    assert only.properties == {"file": "bots/a b.yaml", "line": "7", "col": "9", "title": "botctl"}
    assert only.data == "name 'renewal-date' breaks style"
    unlocated = located_annotation("warning", "no place\n::x::y", title="botctl")
    assert names(unlocated) == ["warning"]


def test_config_error_becomes_one_annotation_per_problem_and_a_count() -> None:
    problems = [
        Problem("bots/a.yaml", 3, 5, "unknown key '::set-output name=x::1'"),
        Problem("bots/a.yaml", 4, 1, "odd name", "warning"),
    ]
    out = "\n".join(error_annotations(ConfigError(problems), title="botctl validate"))
    commands = executed(out)
    assert [c.name for c in commands] == ["error", "warning", "error"]
    assert commands[0].properties["line"] == "3"
    assert commands[0].data == "unknown key '::set-output name=x::1'"
    assert commands[2].data == "1 error(s) in the configuration; nothing was sent."
    other = error_annotations(ServiceError("read", "HTTP 500\n::add-mask::x"), title="t")
    assert names("\n".join(other)) == ["error"]


# --- plain text for a terminal or a CI log ------------------------------------------------------

TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


@given(st.lists(st.one_of(st.sampled_from(HOSTILE), st.text(max_size=20)), max_size=6))
def test_inert_text_runs_no_command_and_moves_no_cursor(parts: list[str]) -> None:
    text = "\n".join(parts)
    shown = inert(text)
    assert executed(shown) == []
    assert TERMINAL_CONTROLS.search(shown) is None
    assert shown.count("\n") == text.count("\n")  # the same lines, each shown


def test_inert_keeps_botctl_colour_only_when_asked() -> None:
    ours = "\x1b[1mbot\x1b[0m \x1b[32m+\x1b[0m"
    assert inert(ours, colour=True) == ours
    assert inert(ours) == "\\x1b[1mbot\\x1b[0m \\x1b[32m+\\x1b[0m"
    # A sequence inside a value is the value's, shown: a clear-screen, a title, the C1 CSI.
    assert inert("\x1b[1m\x1b[2J\x9b0m", colour=True) == "\x1b[1m\\x1b[2J\\x9b0m"


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("::set-output name=x::1", "%3A:set-output name=x::1"),
        ("   \t::error::x", "   \t%3A:error::x"),
        ("\u3000::error::x", "\u3000%3A:error::x"),  # .NET's Trim() takes any white space
        ("a ::error::x", "a ::error::x"),  # mid-line: no command, shown as written
        ("##vso[task.complete]", "##vso%5Btask.complete]"),
    ],
)
def test_inert_lines(line: str, shown: str) -> None:
    assert inert(line) == shown


def test_a_coloured_line_is_checked_without_its_colour() -> None:
    assert inert("\x1b[1m  ::error::x\x1b[0m", colour=True) == "\x1b[1m  %3A:error::x\x1b[0m"
