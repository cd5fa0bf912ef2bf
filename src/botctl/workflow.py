"""The stages wired together for each command: load -> read -> diff -> (apply -> record).

No printing here: progress goes to the callbacks the CLI passes, so the same flows serve
``botctl plan/apply/drift`` and the demo.
"""

from __future__ import annotations

import contextlib
import difflib
import gc
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from botctl.apply import ApplyReport, OpResult, apply_plan
from botctl.client import ReadsUnavailable, ServiceClient
from botctl.diff import compute_plan, same_value
from botctl.drift import DriftReport, compute_drift
from botctl.errors import BotctlError, SafetyCapError, ServiceError, StalePlanError
from botctl.live import read_live
from botctl.models import BotSpec, Desired, Live, LiveBot, flatten
from botctl.plan import BotRef, Plan, SafetyPolicy
from botctl.service import ServiceOptions, connect
from botctl.spec import load_desired
from botctl.state import State, StateLock, StateWriter, load_state


@dataclass(frozen=True)
class Workspace:
    paths: Sequence[Path]
    environ: Mapping[str, str]
    state_path: Path
    service: ServiceOptions = field(default_factory=ServiceOptions)
    targets: tuple[str, ...] = ()
    allow_unknown_models: bool = False
    parallelism: int = 8
    lock_timeout: float = 0.0
    policy: SafetyPolicy = field(default_factory=SafetyPolicy)
    force: bool = False  # accept a plan that exceeds the safety caps
    # Values marked ${secret:...} once the configuration is loaded, for masking debug traces.
    secrets: set[str] = field(default_factory=set)


