"""The reconcile loop: every ``interval`` seconds, and at once when triggered (the webhook):

1. fetch the source; a new revision is validated (``pipeline.workspace.load``): one that
   fails is *not* used, its located error is reported (status, log, notification) and the
   last good revision stays;
2. drift of the good revision (``pipeline.flows.make_drift``: the plan against the service
   and the state, classified), acknowledgements applied;
3. with ``--auto-apply``, apply (``pipeline.flows.run_apply``, under the agent's lease) when
   the revision is new; with ``--self-heal`` also when values were changed outside, and every
   ``--reassert-every`` with the write-only values re-sent;
4. each chatbot's status from the drift after it, and the apply's failures.

A failing cycle is retried after an exponential backoff (``backoff_base`` doubling, at most
``backoff_max``), never in a hot loop. Triggers coalesce: however many arrive, at most one
cycle is pending, run as soon as the one in progress ends; during a backoff it waits for the
backoff's end (webhooks cannot drive a failing agent faster). Only the holder of the state's
lease reconciles: a standby tries to take it every cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from botctl.agent.log import Log, Redactor
from botctl.agent.notify import Notifier
from botctl.agent.source import Revision, Source
from botctl.agent.status import AgentStatus, BotStatus, CycleRecord, now_iso
from botctl.errors import BotctlError
from botctl.pipeline.flows import make_drift_and_plan
from botctl.pipeline.reconciler import Reconciler, Unattended
from botctl.pipeline.workspace import Workspace, load
from botctl.plan import Plan
from botctl.reconcile.apply import OpResult, Stop, StopEvent
from botctl.reconcile.drift import DriftItem, DriftReport, acknowledge
from botctl.service.pacing import RequestStats
from botctl.store.acknowledgements import read_acknowledgements
from botctl.store.backend import LeaseLost, LockInfo
from botctl.store.backends import open_backend
from botctl.store.lock import Lease, LeasedBackend

Trigger = Literal["start", "interval", "webhook", "retry"]
HEALABLE = ("changed_outside", "conflict")


@dataclass(frozen=True)
class AgentSettings:
    interval: float = 60.0
    auto_apply: bool = False
    self_heal: bool = False
    reassert_every: float | None = None
    backoff_base: float = 2.0
    backoff_max: float = 300.0
    drain_timeout: float = 20.0
    acknowledged: Path | None = None


class Agent:
    def __init__(
        self,
        source: Source,
        make_workspace: Callable[[Path], Workspace],
        settings: AgentSettings,
        status: AgentStatus,
        lease: Lease,
        log: Log,
        notifier: Notifier,
        redact: Redactor,
    ) -> None:
        self.source = source
        self.make_workspace = make_workspace
        self.settings = settings
        self.status = status
        self.lease = lease
        self.log = log
        self.notifier = notifier
        self.redact = redact
        self.stopping: int | None = None  # the signal that asked the agent to stop
        self._wake = asyncio.Event()
        self._pending: Trigger | None = None  # the cycle asked for, not started yet
        self._good: tuple[Revision, Workspace] | None = None
        self._bad: str | None = None  # the newest revision, when it failed validation
        self._apply_stop: Stop | None = None
        self._cycle: asyncio.Task[None] | None = None
        self._last_reassert: float | None = None
        self._reported_drift: frozenset[tuple[str, str, str]] = frozenset()
        self._numbers = 0
        self._unsynced: set[str] = set()  # chatbots the last plan would write to
        # While standing by: the holder last logged (its holder id), and the wall-clock time
        # its lease lapses unless renewed, when the next try is due (not a whole interval on).
        self._holder_seen: str | None = None
        self._holder_expires: float | None = None

    # --- driving the loop ---------------------------------------------------------------

    def trigger(self, why: Trigger = "webhook") -> str:
        """Ask for a cycle; when it will run, in words. At most one is pending: it runs as
        soon as the cycle in progress ends, or, during a backoff, when the backoff ends."""
        self._pending = self.status.pending = why
        self._wake.set()
        if self.status.failures:
            return f"when the backoff ends ({self.status.next_cycle})"
        return "after the cycle in progress" if self.status.running is not None else "now"

    def request_stop(self, signum: int) -> None:
        """A signal: an apply in flight drains (``Stop``: a second signal abandons it); any
        other work is cancelled, having written nothing (a fetch's git process group
        killed)."""
        first = self.stopping is None
        if first:
            self.stopping = signum
            self.status.role = "stopping"
            self.log.info("stop", f"signal {signum}: stopping")
            self.source.cancel()
        if self._apply_stop is not None and self._apply_stop.armed:
            self._apply_stop.request(signum)
        elif self._cycle is not None and not self._cycle.done():
            self._cycle.cancel()
        self._wake.set()

    async def run(self) -> None:
        why: Trigger = "start"
        try:
            while self.stopping is None:
                self._cycle = asyncio.create_task(self.cycle(why))
                try:
                    await self._cycle
                except asyncio.CancelledError:
                    pass
                except Exception as exc:
                    self._survive(exc)
                if self.stopping is not None:
                    break
                why = await self._wait()
        finally:
            self.status.role = "stopping"
            await asyncio.to_thread(self.lease.release)
            self.status.refresh_gauges()

    async def _wait(self) -> Trigger:
        backing_off = self.status.failures > 0
        delay = self.status.backoff if backing_off else self.settings.interval
        if self.status.role == "standby" and self._holder_expires is not None:
            # Try again as the holder's lease would lapse: failover within the lease, not
            # the lease plus an interval (a renewed lease just means another wait).
            delay = min(delay, max(0.05, self._holder_expires - time.time() + 0.05))
        self.status.next_cycle = now_iso(time.time() + delay)
        self.status.watchdog.due_in(delay)
        end = time.monotonic() + delay
        # A trigger ends the wait, except a backoff's: the cycle it asked for runs at its end.
        while self.stopping is None and (self._pending is None or backing_off):
            self._wake.clear()
            try:
                async with asyncio.timeout(max(0.0, end - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                break
        why = self._pending or ("retry" if backing_off else "interval")
        self._pending = None  # status.pending too, once the cycle has started
        return why

    def _survive(self, exc: Exception) -> None:
        """A cycle's own error path failed (out of file descriptors while describing the
        failure, say): the loop goes on, backing off as after any failure."""
        self.status.failures += 1
        self.status.backoff = self._backoff(self.status.failures)
        with contextlib.suppress(Exception):
            self.log.error("cycle", f"cycle failed: unexpected {type(exc).__name__}: {exc}")

    def _backoff(self, failures: int) -> float:
        return min(
            self.settings.backoff_base * 2.0 ** min(failures - 1, 30), self.settings.backoff_max
        )

    # --- one cycle ------------------------------------------------------------------------

    async def cycle(self, trigger: Trigger) -> None:
        self._numbers += 1
        record = CycleRecord(self._numbers, trigger, now_iso())
        started = time.monotonic()
        self.status.running, self.status.pending = record.number, None
        self.status.watchdog.beat()
        failed_before = self.status.failures
        try:
            await self._reconcile(record)
        except asyncio.CancelledError:
            record.result = "interrupted"
            raise
        except BotctlError as exc:
            record.result, record.error = "failed", self._words(str(exc))
        except Exception as exc:  # a bug must not end a long-running agent: report it
            record.result = "failed"
            record.error = self._words(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            record.finished = now_iso()
            record.duration = time.monotonic() - started
            self.status.running = None
            self.status.watchdog.beat()
            self._finish(record, failed_before)

    def _finish(self, record: CycleRecord, failed_before: int) -> None:
        status = self.status
        status.cycles.append(record)
        status.metrics.cycles.labels(result=record.result).inc()
        if record.result == "failed":
            status.ready = False
            status.failures += 1
            status.last_error = record.error
            status.backoff = self._backoff(status.failures)
            self.log.error(
                "cycle",
                f"cycle {record.number} failed: {record.error}",
                revision=record.revision,
                backoff=status.backoff,
            )
            if failed_before == 0:
                self.notifier.notify(
                    "failed",
                    f"botctl agent: sync failed for {status.source}: {record.error}",
                    source=status.source,
                    revision=record.revision,
                    error=record.error,
                )
        elif record.result not in ("standby", "interrupted"):
            if failed_before:
                self.log.info("cycle", f"recovered after {failed_before} failed cycle(s)")
                self.notifier.notify(
                    "recovered",
                    f"botctl agent: {status.source} recovered after {failed_before} failed "
                    f"cycle(s); revision {record.revision}",
                    source=status.source,
                    revision=record.revision,
                    failedCycles=failed_before,
                )
            status.failures, status.backoff = 0, 0.0
            self.log.info(
                "cycle",
                f"cycle {record.number}: {record.result}",
                revision=record.revision,
                applied=record.applied or None,
                seconds=round(record.duration, 3),
            )
        status.refresh_gauges()

    def _words(self, text: str) -> str:
        """An error as the user reads it: the source's paths, secrets masked. Never raises:
        it describes failures, out of file descriptors included."""
        with contextlib.suppress(Exception):
            text = self.source.display(text)
        return self.redact(text)

    async def _reconcile(self, record: CycleRecord) -> None:
        status = self.status
        if not await asyncio.to_thread(self.lease.try_acquire):
            holder = await asyncio.to_thread(self.lease.holder)
            status.role = "standby"
            status.lease_holder = holder.describe() if holder is not None else "(changing hands)"
            self._standing_by(holder)
            record.result = "standby"
            return
        if status.role != "active":
            how = f" ({self.lease.took_over})" if self.lease.took_over else ""
            self.log.info("lease", f"holding the state's lease: reconciling{how}")
        status.role, status.lease_holder = "active", None
        self._holder_seen = self._holder_expires = None
        revision = await asyncio.to_thread(self.source.fetch)
        record.revision = revision.id
        invalid = await self._consider(revision)
        if self._good is None:
            record.result = "invalid"
            return
        good, ws = self._good
        record.revision = good.id
        await self._reconcile_revision(good, ws, record)
        if invalid and record.result in ("synced", "drifted", "out_of_sync"):
            record.result = "invalid"

    def _standing_by(self, holder: LockInfo | None) -> None:
        """Log who holds the lease, once per holder (not every cycle); remember when its
        lease lapses, for ``_wait``."""
        self._holder_expires = holder.expires if holder is not None else None
        seen = holder.holder if holder is not None else None
        if seen == self._holder_seen:
            return
        self._holder_seen = seen
        if holder is None:
            self.log.info("lease", "standing by: the state's lease is changing hands")
            return
        until = (
            f", lease until {now_iso(holder.expires)} unless renewed"
            if holder.expires is not None
            else " (a lock without a lease: held until released)"
        )
        self.log.info(
            "lease",
            f"standing by: the state's lease is held by {holder.command} pid {holder.pid} "
            f"on {holder.host}{until}",
            holder=holder.holder or None,
        )

    async def _consider(self, revision: Revision) -> bool:
        """Validate a revision not seen yet; True when the newest revision is invalid."""
        good_id = self._good[0].id if self._good is not None else None
        if revision.id in (good_id, self._bad):
            return revision.id == self._bad
        try:
            if revision.problem is not None:
                raise BotctlError(revision.problem)
            ws = self.make_workspace(revision.directory)
            desired = await asyncio.to_thread(load, ws)
        except BotctlError as exc:
            self._refuse(revision, str(exc), good_id)
            return True
        self.redact.add_variables(bot.api_key_env for bot in desired.bots)
        self.log.info("revision", f"new revision {revision.id}: {len(desired.bots)} chatbot(s)")
        self._good, self._bad = (revision, ws), None
        self.status.invalid = None
        self.status.revision = revision.id
        self.status.bots_in((b.name, b.chatbot_id) for b in desired.bots)
        self.source.retain({revision.id})
        return False

    def _refuse(self, revision: Revision, problem: str, good_id: str | None) -> None:
        """``revision`` is invalid: reported (status, log, notification), never applied."""
        self._bad = revision.id
        error = self._words(problem)
        self.status.invalid = {"revision": revision.id, "error": error}
        keeping = f"; keeping {good_id}" if good_id else ""
        self.log.error("revision", f"revision {revision.id} is invalid{keeping}: {error}")
        self.notifier.notify(
            "failed",
            f"botctl agent: revision {revision.short} of {self.status.source} is invalid and "
            f"was not applied{keeping}:\n{error}",
            source=self.status.source,
            revision=revision.id,
            keptRevision=good_id,
            error=error,
        )

    async def _drift(self, ws: Workspace) -> DriftReport:
        report, plan = await make_drift_and_plan(ws)
        if self.settings.acknowledged is not None:
            entries = read_acknowledgements(self.settings.acknowledged)
            report = acknowledge(report, entries, datetime.now(UTC))
        # What the plan would send beyond what drift classifies: a value nothing can read and
        # nothing records (confidence unknown). Those chatbots are out of sync too.
        self._unsynced = {
            bot.chatbot_id
            for bot, change in plan.changes()
            if change.confidence == "unknown" and change.action != "reassert"
        }
        return report

    async def _reconcile_revision(
        self, revision: Revision, ws: Workspace, record: CycleRecord
    ) -> None:
        stats = RequestStats()
        self.status.watchdog.follow(stats)
        # Every request of the cycle is fenced by the lease: none goes out once it is lost,
        # or when less than its margin is left (a process paused past it sends nothing).
        ws = replace(ws, service=replace(ws.service, stats=stats, fence=self.lease.fence))
        try:
            new = revision.id != self.status.applied_revision
            report: DriftReport | None = None
            drifted: list[DriftItem] = []
            if not (self.settings.auto_apply and new):
                # A new revision to apply needs no drift first: the apply plans it, and the
                # drift after it gives the statuses (one pass of reads fewer per push).
                report = await self._drift(ws)
                self.status.ready = True
                drifted = [i for i in report.counted if i.drift_class in HEALABLE]
            heal = self.settings.self_heal and bool(drifted)
            reassert = self._reassert_due()
            failures: dict[str, str] = {}
            applied_ok = False
            if self.settings.auto_apply and (new or heal or reassert):
                applied_ok = await self._apply(replace(ws, reassert=reassert), record, failures)
                if applied_ok:
                    if new:
                        self.status.applied_revision = revision.id
                    if reassert:
                        self._last_reassert = time.monotonic()
                if self.stopping is not None:
                    record.result = "interrupted"
                    return
                report = await self._drift(ws)
                self.status.ready = True
            assert report is not None
            self._statuses(report, revision, failures)
            if record.failed:  # every failed operation is in failures too
                record.result = "failed"
                record.error = record.error or "; ".join(sorted(set(failures.values())))[:2000]
            elif applied_ok and record.applied and new:
                record.result = "applied"
                self.notifier.notify(
                    "synced",
                    f"botctl agent: revision {revision.short} applied "
                    f"({record.applied} operation(s))",
                    source=self.status.source,
                    revision=revision.id,
                    applied=record.applied,
                )
            elif applied_ok and record.applied:
                record.result = "healed"
                if drifted:  # a scheduled re-send (--reassert-every) alone is routine: no news
                    self.notifier.notify(
                        "healed",
                        f"botctl agent: healed {len(drifted)} value(s) changed outside on "
                        f"{_names(drifted)}",
                        source=self.status.source,
                        revision=revision.id,
                        items=[i.to_document() for i in drifted],
                    )
            self._report_drift(report, record)
        finally:
            self.status.metrics.count_requests(stats)

    def _report_drift(self, report: DriftReport, record: CycleRecord) -> None:
        if record.result not in ("synced",):
            if record.result in ("applied", "healed"):
                self._reported_drift = frozenset()
            return
        drift = [i for i in report.counted if i.drift_class != "pending"]
        pending = [i for i in report.counted if i.drift_class == "pending"]
        if drift:
            record.result = "drifted"
            keys = frozenset(i.key for i in drift)
            if keys != self._reported_drift:
                self._reported_drift = keys
                self.notifier.notify(
                    "drift",
                    f"botctl agent: drift found on {_names(drift)} ({len(drift)} value(s))",
                    source=self.status.source,
                    revision=self.status.revision,
                    summary=report.summary(),
                    items=[i.to_document() for i in drift],
                )
        else:
            self._reported_drift = frozenset()
            if pending or self._unsynced:
                record.result = "out_of_sync"
        if record.result == "synced" and self.status.bots:
            self.status.last_success = record.finished or now_iso()
            self.status.metrics.last_sync.set(time.time())

    def _reassert_due(self) -> bool:
        every = self.settings.reassert_every
        if not (self.settings.self_heal and every):
            return False
        return self._last_reassert is None or time.monotonic() - self._last_reassert >= every

    async def _apply(self, ws: Workspace, record: CycleRecord, failures: dict[str, str]) -> bool:
        """Apply under the lease; True when everything planned was applied (or nothing was
        to be)."""

        def show(plan: Plan) -> None:
            record.plan = plan.to_document()

        def on_result(result: OpResult) -> None:
            label = result.operation.label
            chatbot_id = result.operation.bot.chatbot_id
            if result.status == "applied":
                record.applied += 1
                self.log.info("apply", f"applied {label}", chatbot=chatbot_id)
            else:
                record.failed += 1
                failures[chatbot_id] = self._words(f"{label}: {result.message}")
                self.log.error("apply", f"{result.status} {label}: {result.message}")

        def stopping(event: StopEvent, in_flight: int) -> None:
            if event == "stopping":
                self.log.info(
                    "stop",
                    f"no operation starts from now on; waiting up to "
                    f"{self.settings.drain_timeout:g} s for the {in_flight} in flight",
                )
            else:
                self.log.warning("stop", f"abandoning the {in_flight} operation(s) in flight")

        # A fresh renewal first: a process paused past its lease must not send anything.
        if not await asyncio.to_thread(self.lease.renew):
            raise LeaseLost(
                f"the lease on the state was lost ({self.lease.lost or 'it lapsed'}): "
                "nothing was applied"
            )
        stop = Stop(self.settings.drain_timeout, stopping)
        self._apply_stop = stop
        started = time.monotonic()
        try:
            with open_backend(ws.state_path) as inner:
                driver = Unattended(on_result)
                driver.show = show  # type: ignore[method-assign]
                reconciler = Reconciler(
                    replace(ws, skip_missing=True),
                    driver,
                    stop=stop,
                    held=LeasedBackend(inner, self.lease),
                )
                outcome = await reconciler.reconcile()
        finally:
            self._apply_stop = None
            self.status.metrics.apply_duration.observe(time.monotonic() - started)
        if outcome.reason == "NothingToDo":
            return True
        if outcome.state_error is not None:
            record.error = self._words(
                f"applied, but the state was not written: {outcome.state_error}"
            )
            record.failed = max(record.failed, 1)
            return False
        return outcome.report.ok and outcome.interrupted is None

    def _statuses(self, report: DriftReport, revision: Revision, failures: dict[str, str]) -> None:
        at = now_iso()
        classes: dict[str, dict[str, int]] = {}
        for item in report.counted:
            found = classes.setdefault(item.bot.chatbot_id, {})
            found[item.drift_class] = found.get(item.drift_class, 0) + 1
        for chatbot_id, bot in self.status.bots.items():
            drift = classes.get(chatbot_id, {})
            bot.drift = drift
            new: BotStatus
            if chatbot_id in failures:
                new, bot.last_error = "Failed", failures[chatbot_id]
            elif "missing" in drift:
                new = "Missing"
                bot.last_error = "the service does not list this chatbot"
            elif any(c in drift for c in (*HEALABLE, "unmanaged")):
                new = "Drifted"
            elif drift or chatbot_id in self._unsynced:
                new = "OutOfSync"
            else:
                new = "Synced"
            if new == "Synced":
                bot.last_error = None
                bot.last_sync = at
                if self.status.applied_revision == revision.id or not self.settings.auto_apply:
                    bot.revision = revision.id
            if bot.set_status(new, at):
                self.log.info("status", f"{bot.name}: {new}", chatbot=chatbot_id)


def _names(items: Sequence[DriftItem]) -> str:
    names = sorted({i.bot.name for i in items})
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
