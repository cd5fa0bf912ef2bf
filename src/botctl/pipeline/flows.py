"""The commands' pipelines: plan, drift, apply (with its lock, state recording and read-back),
and the reads of export."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from botctl.defaults import DEFAULT_PARALLELISM
from botctl.errors import BotctlError, ReadsUnavailable, ServiceError
from botctl.models import BotSpec, Desired, Live, LiveBot, State
from botctl.pipeline.workspace import Workspace, collector_paused, load
from botctl.plan import BotRef, Plan
from botctl.reconcile.apply import ApplyReport, OpResult, apply_plan
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import DriftReport, compute_drift
from botctl.reconcile.freshness import check_fresh, verify_applied
from botctl.reconcile.safety import enforce_safety
from botctl.service.client import ServiceClient
from botctl.service.connect import connect
from botctl.service.live import read_live
from botctl.service.options import ServiceOptions
from botctl.store.lock import StateLock
from botctl.store.state import StateWriter, load_state


@dataclass(frozen=True)
class ApplyOutcome:
    plan: Plan
    report: ApplyReport
    not_taken: tuple[str, ...]  # values the service did not keep as sent


async def make_plan(ws: Workspace) -> Plan:
    desired = load(ws)
    state = load_state(ws.state_path)
    async with connect(_refs(desired.bots), ws.environ, ws.service) as clients:
        live = await read_live(desired.bots, clients, concurrency=ws.parallelism)
    return _compute_plan(desired, live, state, ws)


def _compute_plan(desired: Desired, live: Live, state: State, ws: Workspace) -> Plan:
    with collector_paused():
        return compute_plan(desired, live, state, ws.policy)


async def make_drift(ws: Workspace) -> DriftReport:
    desired = load(ws)
    state = load_state(ws.state_path)
    async with connect(_refs(desired.bots), ws.environ, ws.service) as clients:
        live = await read_live(desired.bots, clients, concurrency=ws.parallelism)
    with collector_paused():
        return compute_drift(desired, live, state)


async def run_apply(
    ws: Workspace,
    *,
    saved: Plan | None,
    show: Callable[[Plan], None],
    confirm: Callable[[Plan], bool],
    on_result: Callable[[OpResult], None],
) -> ApplyOutcome | None:
    """Plan (or take the saved plan), show it, check the safety caps, ask ``confirm``, apply,
    record state, verify. Returns None when the plan was empty or not confirmed."""
    desired = load(ws) if saved is None else None
    if saved is not None:
        ws.secrets.update(saved.secrets)
    bots = list(desired.bots) if desired is not None else _bots_of(saved)
    with StateLock(ws.state_path, timeout=ws.lock_timeout):
        state = load_state(ws.state_path)
        async with connect(_refs(bots), ws.environ, ws.service) as clients:
            live = await read_live(bots, clients, concurrency=ws.parallelism)
            if desired is not None:
                plan = _compute_plan(desired, live, state, ws)
            else:
                assert saved is not None
                check_fresh(saved, live, state.serial if state.lineage else None, state.lineage)
                plan = saved
            show(plan)
            if plan.empty:
                return None
            enforce_safety(plan, force=ws.force)
            if not confirm(plan):
                return None
            report = await _apply_recording(plan, clients, state, ws, on_result)
            notes = await _read_back(report, bots, clients, ws)
    return ApplyOutcome(plan, report, tuple(notes))


async def apply_unattended(
    ws: Workspace, on_result: Callable[[OpResult], None] = lambda _: None
) -> ApplyOutcome | None:
    """``apply --auto-approve``, as the demo, benchmarks and tests drive it."""
    return await run_apply(
        ws, saved=None, show=lambda _: None, confirm=lambda _: True, on_result=on_result
    )


def _refs(bots: Sequence[BotSpec]) -> list[BotRef]:
    return [bot.ref for bot in bots]


def _bots_of(saved: Plan | None) -> list[BotSpec]:
    refs = saved.bots if saved is not None else ()
    return [BotSpec(name=r.name, chatbot_id=r.chatbot_id, api_key_env=r.api_key_env) for r in refs]


async def _apply_recording(
    plan: Plan,
    clients: Mapping[str, ServiceClient],
    state: State,
    ws: Workspace,
    on_result: Callable[[OpResult], None],
) -> ApplyReport:
    """Apply, recording each success in the state file as it happens (coalesced)."""
    writer = StateWriter(state, ws.state_path)

    def record(result: OpResult) -> None:
        if result.status == "applied":
            writer.record(result.operation)
        on_result(result)

    try:
        return await apply_plan(plan, clients, on_result=record, parallelism=ws.parallelism)
    finally:
        writer.flush()


async def _read_back(
    report: ApplyReport,
    bots: Sequence[BotSpec],
    clients: Mapping[str, ServiceClient],
    ws: Workspace,
) -> list[str]:
    """Re-read the chatbots written to and compare. A failing read only costs the check: the
    writes are done and recorded, so it must not turn the apply into an error."""
    written = {r.operation.bot.chatbot_id for r in report.results if r.status == "applied"}
    touched = [b for b in bots if b.chatbot_id in written]
    if not touched:
        return []
    try:
        after = await read_live(touched, clients, concurrency=ws.parallelism)
    except ServiceError as exc:
        return [f"could not read back to verify: {exc}"]
    return verify_applied(report, after)


async def read_for_export(
    chatbot_ids: list[str], api_key_env: str, environ: Mapping[str, str], options: ServiceOptions
) -> list[LiveBot]:
    """Read chatbots to export: the ids given, or every chatbot of the account."""
    ref = BotRef("export", "", api_key_env)
    async with connect([ref], environ, options) as clients:
        client = clients[api_key_env]
        if not chatbot_ids:
            try:
                records = await client.list_chatbots()
            except ReadsUnavailable as exc:
                raise BotctlError(f"export needs the chatbot list: {exc}") from None
            chatbot_ids = sorted(str(r.get("id") or r.get("chatbotId") or "") for r in records)
            chatbot_ids = [c for c in chatbot_ids if c]
        bots = [BotSpec(name=c, chatbot_id=c, api_key_env=api_key_env) for c in chatbot_ids]
        live = await read_live(bots, clients, concurrency=DEFAULT_PARALLELISM)
    missing = [c for c in chatbot_ids if not live.bots[c].exists]
    if missing:
        raise BotctlError(f"no such chatbot in the account of ${api_key_env}: {', '.join(missing)}")
    if chatbot_ids and all(live.bots[c].settings is None for c in chatbot_ids):
        raise BotctlError(
            "export needs the chatbot list (GET /get-chatbots), and this service does not "
            "offer it: nothing to export"
        )
    return [live.bots[c] for c in chatbot_ids]
