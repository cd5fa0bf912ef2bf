"""The agent's passes over the service, each the reconciler's phases (``pipeline.reconciler``)
with what the agent already knows, so that the work follows the change:

- a new revision, applied (``--auto-apply``): loaded once (``Held``), scoped to the chatbots
  it changes against the revision last applied (``pipeline.scope.scope_between``: changed,
  added, removed, or not all applied by the state), read once, planned, applied under the
  lease, the chatbots written to read back; the statuses come from that read and the
  read-back, never a second read;
- a new revision, observed (plan only): its changed chatbots read once and classified;
- a watch slice (``agent.watch``): a few chatbots read and classified, and with
  ``--self-heal`` those found changed outside applied from the same read.

The state a slice compares with is read once and kept while this process holds the lease
(nothing else writes it meanwhile) and no pass of its own wrote it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botctl.agent.findings import Seen
from botctl.agent.log import Log
from botctl.agent.source import Revision
from botctl.agent.status import CycleRecord, Metrics
from botctl.config.resolve import Fleet
from botctl.models import Desired, State
from botctl.pipeline.flows import classify, observe, read_state_for
from botctl.pipeline.outcome import Outcome
from botctl.pipeline.reconciler import Gate, Loaded, Reconciler, Scoper
from botctl.pipeline.scope import narrowed, scope_between
from botctl.pipeline.workspace import Workspace
from botctl.plan import Operation, Plan, Scope
from botctl.reconcile.apply import OpResult, Stop, StopEvent
from botctl.reconcile.drift import DriftReport, acknowledge
from botctl.resources.contacts import Progress
from botctl.store.acknowledgements import read_acknowledgements
from botctl.store.backend import LeaseLost
from botctl.store.backends import open_backend
from botctl.store.lock import Lease, LeasedBackend


@dataclass(frozen=True)
class Held:
    """A good revision: its files, its workspace, its configuration loaded once."""

    revision: Revision
    ws: Workspace
    loaded: Loaded

    @property
    def id(self) -> str:
        return self.revision.id


class _Driver:
    """The agent's driver of the reconciler: nothing to confirm; the plan kept in the cycle's
    record, each result logged and counted, failures kept per chatbot for its status."""

    def __init__(self, record: CycleRecord, log: Log, words: Callable[[str], str]) -> None:
        self.record = record
        self.log = log
        self.words = words
        self.failures: dict[str, str] = {}

    def show(self, plan: Plan) -> None:
        self.record.plan = plan.to_document()

    def confirm(self, plan: Plan) -> bool:
        return True

    def on_result(self, result: OpResult) -> None:
        label, chatbot_id = result.operation.label, result.operation.bot.chatbot_id
        if result.status == "applied":
            self.record.applied += 1
            self.log.info("apply", f"applied {label}", chatbot=chatbot_id)
        else:
            self.record.failed += 1
            self.failures[chatbot_id] = self.words(f"{label}: {result.message}")
            self.log.error("apply", f"{result.status} {label}: {result.message}")

    def on_migration(self, op: Operation, progress: Progress) -> None:
        pass


class Passes:
    """The passes of one agent; see the module. ``stop_for`` is told the ``Stop`` of an
    apply while it runs (a signal drains it), None after."""

    def __init__(
        self,
        lease: Lease,
        log: Log,
        metrics: Metrics,
        words: Callable[[str], str],
        *,
        drain_timeout: float,
        acknowledged: Path | None,
        stop_for: Callable[[Stop | None], None],
        writes: asyncio.Lock,
        gate_for: Callable[[Held], Gate | None] = lambda held: None,
        scope_for: Callable[[Held, Scoper], Scoper] = lambda held, scoper: scoper,
    ) -> None:
        self.lease = lease
        self.log = log
        self.metrics = metrics
        self.words = words
        self.drain_timeout = drain_timeout
        self.acknowledged = acknowledged
        self.stop_for = stop_for
        self.writes = writes  # the state's writers of this process take it in turn
        # The gates (``agent.gating``): the reconciler's gate for a revision, and what may
        # narrow a pass's scope (the chatbots a revision may not reach yet).
        self.gate_for = gate_for
        self.scope_for = scope_for
        self._state: tuple[tuple[str, str], State] | None = None  # (holder, revision), state

    # --- applying --------------------------------------------------------------------------

    async def apply(
        self, held: Held, base: Held | None, ws: Workspace, record: CycleRecord
    ) -> tuple[Outcome, Seen]:
        """Apply ``held`` under the lease: only the chatbots it changes against ``base`` (the
        revision last applied; None: every chatbot), and those the state says are not all
        applied."""
        before = base.loaded.fleet if base is not None else None
        scoper = _against(before, base.id if base is not None else "")
        return await self._reconcile(held, ws, record, scoper=scoper)

    async def heal(
        self, held: Held, ws: Workspace, record: CycleRecord, chatbots: Collection[str], live: Any
    ) -> tuple[Outcome, Seen]:
        """Apply ``held`` to ``chatbots`` from a read just made of them (``live``)."""

        def only(fleet: Fleet, state: State) -> tuple[Desired, Scope | None]:
            desired = fleet.desired
            kept = tuple(b for b in desired.bots if b.chatbot_id in chatbots)
            return desired.model_copy(update={"bots": kept}), None

        return await self._reconcile(held, ws, record, scoper=only, live=live)

    async def _reconcile(
        self, held: Held, ws: Workspace, record: CycleRecord, **how: Any
    ) -> tuple[Outcome, Seen]:
        async with self.writes:
            return await self._reconcile_writing(held, ws, record, **how)

    async def _reconcile_writing(
        self, held: Held, ws: Workspace, record: CycleRecord, **how: Any
    ) -> tuple[Outcome, Seen]:
        # A fresh renewal first: a process paused past its lease must not send anything.
        if not await asyncio.to_thread(self.lease.renew):
            raise LeaseLost(
                f"the lease on the state was lost ({self.lease.lost or 'it lapsed'}): "
                "nothing was applied"
            )
        driver = _Driver(record, self.log, self.words)
        stop = Stop(self.drain_timeout, self._stopping)
        self.stop_for(stop)
        self._state = None  # the pass writes the state: read it again next time
        started = time.monotonic()
        live = how.pop("live", None)
        try:
            with open_backend(ws.state_path) as inner:
                reconciler = Reconciler(
                    replace(ws, skip_missing=True),
                    driver,
                    gate=self.gate_for(held),
                    stop=stop,
                    held=LeasedBackend(inner, self.lease),
                    scoper=self.scope_for(held, how["scoper"]),
                )
                outcome = await reconciler.reconcile(held.loaded, live=live)
        finally:
            self.stop_for(None)
            self.metrics.apply_duration.observe(time.monotonic() - started)
        return outcome, self._seen_after(outcome, ws, driver.failures)

    def _seen_after(self, outcome: Outcome, ws: Workspace, failures: dict[str, str]) -> Seen:
        """The statuses after a pass: its plan's read with the chatbots written to as read
        back, against the state as recorded (no read of its own)."""
        desired, observed, state = outcome.desired, outcome.observed(), outcome.state
        assert desired is not None
        assert observed is not None
        assert state is not None
        report, plan = classify(ws, desired, observed, state)
        covered = frozenset(b.chatbot_id for b in desired.bots)
        return Seen(self._acknowledged(report), plan, covered, failures)

    def _stopping(self, event: StopEvent, in_flight: int) -> None:
        if event == "stopping":
            self.log.info(
                "stop",
                f"no operation starts from now on; waiting up to "
                f"{self.drain_timeout:g} s for the {in_flight} in flight",
            )
        else:
            self.log.warning("stop", f"abandoning the {in_flight} operation(s) in flight")

    # --- reading only ----------------------------------------------------------------------

    async def observe(
        self, held: Held, ws: Workspace, chatbots: Collection[str] | None = None
    ) -> tuple[Seen, Any]:
        """Read ``chatbots`` of ``held`` (None: all) once and classify them; and the read."""
        desired = held.loaded.desired
        if chatbots is not None:
            kept = tuple(b for b in desired.bots if b.chatbot_id in chatbots)
            desired = desired.model_copy(update={"bots": kept})
        state = await self.state(held, ws)
        report, plan, live = await observe(ws, desired, state)
        covered = frozenset(b.chatbot_id for b in desired.bots)
        return Seen(self._acknowledged(report), plan, covered), live

    def changed(self, held: Held, base: Held | None) -> frozenset[str] | None:
        """The chatbots whose configuration ``held`` changes against ``base`` (None: all,
        no base to compare with); a plan-only agent reads only those on a new revision."""
        if base is None:
            return None
        scope = scope_between(
            [b.spec for b in base.loaded.fleet.bots], held.loaded.desired.bots, State()
        )
        moved = ("added", "changed", "chatbot-id-changed", "api-key-env-changed")
        return frozenset(
            b.bot.chatbot_id for b in scope.planned if any(r in moved for r in b.reasons)
        )

    async def state(self, held: Held, ws: Workspace) -> State:
        """The state the watch (and the gates, between passes) compares with: read once while
        this process holds the lease without a break and no pass of its own wrote it (nothing
        else can write it)."""
        info = self.lease.info
        key = (info.holder if info is not None else "", held.id)
        if self._state is not None and key[0] and self._state[0] == key:
            return self._state[1]
        state = await asyncio.to_thread(read_state_for, ws, held.loaded.desired)
        self._state = (key, state)
        return state

    def _acknowledged(self, report: DriftReport) -> DriftReport:
        if self.acknowledged is None:
            return report
        entries = read_acknowledgements(self.acknowledged)
        return acknowledge(report, entries, datetime.now(UTC))


def _against(before: Fleet | None, commit: str) -> Callable[[Fleet, State], Any]:
    """The reconciler's scoper of a revision applied after ``before`` (None: all of it)."""

    def scoper(fleet: Fleet, state: State) -> tuple[Desired, Scope | None]:
        if before is None:
            return fleet.desired, None
        old = [b.spec for b in before.bots]
        scope = scope_between(old, fleet.desired.bots, state, ref="applied", commit=commit)
        return narrowed(fleet.desired, scope), scope

    return scoper
