"""``expect.judge``: a chatbot of the configuration grades an answer against a rubric, through
the same chat operation every test uses. This module is the pure part: the one message sent
to the judge, and the verdict read from its answer.

The judge's answer must hold exactly one verdict line, ``VERDICT: PASS`` or ``VERDICT: FAIL``
(any letter case, spaces around the colon, a final full stop allowed, nothing else on the
line), and may hold a ``REASON: ...`` line, quoted in the report. Anything else (no verdict
line, two of them, a verdict inside a sentence) is off-format: an error of the test, never a
pass and never a fail, since botctl cannot tell what the judge meant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from botctl.errors import BotctlError

_VERDICT = re.compile(r"^\s*VERDICT\s*:\s*(PASS|FAIL)\s*\.?\s*$", re.IGNORECASE)
_REASON = re.compile(r"^\s*REASON\s*:\s*(.*\S)\s*$", re.IGNORECASE)

INSTRUCTION = (
    "Reply with one line VERDICT: PASS if the answer meets the rubric, or VERDICT: FAIL if it "
    "does not, then one line REASON: saying why in one sentence. Nothing else."
)


class OffFormat(BotctlError):
    """The judge answered without exactly one verdict line."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    reason: str | None


def prompt(rubric: str, question: str, answer: str) -> str:
    """The one user message sent to the judge: the rubric, the question and the answer, each
    between markers so that neither can pass for another part, then the answer format."""
    return "\n".join(
        [
            "You grade the answer a chatbot gave to a customer, against a rubric. Do not answer "
            "the question yourself.",
            "",
            "<<<RUBRIC",
            rubric,
            "RUBRIC>>>",
            "",
            "<<<QUESTION",
            question,
            "QUESTION>>>",
            "",
            "<<<ANSWER",
            answer,
            "ANSWER>>>",
            "",
            INSTRUCTION,
        ]
    )


def verdict(text: str) -> Verdict:
    """The verdict in the judge's answer ``text``; ``OffFormat`` when it holds none or
    several."""
    lines = text.splitlines()
    found = [m.group(1).upper() for line in lines if (m := _VERDICT.match(line))]
    if len(found) != 1:
        why = "no line" if not found else f"{len(found)} lines"
        raise OffFormat(
            f"{why} 'VERDICT: PASS' or 'VERDICT: FAIL' in its answer (README, Conversation tests)"
        )
    reasons = [m.group(1) for line in lines if (m := _REASON.match(line))]
    return Verdict(found[0] == "PASS", reasons[0] if reasons else None)
