"""The reconciler: one pass from the configuration to the service, in named phases.

    load → read → plan → gate → apply → verify → record

- load: the configuration, resolved and selected (``Loaded``: once per revision);
- read: the state (under its lock, or the lease a driver holds), the chatbots in scope
  (``--changed-since``, or the driver's ``scoper``), the service's view of them;
- plan: the plan (contacts counted), or a saved plan checked still true;
- gate: whether the plan goes ahead (a missing chatbot, the safety caps, renames that may
  not read, the gate's ``admit``, the driver's confirmation) and, once applied, whether what
  was applied stays (the gate's ``check``: ``apply --test``'s tests and their rollback);
- apply: the operations, each success recorded in the state as it happens;
- verify: the chatbots written to, and only those, read back: what reads back as sent is
  recorded as verified, the rest reported;
- record: the staged-rollout records, the state's last write, the ``Outcome``.

Two drivers run it: ``botctl apply`` (``cli/apply.py``: a terminal to confirm on, progress
lines, signals) and the agent (``agent/loop.py``: its lease, a scope per revision, statuses
from the outcome). A driver is what the reconciler asks (``Driver``); a gate is what may hold
a plan back or judge what was applied (``Gate``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from botctl.config.resolve import Fleet
from botctl.errors import PlanError, ServiceError
from botctl.models import BotSpec, Desired, Live, State
from botctl.pipeline.flows import (
    _choose_encryption,
    _counted_plan,
    _protect,
    _record,
    _refs,
    _require_key,
    _service,
)
from botctl.pipeline.outcome import NOTHING, Outcome
from botctl.pipeline.scope import scoped
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.plan import Operation, Plan, Scope
from botctl.reconcile import baseline
from botctl.reconcile.apply import ApplyReport, OpResult, Stop, apply_plan
from botctl.reconcile.diff import NOTHING_APPLIED, missing_error
from botctl.reconcile.freshness import check_fresh, check_history, resolve_secrets, verify_applied
from botctl.reconcile.safety import enforce_safety
from botctl.resources.contacts import Hooks, Progress, migrations
from botctl.resources.registry import kind_of
from botctl.sealing import FingerprintKey
from botctl.service.client import ServiceClient
from botctl.service.connect import connect
from botctl.service.live import read_live, refused_read_notes
from botctl.store.backend import StateBackend
from botctl.store.backends import open_backend
from botctl.store.keys import StateKeyError
from botctl.store.protection import check_not_weaker
from botctl.store.state import StateWriter, read_state

if TYPE_CHECKING:
    from botctl.reconcile.rollback import Before
    from botctl.store.planfile import SavedPlan

# The chatbots a pass plans, from the configuration loaded and the state read: the
# selection narrowed by ``--changed-since`` by default; the agent's, by the revision it
# last applied, or by the chatbots a drift slice found changed.
Scoper = Callable[[Fleet, State], tuple[Desired, Scope | None]]


@dataclass(frozen=True)
class Loaded:
    """A configuration loaded once (``load``): the agent keeps it with its revision, so a
    revision is loaded once however many passes run on it."""

    fleet: Fleet

    @property
    def desired(self) -> Desired:
        return self.fleet.desired


def load(ws: Workspace) -> Loaded:
    """The load phase: the configuration, resolved, validated and selected."""
    return Loaded(load_resolved(ws))


class Driver(Protocol):
    """What a pass asks whoever runs it: show the plan, confirm it, hear of each operation's
    result and of a rename's progress."""

    def show(self, plan: Plan) -> None: ...

    def confirm(self, plan: Plan) -> bool: ...

    def on_result(self, result: OpResult) -> None: ...

    def on_migration(self, op: Operation, progress: Progress) -> None: ...


class Unattended:
    """A driver that shows nothing and confirms everything (``apply --auto-approve`` as the
    demo, the benchmarks and the tests drive it); ``results`` hears each operation's."""

    def __init__(self, results: Callable[[OpResult], None] = lambda _: None) -> None:
        self._results = results

    def show(self, plan: Plan) -> None:
        pass

    def confirm(self, plan: Plan) -> bool:
        return True

    def on_result(self, result: OpResult) -> None:
        self._results(result)

    def on_migration(self, op: Operation, progress: Progress) -> None:
        pass


