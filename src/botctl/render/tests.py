"""Conversation test reports (``botctl test``, ``apply --test``): text for a terminal or CI log,
JSON (versioned, README "JSON output"), Markdown (a pull-request comment or job summary, under
the comment budget, with its marker), GitHub workflow commands (the text folded, each failed
case an error annotation on its test), and JUnit XML, which GitHub (through test-report
actions) and GitLab (``artifacts:reports:junit``) display.

Every answer and question in a report was clipped when the test ran (shortened, on one line,
secrets masked: ``conversation.expect.clip``); the text formats are made inert on top, and
XML escapes what it holds (characters XML 1.0 cannot carry at all are shown as ``\\xNN``).
"""

from __future__ import annotations

import json
import re
from typing import Any
from xml.etree import ElementTree as ET

from botctl.annotations import annotation, command, inert, inert_block, visible
from botctl.conversation.report import CaseResult, TestReport
from botctl.defaults import COMMENT_LIMIT
from botctl.reconcile.apply import ApplyReport
from botctl.reconcile.rollback import Rollback
from botctl.render import blocks as md

TEST_MARKER = "<!-- botctl:test -->"
# A case's failing expectations shown in its table cell; the rest are counted there.
CELL_FAILURES = 3

TEST_FORMAT_VERSION = 1
LABELS = {"passed": "PASS ", "failed": "FAIL ", "error": "ERROR"}
# Characters XML 1.0 cannot hold, even escaped.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def summary(report: TestReport) -> str:
    total = len(report.cases)
    if not total:
        return "Tests: none to run for the selected chatbots."
    return (
        f"Tests: {report.count('passed')} passed, {report.count('failed')} failed, "
        f"{report.count('error')} error(s) ({total} in all)."
    )


def _runs(case: CaseResult) -> str:
    if len(case.runs) == 1:
        return ""
    return f"  {case.passed_runs}/{len(case.runs)} runs passed (needs {case.pass_rate:.0%})"


def render_tests_text(report: TestReport, *, heading: str = "") -> str:
    lines = [heading] if heading else []
    for case in report.cases:
        timing = f"  {case.seconds:.2f} s" if case.status != "error" else ""
        lines.append(
            f"{LABELS[case.status]} {case.test}  {case.chatbot} ({case.chatbot_id}){_runs(case)}"
            f"{timing}"
        )
        if case.status == "error":
            lines += [f"      {e}" for e in case.errors]
        elif case.status == "failed" or case.failures:
            lines += [f"      {f}" for f in case.failures]
        for run in case.runs:
            streamed = [t for t in run.turns if t.first_event_seconds is not None]
            for turn in streamed[:1]:
                lines.append(
                    f"      message {turn.index + 1}: first event after "
                    f"{turn.first_event_seconds:.2f} s, whole answer {turn.seconds:.2f} s"
                )
            break
    if report.untested:
        lines.append(f"No conversation test covers: {', '.join(report.untested)}")
    lines.append(summary(report))
    return inert("\n".join(lines)) + "\n"


def tests_document(report: TestReport) -> dict[str, Any]:
    return {
        "format_version": TEST_FORMAT_VERSION,
        "summary": {
            "passed": report.count("passed"),
            "failed": report.count("failed"),
            "errors": report.count("error"),
            "total": len(report.cases),
        },
        "untested": list(report.untested),
        "cases": [case_document(c) for c in report.cases],
    }


def case_document(case: CaseResult) -> dict[str, Any]:
    return {
        "test": case.test,
        "source": case.source,
        "chatbot": case.chatbot,
        "chatbotId": case.chatbot_id,
        "status": case.status,
        "passRate": case.pass_rate,
        "runsPassed": case.passed_runs,
        "seconds": round(case.seconds, 3),
        "failures": list(case.failures),
        "errors": list(case.errors),
        "runs": [
            {
                "passed": run.passed,
                "error": run.error,
                "turns": [
                    {
                        "message": turn.index + 1,
                        "question": turn.question,
                        "answer": turn.answer,
                        "seconds": round(turn.seconds, 3),
                        "firstEventSeconds": None
                        if turn.first_event_seconds is None
                        else round(turn.first_event_seconds, 3),
                        "failures": list(turn.failures),
                    }
                    for turn in run.turns
                ],
            }
            for run in case.runs
        ],
    }


def render_tests_json(report: TestReport) -> str:
    return json.dumps(tests_document(report), indent=2, ensure_ascii=False) + "\n"


