"""``botctl test``'s flow, and ``apply --test``'s gate (``TestGate``: the reconciler's gate
phase): the selected chatbots' conversation tests, run through the chat operation
(``botctl.conversation``)."""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from botctl.config.conversation import ConversationTest
from botctl.config.resolve import Fleet
from botctl.config.revision import revisions
from botctl.config.selection import Selection
from botctl.conversation.report import TestReport
from botctl.conversation.run import Chat, ChatRequest, run_tests
from botctl.errors import BotctlError
from botctl.models import BotSpec, State
from botctl.pipeline.flows import _refs, _service
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.plan import Operation, Plan
from botctl.reconcile.apply import ApplyReport, OpResult
from botctl.reconcile.rollback import Rollback, plan_rollback
from botctl.resources.registry import kind_of
from botctl.resources.rollout import Rollout
from botctl.service.client import ServiceClient
from botctl.service.connect import connect
from botctl.service.sse import ChatAnswer

if TYPE_CHECKING:  # `botctl test` never loads the reconciler
    from botctl.pipeline.reconciler import Applied


def chosen_tests(fleet: Fleet, names: Sequence[str] = ()) -> tuple[ConversationTest, ...]:
    """The fleet's tests, only those whose name matches one of ``names`` (globs) if given;
    a pattern that matches no test is an error (a typo must not pass as "no tests")."""
    if not names:
        return fleet.tests
    unmatched = [n for n in names if not any(fnmatch.fnmatchcase(t.name, n) for t in fleet.tests)]
    if unmatched:
        known = ", ".join(t.name for t in fleet.tests) or "none"
        raise BotctlError(
            f"--test {', '.join(unmatched)}: matches no conversation test (tests: {known})"
        )
    return tuple(t for t in fleet.tests if any(fnmatch.fnmatchcase(t.name, n) for n in names))


def key_values(bots: Sequence[BotSpec], environ: Mapping[str, str]) -> set[str]:
    """The API keys of the chatbots' accounts: masked in anything quoted from an answer."""
    return {environ[b.api_key_env] for b in bots if environ.get(b.api_key_env)}


def masked_values(ws: Workspace, bots: Sequence[BotSpec]) -> set[str]:
    """What no quote of an answer may show: the configuration's secrets and the keys."""
    return {*ws.secrets, *key_values(bots, ws.environ)}


def judges_of(fleet: Fleet, tests: Sequence[ConversationTest]) -> dict[str, BotSpec]:
    """The chatbots the tests' ``expect.judge`` names, by ``metadata.name``, selected for the
    run or not (``fleet``: the whole configuration)."""
    names = {name for test in tests for name in test.judges}
    return {b.spec.name: b.spec for b in fleet.bots if b.spec.name in names}


def chat_through(clients: Mapping[str, ServiceClient]) -> Chat:
    """The chat function of a run: each request through its chatbot's account's client."""

    async def chat(request: ChatRequest) -> ChatAnswer:
        client = clients[request.bot.api_key_env]
        return await client.chat(
            request.bot.chatbot_id,
            request.messages,
            stream=request.stream,
            model=request.model,
            temperature=request.temperature,
            conversation_id=request.conversation_id,
        )

    return chat


async def test_with(
    clients: Mapping[str, ServiceClient],
    tests: Sequence[ConversationTest],
    bots: Sequence[BotSpec],
    ws: Workspace,
    judges: Mapping[str, BotSpec],
) -> TestReport:
    """Run ``tests`` against ``bots`` through already connected ``clients``; the judges'
    accounts without a client get one for the run."""
    missing = [j for j in judges.values() if j.api_key_env not in clients]
    async with contextlib.AsyncExitStack() as stack:
        if missing:
            more = await stack.enter_async_context(
                connect(_refs(missing), ws.environ, _service(ws, missing))
            )
            clients = {**more, **clients}
        return await run_tests(
            tests,
            bots,
            chat_through(clients),
            parallelism=ws.parallelism,
            secrets=masked_values(ws, [*bots, *judges.values()]),
            judges=judges,
        )


def whole_and_selected(ws: Workspace) -> tuple[Fleet, Fleet]:
    """The whole configuration (judges and baselines may lie outside the selection), and the
    selected part of it."""
    whole = load_resolved(replace(ws, selection=Selection()))
    return whole, whole.selected(ws.selection)


async def run_conversation_tests(ws: Workspace, names: Sequence[str] = ()) -> TestReport:
    """``botctl test``: the selected chatbots' tests (``names``: only those tests)."""
    whole, fleet = whole_and_selected(ws)
    tests = chosen_tests(fleet, names)
    bots = [b.spec for b in fleet.bots]
    tested = {name for t in tests for name in t.chatbots}
    covered = [b for b in bots if b.name in tested]
    if not covered:
        return TestReport((), tuple(b.name for b in bots))
    judges = judges_of(whole, tests)
    async with connect(_refs(covered), ws.environ, _service(ws, covered)) as clients:
        report = await test_with(clients, tests, covered, ws, judges)
    return TestReport(report.cases, tuple(b.name for b in bots if b.name not in tested))


