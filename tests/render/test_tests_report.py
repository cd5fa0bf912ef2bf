"""Conversation test reports: text, JSON and JUnit XML (valid against the JUnit schema GitLab
and GitHub's test-report actions read), whatever the answers hold."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

from botctl.conversation.report import CaseResult, RunResult, TestReport, TurnResult
from botctl.render.tests import (
    render_junit,
    render_tests_comment,
    render_tests_github,
    render_tests_json,
    render_tests_markdown,
    render_tests_text,
)
from tests.github_runner import executed

XSD = Path(__file__).parents[1] / "fixtures" / "junit.xsd"


def turn(answer: str, *failures: str, first: float | None = None) -> TurnResult:
    return TurnResult(0, "hi", answer, 0.25, first, failures)


REPORT = TestReport(
    (
        CaseResult(
            "greet", "bots/t.yaml:3", "support", "bot-1", (RunResult((turn("Hello"),)),), 1.0, 0.3
        ),
        CaseResult(
            "greet",
            "bots/t.yaml:3",
            "sales",
            "bot-2",
            (RunResult((turn("::error::x \\x1b[31m", 'contains "Hello": not in the answer'),)),),
            1.0,
            0.2,
        ),
        CaseResult(
            "stream",
            "bots/s.yaml:1",
            "support",
            "bot-1",
            (RunResult((), "the service refused the chat operation (HTTP 403) \x00"),),
            1.0,
        ),
        CaseResult(
            "flaky",
            "bots/f.yaml:1",
            "support",
            "bot-1",
            (RunResult((turn("a", first=0.1),)), RunResult((turn("b", "x"),))),
            0.5,
            0.5,
        ),
    ),
    untested=("faq",),
)


def test_statuses_and_exit_code() -> None:
    assert [c.status for c in REPORT.cases] == ["passed", "failed", "error", "passed"]
    assert REPORT.exit_code == 1  # an error outranks a failure
    failed_only = TestReport(REPORT.cases[:2])
    assert failed_only.exit_code == 3
    assert failed_only.failed_chatbots() == ("sales",)
    assert TestReport(REPORT.cases[:1]).exit_code == 0


def test_text() -> None:
    text = render_tests_text(REPORT)
    assert "PASS  greet  support (bot-1)  0.30 s" in text
    assert "FAIL  greet  sales (bot-2)  0.20 s\n      message 1: contains" in text
    assert "ERROR stream  support (bot-1)\n      the service refused" in text
    assert "PASS  flaky  support (bot-1)  1/2 runs passed (needs 50%)" in text
    assert "message 1: first event after 0.10 s, whole answer 0.25 s" in text
    assert "No conversation test covers: faq" in text
    assert text.endswith("Tests: 2 passed, 1 failed, 1 error(s) (4 in all).\n")
    assert "\x00" not in text


def test_json() -> None:
    document = json.loads(render_tests_json(REPORT))
    assert document["format_version"] == 1
    assert document["summary"] == {"passed": 2, "failed": 1, "errors": 1, "total": 4}
    failed = document["cases"][1]
    assert failed["failures"] == ['message 1: contains "Hello": not in the answer']
    assert failed["runs"][0]["turns"][0]["answer"] == "::error::x \\x1b[31m"
    assert document["cases"][3]["runsPassed"] == 1


def test_junit_is_valid_and_counts() -> None:
    text = render_junit(REPORT)
    xmlschema.XMLSchema(str(XSD)).validate(text)
    root = ET.fromstring(text)
    assert (root.get("tests"), root.get("failures"), root.get("errors")) == ("4", "1", "1")
    suites = {s.get("name"): s for s in root.iter("testsuite")}
    assert list(suites) == ["greet", "stream", "flaky"]
    assert suites["greet"].get("file") == "bots/t.yaml"
    assert (suites["greet"].get("tests"), suites["greet"].get("failures")) == ("2", "1")
    error = suites["stream"].find("testcase/error")
    assert error is not None
    assert "\\x00" in (error.get("message") or "")  # not XML-able: shown, not written


def test_empty_report() -> None:
    assert render_tests_text(TestReport()).endswith(
        "Tests: none to run for the selected chatbots.\n"
    )
    xmlschema.XMLSchema(str(XSD)).validate(render_junit(TestReport()))


def test_markdown_puts_what_failed_in_a_table_and_folds_the_passed() -> None:
    text = render_tests_markdown(REPORT)
    lines = text.splitlines()
    assert lines[:3] == [
        "### botctl test",
        "",
        "**Tests: 2 passed, 1 failed, 1 error(s) (4 in all).**",
    ]
    assert "**Failed or not run (2)**" in lines
    failed = next(line for line in lines if line.startswith("| sales"))
    assert failed == (
        "| sales (`bot-2`) | `greet` | **failed** | 0/1 | "
        'message 1: contains "Hello": not in the answer |'
    )
    error = next(line for line in lines if "**error**" in line)
    assert "the service refused the chat operation (HTTP 403) \\\\x00 |" in error  # shows as \\x00
    assert "\x00" not in text
    folded = lines.index("<details><summary>Passed (2)</summary>")
    assert lines[folded + 4] == "| support (`bot-1`) | `greet` | passed | 1/1 | 0.30 s |"
    assert lines[folded + 5].startswith(
        "| support (`bot-1`) | `flaky` | passed | 1/2 (needs 50%) |"
    )
    assert "<details><summary>No conversation test covers (1)</summary>" in lines
    assert "- `faq`" in lines


def test_markdown_answers_show_as_written() -> None:
    hostile = "<img src=x> @team [link](http://x) | `code` **bold**"
    report = TestReport(
        (
            CaseResult(
                "t",
                "t.yaml:1",
                "bot",
                "b-1",
                (RunResult((turn(hostile, f'in "{hostile}"'),)),),
                1.0,
            ),
        )
    )
    row = next(
        line for line in render_tests_markdown(report).splitlines() if line.startswith("| bot")
    )
    assert row.count(" | ") == 4  # the answer's | splits no cell
    quoted = row.split("| message 1: ", 1)[1]
    assert not re.search(r"(?<!\\)[<>@\[\]`*|]", quoted.removesuffix(" |"))  # all escaped
    assert "\\<img src=x\\> \\@team \\[link\\](http://x) \\| \\`code\\`" in quoted


def test_comment_stays_under_its_limit_and_counts_what_it_left_out() -> None:
    cases = tuple(
        CaseResult(
            f"test-{i}",
            "t.yaml:1",
            f"bot-{i}",
            f"id-{i}",
            (RunResult((turn("x" * 150, "contains: not in the answer " + "y" * 150),)),),
            1.0,
        )
        for i in range(400)
    )
    comment = render_tests_comment(TestReport(cases), limit=20_000)
    assert comment.startswith("<!-- botctl:test -->\n### botctl test\n")
    assert len(comment) <= 20_000
    assert "**Failed or not run (400)**" in comment
    shown = sum(1 for line in comment.splitlines() if line.startswith("| bot-"))
    assert 0 < shown < 400
    assert f"_... {400 - shown} more failed tests not shown" in comment


def test_github_annotates_each_failed_test_on_its_file() -> None:
    found = executed(render_tests_github(REPORT))
    assert [c.name for c in found] == [
        "group",
        "stop-commands",
        "endgroup",
        "error",
        "error",
        "error",
    ]
    failure, error, verdict = found[3:]
    assert (failure.properties["file"], failure.properties["line"]) == ("bots/t.yaml", "3")
    assert failure.properties["title"] == "botctl test: greet failed"
    assert (
        failure.data
        == 'sales (bot-2): greet failed\nmessage 1: contains "Hello": not in the answer'
    )
    assert error.properties["title"] == "botctl test: stream could not run"
    assert verdict.data == "Tests: 2 passed, 1 failed, 1 error(s) (4 in all)."
    passed = executed(render_tests_github(TestReport(REPORT.cases[:1])))
    assert [c.name for c in passed][-1] == "notice"
