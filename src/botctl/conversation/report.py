"""The outcome of conversation tests: per test and chatbot (a *case*), its runs, per run the
turns botctl sent, each with its answer (quoted: shortened, secrets masked) and what failed."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from botctl.errors import EXIT_ERROR, EXIT_OK, EXIT_TEST_FAILED

Status = Literal["passed", "failed", "error"]


@dataclass(frozen=True)
class TurnResult:
    index: int  # of the user message in spec.conversation
    question: str  # clipped: shortened, on one line, secrets masked (conversation.expect.clip)
    answer: str  # clipped likewise
    seconds: float
    first_event_seconds: float | None
    failures: tuple[str, ...] = ()
    # The whole answer, secrets masked (not shortened): what a comparison with the baseline
    # measures and quotes at more length. Never rendered whole.
    text: str = field(default="", repr=False, compare=False)


@dataclass(frozen=True)
class RunResult:
    turns: tuple[TurnResult, ...] = ()
    error: str | None = None  # the chat operation failed: no verdict on this run

    @property
    def passed(self) -> bool:
        return self.error is None and not any(t.failures for t in self.turns)


@dataclass(frozen=True)
class CaseResult:
    test: str
    source: str  # file:line of the test
    chatbot: str  # metadata.name
    chatbot_id: str
    runs: tuple[RunResult, ...]
    pass_rate: float  # required
    seconds: float = 0.0  # wall time of the case

    @property
    def passed_runs(self) -> int:
        return sum(1 for r in self.runs if r.passed)

    @property
    def errors(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.error for r in self.runs if r.error is not None))

    @property
    def status(self) -> Status:
        if self.errors:
            return "error"
        if self.runs and self.passed_runs / len(self.runs) >= self.pass_rate:
            return "passed"
        return "failed"

    @property
    def failures(self) -> tuple[str, ...]:
        """Each distinct failure, with the message it is about."""
        found: dict[str, None] = {}
        for run in self.runs:
            for turn in run.turns:
                for failure in turn.failures:
                    found[f"message {turn.index + 1}: {failure}"] = None
        return tuple(found)


@dataclass(frozen=True)
class TestReport:
    __test__: ClassVar[bool] = False  # not a pytest test class, despite its name
    cases: tuple[CaseResult, ...] = ()
    # Chatbots that had no test to run (selected, but no test covers them): named, not failed.
    untested: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    def count(self, status: Status) -> int:
        return sum(1 for c in self.cases if c.status == status)

    @property
    def passed(self) -> bool:
        return all(c.status == "passed" for c in self.cases)

    @property
    def exit_code(self) -> int:
        """0 all passed, 1 a test could not run (an error), 3 a test failed."""
        if self.count("error"):
            return EXIT_ERROR
        if self.count("failed"):
            return EXIT_TEST_FAILED
        return EXIT_OK

    def failed_chatbots(self) -> tuple[str, ...]:
        """The chatbots (metadata.name) with a failed case, in order."""
        return tuple(dict.fromkeys(c.chatbot for c in self.cases if c.status == "failed"))