@dataclass(frozen=True)
class ApplyOutcome:
    plan: Plan
    report: ApplyReport
    not_taken: tuple[str, ...]  # values the service did not keep as sent


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Loading and planning allocate several objects per YAML value or change and keep them
    all until they return, so the cycle collector would scan the ever larger heap again and
    again and free nothing: a third of loading's time and half of planning's for 10,000
    attributes. Reference counting frees memory as usual meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load(ws: Workspace) -> Desired:
    with collector_paused():
        desired = load_desired(
            list(ws.paths), environ=ws.environ, allow_unknown_models=ws.allow_unknown_models
        )
    ws.secrets.update(value for bot in desired.bots for value in bot.secret_values)
    if not ws.targets:
        return desired
    names = [bot.name for bot in desired.bots]
    unknown = [t for t in ws.targets if t not in names]
    if unknown:
        hints = []
        for target in unknown:
            close = difflib.get_close_matches(target, names, n=1)
            hints.append(f"{target!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
        raise BotctlError(
            "--target names no chatbot of the configuration: "
            + ", ".join(hints)
            + f"; known: {', '.join(names)}"
        )
    kept = tuple(bot for bot in desired.bots if bot.name in ws.targets)
    return desired.model_copy(update={"bots": kept})


def refs_of(bots: Sequence[BotSpec]) -> list[BotRef]:
    return [BotRef(b.name, b.chatbot_id, b.api_key_env) for b in bots]


async def _read(
    bots: Sequence[BotSpec], clients: Mapping[str, ServiceClient], ws: Workspace
) -> Live:
    return await read_live(bots, clients, concurrency=ws.parallelism)


async def make_plan(ws: Workspace) -> Plan:
    desired = load(ws)
    state = load_state(ws.state_path)
    async with connect(refs_of(desired.bots), ws.environ, ws.service) as clients:
        live = await _read(desired.bots, clients, ws)
    return _compute_plan(desired, live, state, ws)


def _compute_plan(desired: Desired, live: Live, state: State, ws: Workspace) -> Plan:
    with collector_paused():
        return compute_plan(desired, live, state, ws.policy)


def enforce_safety(plan: Plan, ws: Workspace) -> None:
    if plan.violations and not ws.force:
        raise SafetyCapError(
            "the plan exceeds the safety caps; nothing was applied:\n"
            + "\n".join(f"  - {v}" for v in plan.violations)
            + "\nIf this is intended, pass --force, or raise the cap for one chatbot with "
            "spec.safety.maxArchivePercent in its document."
        )


async def make_drift(ws: Workspace) -> DriftReport:
    desired = load(ws)
    state = load_state(ws.state_path)
    async with connect(refs_of(desired.bots), ws.environ, ws.service) as clients:
        live = await _read(desired.bots, clients, ws)
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
        async with connect(refs_of(bots), ws.environ, ws.service) as clients:
            live = await _read(bots, clients, ws)
            if desired is not None:
                plan = _compute_plan(desired, live, state, ws)
            else:
                assert saved is not None
                check_fresh(saved, live, state.serial if state.lineage else None, state.lineage)
                plan = saved
            show(plan)
            if plan.empty:
                return None
            enforce_safety(plan, ws)
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
    written = {r.operation.chatbot_id for r in report.results if r.status == "applied"}
    touched = [b for b in bots if b.chatbot_id in written]
    if not touched:
        return []
    try:
        after = await _read(touched, clients, ws)
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
            except ReadsUnavailable:
                raise BotctlError(
                    "this service does not offer the chatbot list (GET /get-chatbots): "
                    "export needs it"
                ) from None
            chatbot_ids = sorted(str(r.get("id") or r.get("chatbotId") or "") for r in records)
            chatbot_ids = [c for c in chatbot_ids if c]
        bots = [BotSpec(name=c, chatbot_id=c, api_key_env=api_key_env) for c in chatbot_ids]
        live = await read_live(bots, clients)
    missing = [c for c in chatbot_ids if not live.bots[c].exists]
    if missing:
        raise BotctlError(f"no such chatbot in the account of ${api_key_env}: {', '.join(missing)}")
    unreadable = [c for c in chatbot_ids if not live.bots[c].settings_readable]
    if unreadable and len(unreadable) == len(chatbot_ids):
        raise BotctlError(
            "this service does not offer reads (GET /get-chatbots): nothing to export"
        )
    return [live.bots[c] for c in chatbot_ids]


def check_fresh(plan: Plan, live: Live, serial: int | None, lineage: str | None) -> None:
    """Refuse a saved plan whose premises moved: the state, or any verified live value."""
    if plan.state_lineage is not None and lineage != plan.state_lineage:
        raise StalePlanError(
            "the plan was made against another state lineage (a different or recreated state "
            "file); make a new plan"
        )
    if plan.state_serial != serial:
        raise StalePlanError(
            f"the state changed since the plan was made (serial {plan.state_serial} -> "
            f"{serial}): another apply ran; make a new plan"
        )
    moved = []
    for dep in plan.depends_on:
        bot = live.bots.get(dep.chatbot_id)
        if dep.resource == "settings":
            observed = flatten(bot.settings) if bot and bot.settings_readable else {}
            now = observed.get(dep.key)
        else:
            attrs = bot.attributes if bot else None
            now = attrs[dep.key].to_json() if attrs and dep.key in attrs else None
        if not same_value(now, dep.value):
            moved.append(f"{dep.chatbot_id} {dep.resource} {dep.key}: {dep.value!r} -> {now!r}")
    if moved:
        raise StalePlanError(
            "the service changed since the plan was made; nothing was written. Moved:\n"
            + "\n".join(f"  - {m}" for m in moved)
            + "\nMake a new plan and review it again."
        )


def verify_applied(report: ApplyReport, live: Live) -> list[str]:
    """After writing, compare what can be read back with what was sent."""
    notes = []
    for result in report.results:
        op = result.operation
        bot = live.bots.get(op.chatbot_id)
        if result.status != "applied" or bot is None:
            continue
        if op.kind == "update_settings" and bot.settings_readable:
            observed = flatten(bot.settings)
            for key, sent in flatten(op.record).items():
                if key in observed and not same_value(observed[key], sent):
                    notes.append(
                        f"{op.bot}: settings {key} was sent as {sent!r} but reads "
                        f"back as {observed[key]!r}"
                    )
        elif op.kind != "update_settings" and bot.attributes is not None:
            now = bot.attributes.get(op.key)
            if now is None:
                notes.append(f"{op.bot}: attribute {op.key} was written but is not listed")
                continue
            for key, sent in op.record.items():
                if not same_value(now.to_json().get(key), sent):
                    notes.append(
                        f"{op.bot}: attribute {op.key} {key} was sent as {sent!r} "
                        f"but reads back as {now.to_json().get(key)!r}"
                    )
    return notes
