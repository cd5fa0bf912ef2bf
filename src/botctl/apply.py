"""Executes a Plan, and nothing else: it never re-reads YAML or recomputes the diff.

Operations of one chatbot run in order (settings first, then attributes); chatbots run
concurrently up to ``parallelism``. One chatbot's failure does not stop the others: its
remaining operations are reported "not attempted". Every outcome goes to ``on_result`` as it
happens, so the caller can record state and print progress.

An attribute create is the one write that is not idempotent. When its outcome is unknown (a
timeout, a dropped connection, a 5xx), botctl looks before it tries again: it reads the
attribute list, or where the service has no reads, probes with an update (200: it exists,
404: it does not). So no attribute is ever created twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Literal, Protocol

from botctl.errors import ApiError, BotctlError, ServiceError, TransportError
from botctl.plan import Operation, Plan

ResultStatus = Literal["applied", "failed", "not_attempted"]
CREATE_ATTEMPTS = 3


class AttributeWriter(Protocol):
    """The part of the service client apply uses (``botctl.client.ServiceClient``)."""

    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None: ...

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]: ...


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
    clients: Mapping[str, AttributeWriter],
    *,
    on_result: Callable[[OpResult], None],
    parallelism: int = 8,
) -> ApplyReport:
    gate = asyncio.Semaphore(max(1, parallelism))
    groups = [list(ops) for _, ops in groupby(plan.operations, key=lambda op: op.chatbot_id)]

    async def run_bot(ops: Sequence[Operation]) -> list[OpResult]:
        async with gate:
            return await _apply_bot(ops, clients[ops[0].api_key_env], on_result)

    per_bot = await asyncio.gather(*(run_bot(ops) for ops in groups))
    order = {id(op): i for i, op in enumerate(plan.operations)}
    results = sorted((r for rs in per_bot for r in rs), key=lambda r: order[id(r.operation)])
    return ApplyReport(tuple(results))


async def _apply_bot(
    ops: Sequence[Operation], client: AttributeWriter, on_result: Callable[[OpResult], None]
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


async def _run(op: Operation, client: AttributeWriter) -> OpResult:
    handlers: dict[str, Callable[[Operation, AttributeWriter], Awaitable[str]]] = {
        "update_settings": _update_settings,
        "create_attribute": _create_attribute,
        "ensure_attribute": _ensure_attribute,
        "update_attribute": _update_attribute,
    }
    try:
        note = await handlers[op.kind](op, client)
    except BotctlError as exc:
        return OpResult(op, "failed", str(exc))
    return OpResult(op, "applied", note)


async def _update_settings(op: Operation, client: AttributeWriter) -> str:
    await client.update_settings(op.chatbot_id, dict(op.body))
    return "fields " + ", ".join(sorted(op.body))


async def _update_attribute(op: Operation, client: AttributeWriter) -> str:
    await client.update_attribute(op.chatbot_id, op.key, dict(op.body))
    return ""


def _update_body(create: dict[str, Any]) -> dict[str, Any]:
    """The update that makes an existing attribute as a create body describes it."""
    body = {k: create[k] for k in ("label", "description") if create.get(k) is not None}
    body["archived"] = bool(create.get("archived"))
    return body


async def _ensure_attribute(op: Operation, client: AttributeWriter) -> str:
    """Existence unknown (no reads, no state): update its managed fields, create it on 404."""
    if await _probe_update(op, client, dict(op.body)):
        return "existed; updated (its type could not be verified)"
    return await _create(op, client, dict(op.fallback or {}))


async def _probe_update(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> bool:
    try:
        await client.update_attribute(op.chatbot_id, op.key, body)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    return True


def _is_ambiguous(exc: ServiceError) -> bool:
    if isinstance(exc, TransportError):
        return exc.outcome_unknown
    return isinstance(exc, ApiError) and exc.status >= 500


async def _create_attribute(op: Operation, client: AttributeWriter) -> str:
    return await _create(op, client, dict(op.body))


async def _create(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> str:
    ambiguous_before = False
    last: ServiceError | None = None
    for _ in range(CREATE_ATTEMPTS):
        try:
            await client.create_attribute(op.chatbot_id, body)
        except ServiceError as exc:
            duplicate_after_doubt = (
                ambiguous_before and isinstance(exc, ApiError) and exc.status == 400
            )
            if not (_is_ambiguous(exc) or duplicate_after_doubt):
                raise
            last, ambiguous_before = exc, True
            if await _exists_after_doubt(op, client, body):
                return "created (confirmed by reading back after an uncertain answer)"
            continue
        return "confirmed after retry" if ambiguous_before else ""
    assert last is not None
    raise last


async def _exists_after_doubt(op: Operation, client: AttributeWriter, body: dict[str, Any]) -> bool:
    """After an uncertain create: is the attribute there? If so, make it as declared."""
    wanted = _update_body(body)
    try:
        listed = await client.list_attributes(op.chatbot_id)
    except ApiError as exc:
        if exc.status in (404, 405, 501):
            return await _probe_update(op, client, wanted)
        raise
    found = next((a for a in listed if a.get("name") == op.key), None)
    if found is None:
        return False
    if found.get("type") != body.get("type"):
        raise ApiError(
            f"create attribute {op.key}",
            400,
            f"an attribute {op.key!r} of type {found.get('type')!r} already exists",
            chatbot_id=op.chatbot_id,
        )
    if any(found.get(k) != v for k, v in wanted.items()):
        await client.update_attribute(op.chatbot_id, op.key, wanted)
    return True