def _where(case: CaseResult) -> tuple[str | None, int | None]:
    """The test's file and line (``source`` is ``file:line``)."""
    file, _, line = case.source.rpartition(":")
    if file and line.isdigit():
        return file, int(line)
    return None, None


def _problems(case: CaseResult) -> tuple[str, ...]:
    if case.status == "error":
        return case.errors
    if case.failures:
        return case.failures
    if case.status == "failed":  # runs without a failing turn: too few passed
        return (f"{case.passed_runs}/{len(case.runs)} runs passed",)
    return ()


def render_tests_markdown(report: TestReport, *, limit: int | None = None) -> str:
    """The cases that failed or could not run in view, as a table (chatbot, test, result,
    runs, what failed with the quoted answer); the passed ones folded. Every value is text
    shown as written (``blocks.text``/``code``): nothing in an answer forms Markdown."""
    doc = md.Budget(limit)
    doc.add("### botctl test", "", f"**{md.text(summary(report))}**")
    bad = [c for c in report.cases if c.status != "passed"]
    good = [c for c in report.cases if c.status == "passed"]
    if bad:
        doc.section(
            [
                "",
                f"**Failed or not run ({len(bad)})**",
                "",
                "| chatbot | test | result | runs | what failed |",
                "|---|---|---|---|---|",
            ],
            [_case_row(c, failed=True) for c in bad],
            [],
            "\n" + _cut_note(),
        )
    if good:
        doc.section(
            [
                "",
                f"<details><summary>Passed ({len(good)})</summary>",
                "",
                "| chatbot | test | result | runs | time |",
                "|---|---|---|---|---|",
            ],
            [_case_row(c, failed=False) for c in good],
            ["", "</details>"],
            "\n" + _cut_note(),
        )
    doc.section(
        [
            "",
            f"<details><summary>No conversation test covers ({len(report.untested)})</summary>",
            "",
        ],
        [md.Row((f"- {md.code(name)}",), {"untested chatbot": 1}) for name in report.untested],
        ["", "</details>"],
        "- " + _cut_note(),
    )
    doc.tail(_cut_note())
    return doc.render()


def render_tests_comment(report: TestReport, *, limit: int = COMMENT_LIMIT) -> str:
    """The Markdown report as a pull-request comment: the hidden marker first, at most
    ``limit`` characters in all."""
    return f"{TEST_MARKER}\n" + render_tests_markdown(report, limit=limit - len(TEST_MARKER) - 1)


def _case_row(case: CaseResult, *, failed: bool) -> md.Row:
    result = {"passed": "passed", "failed": "**failed**", "error": "**error** (not run)"}
    runs = f"{case.passed_runs}/{len(case.runs)}"
    if len(case.runs) > 1 or case.pass_rate < 1:
        runs += f" (needs {case.pass_rate:.0%})"
    if failed:
        problems = _problems(case)
        shown = [md.text(visible(p)) for p in problems[:CELL_FAILURES]]
        if len(problems) > CELL_FAILURES:
            shown.append(f"_... {len(problems) - CELL_FAILURES} more_")
        last = "<br>".join(shown)
        noun = "failed test" if case.status == "failed" else "test not run"
    else:
        last = f"{case.seconds:.2f} s"
        noun = "passed test"
    cells = [
        f"{md.text(case.chatbot)} ({md.code(case.chatbot_id)})",
        md.code(case.test),
        result[case.status],
        runs,
        last,
    ]
    return md.Row(("| " + " | ".join(cells) + " |",), {noun: 1})


def _cut_note() -> str:
    return "_... {more} not shown, to keep this short enough to post; `botctl test` shows all._"


