"""Executes a Plan, and nothing else: it never re-reads YAML or recomputes the diff.

Operations of one chatbot run in order (settings first, then attributes); chatbots run
concurrently up to ``parallelism``. One chatbot's failure does not stop the others: its
remaining operations are reported "not attempted". Every outcome goes to ``on_result`` as it
happens, so the caller can record state and print progress. How each request is sent (and how
an uncertain attribute create is resolved) is its resource kind's business.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Literal, Protocol

from botctl.errors import BotctlError
from botctl.plan import Operation, Plan
from botctl.resources import attributes, settings

ResultStatus = Literal["applied", "failed", "not_attempted"]


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


async def apply_plan(
    plan: Plan,
    clients: Mapping[str, Writer],
    *,
    on_result: Callable[[OpResult], None],
    parallelism: int,
) -> ApplyReport:
    gate = asyncio.Semaphore(max(1, parallelism))
    groups = [list(ops) for _, ops in groupby(plan.operations, key=lambda op: op.bot.chatbot_id)]

    async def run_bot(ops: Sequence[Operation]) -> list[OpResult]:
        async with gate:
            return await _apply_bot(ops, clients[ops[0].bot.api_key_env], on_result)

    per_bot = await asyncio.gather(*(run_bot(ops) for ops in groups))
    order = {id(op): i for i, op in enumerate(plan.operations)}
    results = sorted((r for rs in per_bot for r in rs), key=lambda r: order[id(r.operation)])
    return ApplyReport(tuple(results))


async def _apply_bot(
    ops: Sequence[Operation], client: Writer, on_result: Callable[[OpResult], None]
) -> list[OpResult]:
    results: list[OpResult] = []
    failed: OpResult | None = None
    for op in ops:
        if failed is not None:
            result = OpResult(op, "not_attempted", f"after {failed.operation.label} failed")
        else:
            result = await _run(op, client)
            if result.status == "failed":
                failed = result
        on_result(result)
        results.append(result)
    return results


async def _run(op: Operation, client: Writer) -> OpResult:
    try:
        if op.resource == "settings":
            note = await settings.send(op, client)
        else:
            note = await attributes.send(op, client)
    except BotctlError as exc:
        return OpResult(op, "failed", str(exc))
    return OpResult(op, "applied", note)