@dataclass(frozen=True)
class Applied:
    """What a gate's ``check`` gets after a complete apply (``apply --test``), inside the
    pass's state lock and with its clients: the plan, its report, what each kind knew before
    it (``reconcile.rollback``), and the writer that records in the state."""

    plan: Plan
    report: ApplyReport
    previous: Before
    clients: Mapping[str, ServiceClient]
    writer: StateWriter


class Gate(Protocol):
    """The gate phase's policy. ``admit``: None lets the plan go ahead, a text holds it back
    (nothing is sent; the outcome's reason is ``Held``); it sees the state as read under the
    lock (what another run recorded up to the moment this one holds it). ``check`` runs once
    an apply completed (every operation applied, not stopped, the state written), still under the
    lock, also when there was nothing to apply: its result is the outcome's ``verdict``
    (``apply --test``: the tests, and the rollback of those that failed)."""

    def admit(self, plan: Plan, state: State) -> str | None: ...

    async def check(self, applied: Applied) -> Any: ...


@dataclass
class _Pass:
    """One pass as it goes: what each phase found, for the next."""

    ws: Workspace
    backend: StateBackend
    state: State
    version: str | None
    loaded: Loaded | None
    desired: Desired | None = None
    scope: Scope | None = None
    bots: list[BotSpec] = field(default_factory=list)
    opened: tuple[Plan, FingerprintKey] | None = None  # a saved plan, its secrets resolved
    clients: Mapping[str, ServiceClient] = field(default_factory=dict)
    live: Live = field(default_factory=Live)
    plan: Plan = field(default_factory=Plan)
    writer: StateWriter | None = None