@dataclass(frozen=True)
class Verdict:
    """What ``apply --test``'s gate found after the apply: the tests of the chatbots it
    changed, and with ``--rollback-on-failure`` what it put back (and could not) on those
    that failed."""

    tests: TestReport
    rollback: Rollback | None = None
    rolled_back: ApplyReport | None = None


class TestGate:
    """``apply --test``: the reconciler's gate phase (``pipeline.reconciler.Gate``). It
    admits every plan; once an apply is complete (or there was nothing to apply), it runs the
    tests of the chatbots the apply changed, and of those whose tests have not passed at this
    revision, records each chatbot's outcome in the state (``promote`` reads it) and, with
    ``rollback``, puts back what a chatbot whose tests failed had before.

    The configuration's tests are loaded when the gate is made, so a broken test fails the
    run before anything is applied. Another check (a stage's, a deny window's ``admit``) is
    another gate: the reconciler asks only these two questions."""

    __test__ = False  # not a pytest class, whatever its name

    def __init__(
        self, ws: Workspace, names: Sequence[str], *, rollback: bool, within_plan: bool = False
    ) -> None:
        whole, self.fleet = whole_and_selected(ws)
        self.ws = ws
        self.rollback = rollback
        # The agent's passes: only the chatbots of the pass's plan (a stage not reached yet
        # runs the revision before: its tests would speak for a revision it does not have).
        self.within_plan = within_plan
        self.tests = chosen_tests(self.fleet, names)
        self.covered = {name for t in self.tests for name in t.chatbots}
        self.current = revisions(self.fleet)
        self.judges = judges_of(whole, self.tests)

    def admit(self, plan: Plan, state: State) -> str | None:
        return None

    async def check(self, applied: Applied) -> Verdict:
        bots = self._tested(applied)
        report = await test_with(applied.clients, self.tests, bots, self.ws, self.judges)
        _record_outcome(applied, report, bots, self.current)
        failed = set(report.failed_chatbots())
        if not self.rollback or not failed:
            return Verdict(report)
        ids = {b.chatbot_id for b in bots if b.name in failed}
        planned = plan_rollback(applied.report, ids, applied.previous)
        done = await _send_rollback(planned.operations, applied)
        return Verdict(report, planned, done)

    def _tested(self, applied: Applied) -> list[BotSpec]:
        """The chatbots the apply changed, and those covered by a test whose record is not
        "passed at this revision" (``within_plan``: of the plan's chatbots only)."""
        changed = {r.operation.bot.chatbot_id for r in applied.report.results}
        rollout = applied.writer.state.rollout
        planned = {b.chatbot_id for b in applied.plan.bots}

        def due(spec: BotSpec) -> bool:
            if self.within_plan and spec.chatbot_id not in planned:
                return False
            passed = Rollout(self.current[spec.chatbot_id], True)
            covered = spec.name in self.covered
            return spec.chatbot_id in changed or (
                covered and rollout.get(spec.chatbot_id) != passed
            )

        return [b.spec for b in self.fleet.bots if due(b.spec)]


def _record_outcome(
    applied: Applied, report: TestReport, bots: Sequence[BotSpec], current: Mapping[str, str]
) -> None:
    """Each tested chatbot's record of staged rollout: this revision, and whether all its
    tests passed (``botctl promote`` reads it)."""
    outcome: dict[str, bool] = {}
    for case in report.cases:
        outcome[case.chatbot_id] = outcome.get(case.chatbot_id, True) and case.status == "passed"
    for bot in bots:
        if bot.chatbot_id in outcome:
            revision = current[bot.chatbot_id]
            applied.writer.state.rollout[bot.chatbot_id] = Rollout(
                revision, outcome[bot.chatbot_id]
            )
            applied.writer.state.record(bot.ref)
            applied.writer.touched(bot.chatbot_id, f"{bot.chatbot_id}: tests at {revision}")
    applied.writer.flush()


async def _send_rollback(operations: Sequence[Operation], applied: Applied) -> ApplyReport:
    """Send each chatbot's restoring settings update and record each that succeeded."""

    async def send(op: Operation) -> OpResult:
        try:
            message = await kind_of(op.resource).send(op, applied.clients[op.bot.api_key_env])
        except BotctlError as exc:
            return OpResult(op, "failed", str(exc))
        applied.writer.record(op)
        return OpResult(op, "applied", message)

    results = await asyncio.gather(*(send(op) for op in operations))
    applied.writer.flush()
    return ApplyReport(tuple(results))
