"""The agent's gates and stages (``--test``, ``--rollback-on-failure``, ``--stages``,
``--soak``), wired into its passes of the reconciler (``agent.passes``) at two points:

- the *scoper* of every pass that writes (a new revision, a stage's turn, self-heal): the
  chatbots the revision may not reach now (``agent.stages``: tests failed at their revision,
  a stage waiting) are taken out of it, decided from the state the pass itself read (under
  the lease: what CI's ``apply --test`` and ``promote`` recorded counts too); the chatbots of
  an open stage whose tests have not run at their revision are put in (their tests run);
- the reconciler's *gate* phase: ``apply --test``'s ``TestGate``, limited to the pass's
  chatbots, runs the tests of those it changed (and of those whose tests have not run at
  this revision), records each outcome in the state's rollout record, and with
  ``rollback`` puts back what a chatbot whose tests failed had before.

After a pass the loop asks ``after`` what the tests said (the ``test_failed`` news) and
``due`` whether a stage may now receive the revision (another pass, at once or when the soak
ends: ``next_opening``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from botctl.agent.passes import Held
from botctl.agent.stages import (
    GATE_RESULTS,
    SoakClock,
    Staging,
    gate_document,
    staging,
    untested,
)
from botctl.agent.testnews import chatbot_errors, failed_news
from botctl.config.resolve import Fleet
from botctl.models import Desired, State
from botctl.pipeline.conversations import TestGate, Verdict
from botctl.pipeline.outcome import Outcome
from botctl.pipeline.promote import Member, Stage
from botctl.pipeline.reconciler import Scoper
from botctl.pipeline.scope import pending
from botctl.plan import Scope


@dataclass(frozen=True)
class GateSettings:
    test: bool = False
    rollback: bool = False
    stages: tuple[Stage, ...] = ()
    soak: float = 0.0  # seconds between a stage passing and the next receiving the revision

    @property
    def active(self) -> bool:
        return self.test or bool(self.stages)


@dataclass(frozen=True)
class TestNews:
    """What a pass's tests said that the loop tells: the ``test_failed`` notification."""

    __test__ = False  # not a pytest class, whatever its name

    text: str
    fields: dict[str, Any]
    failed: frozenset[str]  # chatbot ids