class Reconciler:
    """One pass of reconciliation (``reconcile``), phase by phase; see the module.

    ``stop`` is armed once writing begins: a request then ends the apply early (see
    ``reconcile.apply.Stop``), what finished is recorded, and the outcome says what stopped
    it. Before that, nothing was written, and the driver interrupts the pass as it likes.
    ``held``: the state's backend when the driver already holds its lock (the agent's lease,
    ``store.lock.LeasedBackend``): used as it is, no lock taken. ``scoper``: which chatbots
    to plan (default: the selection, narrowed by ``--changed-since``)."""

    def __init__(
        self,
        ws: Workspace,
        driver: Driver | None = None,
        *,
        gate: Gate | None = None,
        stop: Stop | None = None,
        held: StateBackend | None = None,
        scoper: Scoper | None = None,
    ) -> None:
        self.ws = ws
        self.driver = driver if driver is not None else Unattended()
        self.gate = gate
        self.stop = stop if stop is not None else Stop()
        self.held = held
        self.scoper = scoper

    async def reconcile(
        self,
        loaded: Loaded | None = None,
        *,
        saved: SavedPlan | None = None,
        live: Live | None = None,
    ) -> Outcome:
        """load (unless ``loaded``, or a ``saved`` plan) → read (the service unless ``live``:
        a read the driver just made of the same chatbots) → plan → gate → apply → verify →
        record. Errors are raised (``pipeline.outcome.terminal`` says which a retry cannot
        fix); every other end is an ``Outcome``."""
        if saved is None and loaded is None:
            loaded = load(self.ws)
        ws = self.ws if saved is None else _reading_as_planned(self.ws, saved.plan)
        with self._locked(ws) as (backend, took_over):
            run = self._read_state(ws, backend, took_over, loaded, saved)
            bots = run.bots
            async with connect(_refs(bots), ws.environ, _service(ws, bots)) as clients:
                run.clients = clients
                await self._read_service(run, live)
                await self._plan(run)
                early = await self._gate(run)
                if early is not None:
                    return early
                return await self._apply_and_verify(run)

    # --- read ------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _locked(self, ws: Workspace) -> Iterator[tuple[StateBackend, str | None]]:
        """The state's backend, locked for the pass (or the driver's, already held)."""
        if self.held is not None:
            yield self.held, None
            return
        from botctl.store.lock import StateLock

        with (
            open_backend(ws.state_path) as backend,
            StateLock(backend, timeout=ws.lock_timeout, command="apply") as lock,
        ):
            yield backend, lock.took_over

    def _read_state(
        self,
        ws: Workspace,
        backend: StateBackend,
        took_over: str | None,
        loaded: Loaded | None,
        saved: SavedPlan | None,
    ) -> _Pass:
        """The read phase's first half: the state, its key and protection checked before
        anything is read or sent, and the chatbots in scope."""
        stored = read_state(backend)
        state = stored.state
        if took_over is not None:  # a killed run's lock: shown with the plan's warnings
            state.warnings.append(took_over)
        _choose_encryption(state, ws, backend)
        if saved is not None and saved.encrypted and state.lineage is None:
            _choose_encryption(state, replace(ws, state_encryption="passphrase"), backend)
        if loaded is not None:
            _require_key(state, loaded.desired, backend, create=False)
            _protect(state, ws, loaded.desired)  # every chatbot's secrets, in scope or not
        check_not_weaker(state, backend)  # before anything is read or sent
        run = _Pass(ws, backend, state, stored.version, loaded)
        if loaded is not None:
            scoper = self.scoper or (lambda fleet, st: scoped(ws, fleet, st))
            run.desired, run.scope = scoper(loaded.fleet, state)
            run.bots = list(run.desired.bots)
        else:
            run.bots = _bots_of(saved)
        # A saved plan's secrets first: the reads must be traced (--debug) with them masked.
        run.opened = _open_saved(saved, state, ws) if saved is not None else None
        return run

    async def _read_service(self, run: _Pass, live: Live | None) -> None:
        """The read phase's second half: the service's view of the chatbots in scope."""
        if live is None:
            live = await read_live(run.bots, run.clients, concurrency=run.ws.parallelism)
        run.live = live

    # --- plan ------------------------------------------------------------------------------

    async def _plan(self, run: _Pass) -> None:
        if run.opened is not None:
            plan, key = run.opened
            check_fresh(plan, run.live, run.state, key)
            run.plan = replace(plan, rate_limit=run.ws.service.rate_limit)  # this run's pace
            return
        assert run.desired is not None
        notes = (*refused_read_notes(run.clients), *run.state.warnings)
        run.plan = await _counted_plan(
            run.desired, run.live, run.state, run.ws, notes, run.clients, run.scope
        )

    # --- gate ------------------------------------------------------------------------------

    async def _gate(self, run: _Pass) -> Outcome | None:
        """Whether the plan goes ahead: None when it does; else how the pass ended (nothing
        sent)."""
        plan, ws = run.plan, run.ws
        # A missing chatbot is the first thing said: without --skip-missing, all that is
        # (nothing will be applied, so no plan to review either).
        missing = missing_error(plan, NOTHING_APPLIED)
        if missing is not None and not ws.skip_missing:
            raise missing
        self.driver.show(plan)
        run.writer = StateWriter(run.state, run.backend, version=run.version, command="apply")
        if plan.empty:
            return await self._nothing_to_do(run)
        enforce_safety(plan, force=ws.force)
        _check_renames_can_read(plan, ws)
        held = self.gate.admit(plan, run.state) if self.gate is not None else None
        if held is not None:
            return self._ended(run, "Held", held=held)
        if not self.driver.confirm(plan):
            return self._ended(run, "Declined")
        return None

    async def _nothing_to_do(self, run: _Pass) -> Outcome:
        """An empty plan: the baseline read is recorded, and a gate's check still runs
        (``apply --test``: chatbots whose tests have not passed at this revision)."""
        writer = run.writer
        assert writer is not None
        _record(writer, baseline.matching(run.desired, run.live) if run.desired else ())
        _record_rollout(writer, run.desired, run.loaded)
        writer.flush()
        writer.raise_if_failed()
        verdict = None
        if self.gate is not None:
            verdict = await self.gate.check(Applied(run.plan, NOTHING, {}, run.clients, writer))
            writer.flush()
        return self._ended(run, "NothingToDo", verdict=verdict, state_error=writer.error)

    # --- apply, verify, record -------------------------------------------------------------

    async def _apply_and_verify(self, run: _Pass) -> Outcome:
        writer = run.writer
        assert writer is not None
        _record(writer, baseline.matching(run.desired, run.live) if run.desired else ())
        writer.flush()
        writer.raise_if_failed()  # nothing is sent yet: better not than unrecorded
        previous: Before = {}
        if self.gate is not None:
            from botctl.reconcile.rollback import previous_values

            previous = previous_values(run.plan, run.live, run.state)
        stop = self.stop
        stop.armed = True
        try:
            report = await self._apply(run)
            read_back, notes = await self._verify(run, report)
            complete = report.ok and not stop.requested
            if complete:
                _record_rollout(writer, run.desired, run.loaded)
            writer.flush()
            verdict = None
            if self.gate is not None and complete and writer.error is None:
                applied = Applied(run.plan, report, previous, run.clients, writer)
                verdict = await self.gate.check(applied)
        finally:
            stop.settle()
            writer.flush()
        reason = _reason(report, stop, writer)
        return self._ended(
            run,
            reason,
            report=report,
            not_taken=tuple(notes),
            state_error=writer.error,
            interrupted=stop.reason,
            verdict=verdict,
            read_back=read_back,
        )

    async def _apply(self, run: _Pass) -> ApplyReport:
        """Apply, recording each success in the state as it happens (coalesced writes, each
        a compare-and-swap against the previous one)."""
        writer = run.writer
        assert writer is not None
        on_result = self.driver.on_result

        def record(result: OpResult) -> None:
            if result.status == "applied":
                writer.record(result.operation)
            on_result(result)

        hooks = _migration_hooks(writer, self.driver.on_migration)
        # A rename's contact updates at once: twice the chatbots' bound, within the client's
        # own pace (--rate-limit) and 429 regime.
        with migrations(hooks, max(4, 2 * run.ws.parallelism)):
            return await apply_plan(
                run.plan,
                run.clients,
                on_result=record,
                parallelism=run.ws.parallelism,
                stop=self.stop,
            )

    async def _verify(self, run: _Pass, report: ApplyReport) -> tuple[Live | None, list[str]]:
        """The verify phase: the chatbots written to, and only those, read again (unless a
        stop was asked for: then nothing more is sent)."""
        if self.stop.requested:
            return None, []
        found: list[Live | None] = [None]

        async def read_back() -> list[str]:
            found[0], notes = await _read_back(report, run.bots, run.clients, run.writer, run.ws)
            return notes

        notes = await self.stop.guard(
            read_back(), lambda: ["the read-back was interrupted: what was sent is not verified"]
        )
        return found[0], notes

    def _ended(self, run: _Pass, reason: Any, **fields: Any) -> Outcome:
        """The record phase's outcome of ``run``."""
        return Outcome(
            reason,
            run.plan,
            desired=run.desired,
            live=run.live,
            state=run.state,
            **fields,
        )


