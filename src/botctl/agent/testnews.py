"""What the agent says when a gate's conversation tests fail (``--test``): the ``test_failed``
notification's text and fields, and the chatbots' errors for ``/status``. Pure: from the
tests' report (``conversation.report``), whose failures already name the expectation and quote
the answer (shortened, secrets masked: ``conversation.expect``)."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from botctl.conversation.report import CaseResult, TestReport
from botctl.render.tests import case_document

# Bounds: a notification is read in a chat; its JSON carries more, still bounded.
_TEXT_CASES = 5
_TEXT_FAILURES = 3
_DOCUMENT_CASES = 20


def case_problems(case: CaseResult) -> tuple[str, ...]:
    """Why a case did not pass: its failures (each naming the expectation and quoting the
    answer), or the errors that kept it from running."""
    return case.failures or tuple(f"could not run: {e}" for e in case.errors)


def failed_cases(report: TestReport) -> list[CaseResult]:
    return [c for c in report.cases if c.status != "passed"]


def chatbot_errors(report: TestReport) -> dict[str, str]:
    """Each chatbot with a case that did not pass (by id): its first failure, in words."""
    found: dict[str, str] = {}
    for case in failed_cases(report):
        problems = case_problems(case)
        first = problems[0] if problems else case.status
        found.setdefault(case.chatbot_id, f"test {case.test} failed: {first}")
    return found


def failed_news(
    report: TestReport, *, source: str, revision: str, short: str, rolled_back: Collection[str]
) -> tuple[str, dict[str, Any]]:
    """The ``test_failed`` notification: its text (the Notifier escapes it for Slack) and its
    event's fields. ``rolled_back``: the names of the chatbots put back as they were."""
    cases = failed_cases(report)
    names = list(dict.fromkeys(c.chatbot for c in cases))
    back = [n for n in names if n in rolled_back]
    after = (
        f"rolled back: {', '.join(back)}; not applied again until its configuration or tests change"
        if back
        else "not rolled back"
    )
    lines = [
        f"botctl agent: conversation tests failed at revision {short} of {source} on "
        f"{', '.join(names)} ({after})"
    ]
    for case in cases[:_TEXT_CASES]:
        problems = case_problems(case)
        shown = "; ".join(problems[:_TEXT_FAILURES])
        more = (
            f" (and {len(problems) - _TEXT_FAILURES} more)"
            if len(problems) > _TEXT_FAILURES
            else ""
        )
        lines.append(f"- {case.chatbot}: test {case.test} ({case.source}): {shown}{more}")
    if len(cases) > _TEXT_CASES:
        lines.append(f"- and {len(cases) - _TEXT_CASES} more failing test(s)")
    fields: dict[str, Any] = {
        "source": source,
        "revision": revision,
        "chatbots": names,
        "rolledBack": back,
        # Each case as `botctl test --format json` writes it (its turns' answers quoted).
        "tests": [case_document(c) for c in cases[:_DOCUMENT_CASES]],
    }
    return "\n".join(lines), fields
