"""``botctl test``'s flow, and the tests ``apply --test`` runs after an apply: the selected
chatbots' conversation tests, run through the chat operation (``botctl.conversation``)."""

from __future__ import annotations

import asyncio
import fnmatch
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

from botctl.config.conversation import ConversationTest
from botctl.config.resolve import Fleet
from botctl.config.revision import revisions
from botctl.conversation.report import TestReport
from botctl.conversation.run import ChatRequest, run_tests
from botctl.errors import BotctlError
from botctl.models import BotSpec
from botctl.pipeline.flows import Applied, _refs, _service
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.plan import Operation
from botctl.reconcile.apply import ApplyReport, OpResult
from botctl.reconcile.rollback import Rollback, plan_rollback
from botctl.resources.registry import kind_of
from botctl.resources.rollout import Rollout
from botctl.service.client import ServiceClient
from botctl.service.connect import connect
from botctl.service.sse import ChatAnswer


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


async def test_with(
    clients: Mapping[str, ServiceClient],
    tests: Sequence[ConversationTest],
    bots: Sequence[BotSpec],
    ws: Workspace,
) -> TestReport:
    """Run ``tests`` against ``bots`` through already connected ``clients``."""

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

    secrets = {*ws.secrets, *key_values(bots, ws.environ)}
    return await run_tests(tests, bots, chat, parallelism=ws.parallelism, secrets=secrets)


async def run_conversation_tests(ws: Workspace, names: Sequence[str] = ()) -> TestReport:
    """``botctl test``: the selected chatbots' tests (``names``: only those tests)."""
    fleet = load_resolved(ws)
    tests = chosen_tests(fleet, names)
    bots = [b.spec for b in fleet.bots]
    tested = {name for t in tests for name in t.chatbots}
    covered = [b for b in bots if b.name in tested]
    if not covered:
        return TestReport((), tuple(b.name for b in bots))
    async with connect(_refs(covered), ws.environ, _service(ws, covered)) as clients:
        report = await test_with(clients, tests, covered, ws)
    return TestReport(report.cases, tuple(b.name for b in bots if b.name not in tested))


@dataclass(frozen=True)
class Gate:
    """What ``apply --test`` did after the apply: the tests of the chatbots it changed, and
    with ``--rollback-on-failure`` what it put back (and could not) on those that failed."""

    tests: TestReport
    rollback: Rollback | None = None
    rolled_back: ApplyReport | None = None


def test_gate(
    ws: Workspace, names: Sequence[str], *, rollback: bool
) -> Callable[[Applied], Awaitable[Gate]]:
    """The step ``run_apply`` runs after a complete apply (``apply --test``). The
    configuration's tests are loaded now, so a broken test fails the run before anything
    is applied."""
    fleet = load_resolved(ws)
    tests = chosen_tests(fleet, names)
    covered = {name for t in tests for name in t.chatbots}
    current = revisions(fleet)

    async def gate(applied: Applied) -> Gate:
        changed = {r.operation.bot.chatbot_id for r in applied.report.results}
        rollout = applied.writer.state.rollout
        bots = [
            b.spec
            for b in fleet.bots
            if b.spec.chatbot_id in changed
            or (
                b.spec.name in covered
                and rollout.get(b.spec.chatbot_id) != Rollout(current[b.spec.chatbot_id], True)
            )
        ]
        report = await test_with(applied.clients, tests, bots, ws)
        _record_outcome(applied, report, bots, current)
        failed = set(report.failed_chatbots())
        if not rollback or not failed:
            return Gate(report)
        ids = {b.chatbot_id for b in bots if b.name in failed}
        planned = plan_rollback(applied.report, ids, applied.previous)
        done = await _send_rollback(planned.operations, applied)
        return Gate(report, planned, done)

    return gate


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
