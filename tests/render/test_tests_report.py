"""Conversation test reports: text, JSON and JUnit XML (valid against the JUnit schema GitLab
and GitHub's test-report actions read), whatever the answers hold."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import xmlschema

from botctl.conversation.report import CaseResult, RunResult, TestReport, TurnResult
from botctl.render.tests import render_junit, render_tests_json, render_tests_text

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
