"""Executes a Plan, and nothing else: it never re-reads YAML or recomputes the diff.

Operations of one chatbot run in order (by kind: settings first, then attributes); chatbots run
concurrently up to ``parallelism``. One chatbot's failure does not stop the others: its
remaining operations are reported "not attempted". Every outcome goes to ``on_result`` as it
happens, so the caller can record state and print progress. How each request is sent (and how
an uncertain attribute create is resolved) is its resource kind's business.

A ``Stop`` ends an apply early (the CLI triggers it on SIGINT and SIGTERM): once requested, no
operation starts, and those in flight get ``drain_timeout`` seconds to finish; a second request,
or the end of the drain, abandons them (each then failed: it may have been applied). Every
outcome, abandoned ones included, still goes to ``on_result``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Literal, Protocol, TypeVar

from botctl.defaults import DEFAULT_DRAIN_TIMEOUT
from botctl.errors import MAY_HAVE_BEEN_APPLIED, BotctlError
from botctl.plan import Operation, Plan
from botctl.resources import attributes, settings
from botctl.resources.registry import kind_of

T = TypeVar("T")
INTERRUPTED = "interrupted before it started"

ResultStatus = Literal["applied", "failed", "not_attempted"]
# What a Stop tells its owner, with the number of operations in flight at that moment.
StopEvent = Literal["stopping", "abandoning"]


class Writer(settings.SettingsWriter, attributes.AttributeWriter, Protocol):
    """The part of the service client apply uses (``botctl.service.client.ServiceClient``)."""


@dataclass(frozen=True)
class OpResult:
    operation: Operation
    status: ResultStatus
    message: str = ""


@dataclass(frozen=True)
class ApplyReport:
    results: tuple[OpResult, ...]

    def count(self, status: ResultStatus) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return all(r.status == "applied" for r in self.results)

    def written(self) -> set[str]:
        """The chatbots (ids) an operation was applied to."""
        return {r.operation.bot.chatbot_id for r in self.results if r.status == "applied"}


class Stop:
    """A request to end an apply early, and how in-flight work ends: see the module's
    docstring. ``request`` and ``abandon`` are called on the event loop's thread."""

    def __init__(
        self,
        drain_timeout: float = DEFAULT_DRAIN_TIMEOUT,
        on_event: Callable[[StopEvent, int], None] | None = None,
    ) -> None:
        self.drain_timeout = drain_timeout
        self.on_event = on_event or (lambda event, in_flight: None)
        self.armed = False  # writing has begun: from now on a request stops it gracefully
        self.reason: int | None = None  # what asked first (the CLI: a signal number)
        self.abandoned = False
        self._settled = False
        self._in_flight: set[asyncio.Task[Any]] = set()
        self._drain: asyncio.TimerHandle | None = None

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def request(self, reason: int) -> None:
        """The first request stops new work and starts the drain; the next abandons."""
        if self.requested:
            self.abandon()
            return
        self.reason = reason
        if not self._settled:
            self._drain = asyncio.get_running_loop().call_later(self.drain_timeout, self.abandon)
            self.on_event("stopping", len(self._in_flight))

    def abandon(self) -> None:
        """Give up on the work in flight now (once: a task is cancelled at most once)."""
        if self.abandoned:
            return
        self.abandoned = True
        if self._in_flight:
            self.on_event("abandoning", len(self._in_flight))
        for task in list(self._in_flight):
            task.cancel()

    def settle(self) -> None:
        """The work is over: no drain to wait for. It stays armed: a request from now on (the
        state being written) is recorded, never a reason to cut that short."""
        self._settled = True
        if self._drain is not None:
            self._drain.cancel()

    async def guard(self, work: Coroutine[Any, Any, T], abandoned: Callable[[], T]) -> T:
        """Run ``work`` in the current task; if it is abandoned meanwhile, ``abandoned()``."""
        task = asyncio.current_task()
        assert task is not None
        self._in_flight.add(task)
        try:
            return await work
        except asyncio.CancelledError:
            if not self.abandoned:
                raise  # cancelled by someone else: not ours to absorb
            task.uncancel()
            return abandoned()
        finally:
            self._in_flight.discard(task)


async def apply_plan(
    plan: Plan,
    clients: Mapping[str, Writer],
    *,
    on_result: Callable[[OpResult], None],
    parallelism: int,
    stop: Stop | None = None,
) -> ApplyReport:
    gate = asyncio.Semaphore(max(1, parallelism))
    groups = [list(ops) for _, ops in groupby(plan.operations, key=lambda op: op.bot.chatbot_id)]
    stop = stop if stop is not None else Stop()

    # One chatbot's work raised (``on_result`` could not record: the state lost its
    # compare-and-swap, the agent its lease): the apply ends there, and with it every other
    # chatbot's: none starts an operation from then on, none is left sending on its own.
    halted: list[BaseException] = []

    async def run_bot(ops: Sequence[Operation]) -> list[OpResult]:
        async with gate:
            if halted:
                return []
            try:
                client = clients[ops[0].bot.api_key_env]
                return await _apply_bot(ops, client, on_result, stop, halted)
            except BaseException as exc:
                halted.append(exc)
                raise

    tasks = [asyncio.ensure_future(run_bot(ops)) for ops in groups]
    try:
        per_bot = await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise
    order = {id(op): i for i, op in enumerate(plan.operations)}
    results = sorted((r for rs in per_bot for r in rs), key=lambda r: order[id(r.operation)])
    return ApplyReport(tuple(results))


async def _apply_bot(
    ops: Sequence[Operation],
    client: Writer,
    on_result: Callable[[OpResult], None],
    stop: Stop,
    halted: Sequence[BaseException],
) -> list[OpResult]:
    results: list[OpResult] = []
    failed: OpResult | None = None
    for op in ops:
        if halted:
            break
        if failed is not None:
            result = OpResult(op, "not_attempted", f"after {failed.operation.label} failed")
        elif stop.requested:
            result = OpResult(op, "not_attempted", INTERRUPTED)
        else:
            result = await stop.guard(_run(op, client), functools.partial(_abandoned, op))
            if result.status == "failed":
                failed = result
        on_result(result)
        results.append(result)
    return results


def _abandoned(op: Operation) -> OpResult:
    return OpResult(op, "failed", f"abandoned in flight when interrupted: {MAY_HAVE_BEEN_APPLIED}")


async def _run(op: Operation, client: Writer) -> OpResult:
    try:
        note = await kind_of(op.resource).send(op, client)
    except BotctlError as exc:
        return OpResult(op, "failed", str(exc))
    return OpResult(op, "applied", note)
