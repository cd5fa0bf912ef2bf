"""``botctl test --baseline``: each test run on a chatbot and on its baseline counterpart, and
per sent message how much the answer changed (``conversation.similarity``). Pure: the runs
are made by ``conversation.run``, the pairs by the pipeline.

A pair's answers are compared run by run of the first run of each side (a test with
``repeat`` runs more for its verdict, not for the comparison), message by message: a message
one side never got to (its run stopped on an error) has no similarity.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from botctl.conversation.report import CaseResult, TestReport, TurnResult
from botctl.conversation.similarity import similarity


@dataclass(frozen=True)
class TurnChange:
    """One sent message of a test, answered by the chatbot under test and by its baseline."""

    index: int  # of the user message in spec.conversation
    question: str  # clipped
    candidate: TurnResult | None  # None: this side's run stopped before the message
    baseline: TurnResult | None
    similarity: float | None  # of the two whole answers; None when one is missing

    @property
    def changed(self) -> bool:
        """Whether the answer is not the same text (case, spacing and punctuation aside)."""
        return self.similarity is None or self.similarity < 1.0


@dataclass(frozen=True)
class PairResult:
    """One test on one chatbot under test and its baseline counterpart."""

    candidate: CaseResult
    baseline: CaseResult
    turns: tuple[TurnChange, ...]

    @property
    def test(self) -> str:
        return self.candidate.test

    @property
    def least_similarity(self) -> float | None:
        """The most changed message's similarity (None: a message has none)."""
        values = [t.similarity for t in self.turns]
        if not values or None in values:
            return None
        return min(v for v in values if v is not None)

    @property
    def changed(self) -> bool:
        return any(t.changed for t in self.turns) or not self.turns


@dataclass(frozen=True)
class BehaviourReport:
    """The tests on the chatbots under test, each beside its baseline counterpart. Its
    verdict (``tests``, ``exit_code``) is the chatbots under test's: the baseline's results
    are shown, never failing the run."""

    __test__: ClassVar[bool] = False
    baseline: str  # the --baseline selector, as given
    pairs: tuple[PairResult, ...] = ()
    untested: tuple[str, ...] = ()  # chatbots under test that no test covers

    @property
    def tests(self) -> TestReport:
        return TestReport(tuple(p.candidate for p in self.pairs), self.untested)

    @property
    def baseline_tests(self) -> TestReport:
        return TestReport(tuple(p.baseline for p in self.pairs))

    @property
    def exit_code(self) -> int:
        return self.tests.exit_code

    def changes(self) -> list[tuple[PairResult, TurnChange]]:
        """Every sent message of every pair, the most changed first (a missing answer before
        any), then in the tests' order."""
        found = [(p, t) for p in self.pairs for t in p.turns]
        order = {id(t): n for n, (_, t) in enumerate(found)}
        return sorted(
            found,
            key=lambda pt: (
                -1.0 if pt[1].similarity is None else pt[1].similarity,
                order[id(pt[1])],
            ),
        )

    def count_changed(self) -> int:
        return sum(1 for _, t in self.changes() if t.changed)


def compare(candidate: CaseResult, baseline: CaseResult) -> PairResult:
    """The two sides' first runs, message by message."""
    ours = {t.index: t for t in (candidate.runs[0].turns if candidate.runs else ())}
    theirs = {t.index: t for t in (baseline.runs[0].turns if baseline.runs else ())}
    turns = []
    for index in sorted(ours.keys() | theirs.keys()):
        mine, base = ours.get(index), theirs.get(index)
        either = mine or base
        assert either is not None
        alike = similarity(mine.text, base.text) if mine and base else None
        turns.append(TurnChange(index, either.question, mine, base, alike))
    return PairResult(candidate, baseline, tuple(turns))