class Gating:
    """One agent's gates and stages; see the module. Plain state, the loop's only."""

    def __init__(
        self,
        settings: GateSettings,
        registry: CollectorRegistry | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.soak = SoakClock()
        self.staging = Staging()
        self.stage_at: dict[str, str] = {}  # each stage's text -> the revision it last received
        self.errors: dict[str, str] = {}  # chatbot id -> the test failure that holds it
        # The chatbots whose tests a pass runs (``stages.untested``), as last judged.
        self.untested: frozenset[str] = frozenset()
        self._opened: tuple[str, ...] = ()  # the stages open for the pass in progress
        self._gate: tuple[str, TestGate] | None = None
        self._metrics(registry if registry is not None else CollectorRegistry())

    def _metrics(self, registry: CollectorRegistry) -> None:
        self.cases = Counter(
            "botctl_agent_test_cases",
            "Conversation test cases the agent's gate ran, by result (passed, failed, error).",
            ["result"],
            registry=registry,
        )
        self.gates = Gauge(
            "botctl_agent_stage_gate",
            "1 for each stage's gate result now (passed, failed, pending, waiting, soaking, "
            "refused).",
            ["stage", "result"],
            registry=registry,
        )
        for result in ("passed", "failed", "error"):
            self.cases.labels(result=result)

    # --- a revision's gate -----------------------------------------------------------------

    def gate_for(self, held: Held) -> TestGate | None:
        """The reconciler's gate for ``held`` (its tests loaded once per revision)."""
        if not self.settings.active:
            return None
        if self._gate is None or self._gate[0] != held.id:
            gate = TestGate(held.ws, (), rollback=self.settings.rollback, within_plan=True)
            self._gate = (held.id, gate)
        return self._gate[1]

    def judge(self, held: Held, state: State) -> Staging:
        """Which chatbots ``held`` may reach now, given the state (its ``rollout`` record);
        and those whose tests a pass runs."""
        gate = self.gate_for(held)
        if gate is None:
            return Staging()
        rollout = state.rollout
        self.untested = _untested(gate, state)
        members = [Member(b.spec.name, b.spec.chatbot_id, b.spec.labels) for b in gate.fleet.bots]
        self.staging = staging(
            self.settings.stages,
            members,
            gate.current,
            gate.covered,
            rollout,
            soak=self.settings.soak,
            clock=self.soak,
            now=self.clock(),
        )
        self.gates.clear()
        for found in self.staging.gates:
            self.gates.labels(stage=found.stage.text, result=found.result).set(1)
        return self.staging

    def scoper(self, held: Held, inner: Scoper) -> Scoper:
        """``inner`` (the pass's own scope) without the chatbots held back, with those of an
        open stage whose tests have not run at their revision."""
        if not self.settings.active:
            return inner

        def scoper(fleet: Fleet, state: State) -> tuple[Desired, Scope | None]:
            desired, scope = inner(fleet, state)
            found = self.judge(held, state)
            self._opened = tuple(g.stage.text for g in found.gates if g.open)
            wanted = {b.chatbot_id for b in desired.bots} | self.untested
            kept = tuple(
                b
                for b in fleet.desired.bots
                if b.chatbot_id in wanted and found.admits(b.chatbot_id)
            )
            return desired.model_copy(update={"bots": kept}), scope

        return scoper

    # --- after a pass ----------------------------------------------------------------------

    def after(self, held: Held, outcome: Outcome, *, source: str) -> TestNews | None:
        """After a pass at ``held``: the stages it reached, the gates judged again from the
        state it wrote, the failures kept for the statuses, the news when a test failed."""
        if not self.settings.active:
            return None
        if outcome.applied:
            for stage in self._opened:
                self.stage_at[stage] = held.id
        if outcome.state is not None:
            self.judge(held, outcome.state)
        verdict = outcome.verdict
        if not isinstance(verdict, Verdict):
            return None
        report = verdict.tests
        for case in report.cases:
            self.cases.labels(result=case.status).inc()
        errors = chatbot_errors(report)
        for case in report.cases:
            if case.chatbot_id not in errors:
                self.errors.pop(case.chatbot_id, None)
        self.errors.update(errors)
        if not errors:
            return None
        rolled = verdict.rolled_back.results if verdict.rolled_back is not None else ()
        back = {r.operation.bot.name for r in rolled if r.status == "applied"}
        text, fields = failed_news(
            report,
            source=source,
            revision=held.id,
            short=held.revision.short,
            rolled_back=back,
        )
        return TestNews(text, fields, frozenset(errors))

    def refresh(self, held: Held, state: State) -> None:
        """The gates judged again from the state as read now (CI may have written it)."""
        if self.settings.active:
            self.judge(held, state)

    def due(self, held: Held) -> bool:
        """Whether a pass at ``held`` has work the gates allow since the last: a stage open
        now that has not received it, or chatbots whose tests have not run there."""
        if not self.settings.active:
            return False
        found = self.staging
        if any(g.open and self.stage_at.get(g.stage.text) != held.id for g in found.gates):
            return True
        return any(found.admits(c) for c in self.untested)

    def next_opening(self) -> float | None:
        """When a soaking stage may receive the revision (wall-clock time)."""
        return self.staging.next_opening()

    # --- what the statuses show ------------------------------------------------------------

    def held(self, chatbot_id: str) -> str | None:
        """Why the revision is not written to the chatbot now, in words (None: it may be)."""
        if chatbot_id in self.staging.failed:
            return self.errors.get(chatbot_id) or self.staging.held(chatbot_id)
        return self.staging.held(chatbot_id)

    def failed(self, chatbot_id: str) -> bool:
        return chatbot_id in self.staging.failed

    def documents(self) -> list[dict[str, Any]]:
        """Each stage in ``/status``: its revision and its gate's result."""
        return [gate_document(g, self.stage_at.get(g.stage.text)) for g in self.staging.gates]


def _untested(gate: TestGate, state: State) -> frozenset[str]:
    """The chatbots whose tests a pass at ``gate``'s revision runs (``stages.untested``), the
    state telling which run other values than it asks."""
    ids = {b.spec.chatbot_id for b in gate.fleet.bots if b.spec.name in gate.covered}
    candidates = untested(gate.current, ids, state.rollout)
    elsewhere = {
        b.spec.chatbot_id
        for b in gate.fleet.bots
        if b.spec.chatbot_id in candidates and pending(b.spec, state) is not None
    }
    return candidates - elsewhere


__all__ = ["GATE_RESULTS", "GateSettings", "Gating", "TestNews"]