def _reason(report: ApplyReport, stop: Stop, writer: StateWriter) -> Any:
    if stop.reason is not None:
        return "Interrupted"
    if writer.error is not None:
        return "StateNotWritten"
    return "Applied" if report.ok else "OperationsFailed"


async def _read_back(
    report: ApplyReport,
    bots: Sequence[BotSpec],
    clients: Mapping[str, ServiceClient],
    writer: StateWriter | None,
    ws: Workspace,
) -> tuple[Live | None, list[str]]:
    """Re-read the chatbots written to: record what reads back as sent as verified, and
    report what does not. A failing read only costs the check: the writes are done and
    recorded, so it must not turn the apply into an error."""
    assert writer is not None
    written = report.written()
    touched = [b for b in bots if b.chatbot_id in written]
    if not touched:
        return None, []
    try:
        after = await read_live(touched, clients, concurrency=ws.parallelism)
    except ServiceError as exc:
        return None, [f"could not read back to verify: {exc}"]
    _record(writer, baseline.read_back(report, after))
    return after, verify_applied(report, after, frozenset(ws.secrets))


def _check_renames_can_read(plan: Plan, ws: Workspace) -> None:
    """A rename reads the contacts to move their values: refused before anything is sent
    when this run may not read them."""
    off = "--no-reads" if ws.service.no_reads else "--no-contact-reads"
    if not (ws.service.no_reads or ws.service.no_contact_reads):
        return
    renames = [op.label for op in plan.operations if kind_of(op.resource).reads_contacts(op)]
    if renames:
        raise PlanError(
            f"a rename moves the contacts' values and must read them, which {off} forbids: "
            f"{', '.join(renames)}; nothing was applied (run without {off})"
        )