def render_tests_github(report: TestReport) -> str:
    """The text report folded in the log; each case that failed or could not run an error
    annotation on its test's file and line; the summary a notice (all passed) or an error."""
    out = [
        command("group", "botctl test"),
        *inert_block(render_tests_text(report).rstrip("\n").splitlines()),
        command("endgroup"),
    ]
    for case in report.cases:
        if case.status == "passed":
            continue
        file, line = _where(case)
        verdict = "failed" if case.status == "failed" else "could not run"
        out.append(
            annotation(
                "error",
                "\n".join(
                    [f"{case.chatbot} ({case.chatbot_id}): {case.test} {verdict}", *_problems(case)]
                ),
                title=f"botctl test: {case.test} {verdict}",
                file=file,
                line=line,
            )
        )
    level = "notice" if report.passed else "error"
    out.append(annotation(level, summary(report), title="botctl test"))
    return "\n".join(out) + "\n"


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def render_junit(report: TestReport) -> str:
    """JUnit XML: one ``testsuite`` per conversation test, one ``testcase`` per chatbot
    (``classname`` the test, ``name`` the chatbot); a failed case has a ``failure`` per
    failing expectation, with the quoted answer; a case the chat operation could not run an
    ``error``."""
    root = ET.Element("testsuites", name="botctl conversation tests")
    totals = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
    suites: dict[str, ET.Element] = {}
    counts: dict[str, dict[str, float]] = {}
    for case in report.cases:
        suite = suites.get(case.test)
        if suite is None:
            suite = ET.SubElement(
                root,
                "testsuite",
                name=_xml_text(case.test),
                file=_xml_text(case.source.rpartition(":")[0]),
            )
            suites[case.test] = suite
            counts[case.test] = {"tests": 0, "failures": 0, "errors": 0, "time": 0.0}
        element = ET.SubElement(
            suite,
            "testcase",
            classname=_xml_text(case.test),
            name=_xml_text(f"{case.chatbot} ({case.chatbot_id})"),
            time=f"{case.seconds:.3f}",
        )
        tally = counts[case.test]
        tally["tests"] += 1
        tally["time"] += case.seconds
        if case.status == "error":
            tally["errors"] += 1
            error = ET.SubElement(
                element, "error", message=_xml_text(case.errors[0]), type="ChatError"
            )
            error.text = _xml_text("\n".join(case.errors))
        elif case.status == "failed":
            tally["failures"] += 1
            shown = case.failures[0] if case.failures else "too few runs passed"
            failure = ET.SubElement(
                element, "failure", message=_xml_text(shown), type="ExpectationFailed"
            )
            failure.text = _xml_text(
                "\n".join(
                    [
                        f"{case.passed_runs}/{len(case.runs)} runs passed "
                        f"(needs {case.pass_rate:.0%})",
                        *case.failures,
                    ]
                )
            )
        out = [
            f"message {t.index + 1}: {json.dumps(t.question, ensure_ascii=False)} -> "
            f"{json.dumps(t.answer, ensure_ascii=False)} ({t.seconds:.2f} s)"
            for t in (case.runs[0].turns if case.runs else ())
        ]
        if out:
            ET.SubElement(element, "system-out").text = _xml_text("\n".join(out))
    for name, suite in suites.items():
        tally = counts[name]
        suite.set("tests", str(int(tally["tests"])))
        suite.set("failures", str(int(tally["failures"])))
        suite.set("errors", str(int(tally["errors"])))
        suite.set("skipped", "0")
        suite.set("time", f"{tally['time']:.3f}")
        for key in ("tests", "failures", "errors", "time"):
            totals[key] += tally[key]
    root.set("tests", str(int(totals["tests"])))
    root.set("failures", str(int(totals["failures"])))
    root.set("errors", str(int(totals["errors"])))
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def render_rollback_text(rollback: Rollback, sent: ApplyReport | None) -> str:
    """What ``apply --test --rollback-on-failure`` put back, and what it could not."""
    lines = ["Rollback of the chatbots whose conversation tests failed:"]
    for result in sent.results if sent is not None else ():
        op = result.operation
        fields = ", ".join(sorted(op.body))
        if result.status == "applied":
            lines.append(
                f"  restored   {op.bot.name}: {op.resource} {fields} (as before the apply)"
            )
        else:
            lines.append(f"  FAILED     {op.bot.name}: {op.resource} {fields}: {result.message}")
    for item in rollback.not_restorable:
        lines.append(f"  not restorable  {item.bot.name}: {item.resource} {item.field}: {item.why}")
    kept: dict[str, list[str]] = {}
    for op in rollback.kept:
        kept.setdefault(op.bot.name, []).append(f"{op.kind} {op.subject}")
    for name, ops in kept.items():
        lines.append(f"  kept       {name}: {', '.join(ops)}")
    if kept:
        lines.append(
            "  (attributes are never rolled back: archive or create them again by a reviewed "
            "change)"
        )
    restored = sent.count("applied") if sent is not None else 0
    failed = sent.count("failed") if sent is not None else 0
    lines.append(
        f"Rollback: {restored} chatbot(s) restored, {failed} failed, "
        f"{len(rollback.not_restorable)} value(s) not restorable, "
        f"{len(rollback.kept)} attribute change(s) kept."
    )
    return inert("\n".join(lines)) + "\n"