def _record_rollout(writer: StateWriter, desired: Desired | None, loaded: Loaded | None) -> None:
    """After a complete apply of the configuration: the chatbots with a staged-rollout record
    now run this revision (``resources.rollout``); an outcome of other tests no longer holds.
    The revision is that of the configuration as loaded for this apply (its tests too: a
    revision covers them), never as the files stand once it is done."""
    rollout = writer.state.rollout
    if desired is None or loaded is None:
        return
    if not any(b.chatbot_id in rollout for b in desired.bots):
        return
    from botctl.config.revision import revisions

    current = revisions(loaded.fleet)
    for bot in desired.bots:
        record = rollout.get(bot.chatbot_id)
        revision = current.get(bot.chatbot_id)
        if record is not None and revision is not None and record.applied(revision) != record:
            rollout[bot.chatbot_id] = record.applied(revision)
            writer.state.record(bot.ref)
            writer.touched(bot.chatbot_id, f"{bot.chatbot_id}: rollout revision {revision}")


def _open_saved(saved: SavedPlan, state: State, ws: Workspace) -> tuple[Plan, FingerprintKey]:
    """The saved plan with its requests whole, if it is of this state's history and its
    secrets are as they were (taken from the environment again); and the key of its
    fingerprints, for ``check_fresh`` once the service is read."""
    from botctl.errors import StalePlanError

    check_history(saved.plan, state)
    salt = saved.salt or state.salt
    if salt is None:
        raise StalePlanError(
            "the state no longer holds the salt of the plan's fingerprints (it was replaced "
            "by an older copy); make a new plan"
        )
    if saved.key_check is None:
        key = FingerprintKey(salt)  # a plan made against a state of format 3
    else:
        if state.state_key is None:
            raise StateKeyError(
                f"the plan's fingerprints were made under a state key, and none is set: "
                f"{state.key_hint}"
            )
        key = FingerprintKey(salt, state.state_key)
        if key.check != saved.key_check:
            raise StalePlanError(
                "the plan's fingerprints were made under another state key than the one set "
                f"now ({state.key_hint}); make a new plan"
            )
    plan = resolve_secrets(saved.plan, ws.environ, key)
    ws.secrets.update(plan.secret_values)
    state.protect(plan.secret_values, {})
    return plan, key


def _reading_as_planned(ws: Workspace, saved: Plan) -> Workspace:
    """A saved plan is applied reading as it was made: one made with --no-reads sends no
    read; one that relied on reads re-reads them to refuse it if they moved, so it cannot
    be applied with --no-reads."""
    if saved.reads == "none":
        return replace(ws, service=replace(ws.service, no_reads=True))
    if ws.service.no_reads:
        raise PlanError(
            "this plan was made from what the service answered, and apply --plan reads it "
            "again to refuse the plan if anything moved: run it without --no-reads (or make "
            "the plan with --no-reads)"
        )
    return ws


def _bots_of(saved: SavedPlan | None) -> list[BotSpec]:
    refs = saved.plan.bots if saved is not None else ()
    return [BotSpec(name=r.name, chatbot_id=r.chatbot_id, api_key_env=r.api_key_env) for r in refs]


def _migration_hooks(writer: StateWriter, shown: Callable[[Operation, Progress], None]) -> Hooks:
    """A rename's progress goes to the state (written at the writer's pace, so a run killed
    midway resumes about where it stopped) and to ``shown``."""

    def recorded(op: Operation) -> Progress | None:
        record = writer.state.record_for(op.bot.chatbot_id)
        found = record.migrations.get(op.subject) if record is not None else None
        return Progress.from_json(found, str(op.body["from"]))

    def progress(op: Operation, now: Progress) -> None:
        writer.state.record(op.bot).migrations[op.subject] = now.to_json()
        writer.touched(
            op.bot.chatbot_id,
            f"{op.bot.name}: rename {now.source} -> {op.subject}: {now.moved} moved ({now.phase})",
        )
        shown(op, now)

    return Hooks(recorded, progress)


async def apply_unattended(
    ws: Workspace, on_result: Callable[[OpResult], None] = lambda _: None
) -> Outcome:
    """``apply --auto-approve``, as the demo, benchmarks and tests drive it."""
    return await Reconciler(ws, Unattended(on_result)).reconcile()
