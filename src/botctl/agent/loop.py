"""The agent's loop: the second driver of the reconciler (``pipeline.reconciler``; ``botctl
apply`` is the first), with its lease, its revisions and its drift watch.

Every ``interval`` seconds, and at once when triggered (the webhook), a cycle:

1. fetches the source; a new revision is validated and loaded once (``agent.passes.Held``):
   one that fails is *not* used, its located error is reported (status, log, notification)
   and the last good revision stays;
2. with ``--auto-apply``, applies a new revision under the agent's lease, reading only the
   chatbots it changes against the revision last applied (``Passes.apply``); without it,
   reads only those (plan only); every ``--reassert-every`` (with ``--self-heal``) applies
   the whole revision with the write-only values re-sent;
3. otherwise, when the drift watch's next slice is due (``agent.watch``), reads that slice,
   within ``--watch-budget`` percent of each key's limit, and with ``--self-heal`` applies
   what it found changed outside, from the same read.

A slice due between two fetches is a cycle of its own (trigger ``watch``). Each chatbot's
status comes from the pass that last read it (``agent.findings``). A push preempts a slice
being read (``trigger``): the slice is given up, having written nothing, and read again next.

A failing cycle is retried after an exponential backoff (``backoff_base`` doubling, at most
``backoff_max``), never in a hot loop; a revision the plan refuses as it is (a safety cap, a
change the service cannot make: ``pipeline.outcome.terminal``) is *stalled*: reported, not
retried until the next revision. Triggers coalesce: however many arrive, at most one cycle is
pending, run as soon as the one in progress ends; during a backoff it waits for the backoff's
end (webhooks cannot drive a failing agent faster). Only the holder of the state's lease
reconciles: a standby tries to take it every cycle.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from botctl.agent import persist
from botctl.agent.control import Hold, iso, suspension_words
from botctl.agent.findings import Findings, Seen
from botctl.agent.gating import GateSettings, Gating
from botctl.agent.log import Log, Redactor
from botctl.agent.notify import Notifier
from botctl.agent.passes import Held, Passes
from botctl.agent.source import Revision, Source
from botctl.agent.status import AgentStatus, CycleRecord, now_iso
from botctl.agent.watch import DEFAULT_BUDGET, DEFAULT_SLICE, Slice, Watch
from botctl.errors import BotctlError, LockError
from botctl.models import Desired
from botctl.pipeline.outcome import Outcome, terminal
from botctl.pipeline.reconciler import load
from botctl.pipeline.workspace import Workspace
from botctl.reconcile.apply import Stop
from botctl.reconcile.drift import DriftItem
from botctl.resources.agentrecord import AgentRecord, LastApplied
from botctl.service.pacing import RequestStats
from botctl.store.backend import LockInfo
from botctl.store.lock import Lease

Trigger = Literal["start", "interval", "webhook", "retry", "watch", "control"]
PUSHES = ("webhook", "control")  # triggers that preempt a watch slice being read
RECORD_LEASE_WAIT = 120.0  # seconds a record's write waits for another run's lock (yield-lease)
STATE_WRITES_GRACE = 5.0  # seconds a stopping agent waits for its record's writes in line


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
    watch_budget: float = DEFAULT_BUDGET  # percent of each key's limit
    watch_slice: float = DEFAULT_SLICE  # seconds between slices at the budget
    # The lease held only during a cycle (--yield-lease): CI's apply and promote take the
    # state lock between cycles (waiting with --lock-timeout).
    yield_lease: bool = False


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
        gating: Gating | None = None,
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
        self.watch = Watch(settings.watch_budget, settings.interval, settings.watch_slice)
        status.watch = self.watch
        # The gates and stages (--test, --stages): what a revision may reach, its tests.
        self.gating = gating if gating is not None else Gating(GateSettings())
        self.findings = Findings(status, log, redact, tests_failed=self._tests_failed)
        # The state's writers in this process, one at a time: a pass that applies, and the
        # agent's own record (``persist``), each a compare-and-swap write that would fail the
        # other's.
        self.state_writes = asyncio.Lock()
        self.passes = Passes(
            lease,
            log,
            status.metrics,
            self._words,
            drain_timeout=settings.drain_timeout,
            acknowledged=settings.acknowledged,
            stop_for=self._apply_stopping,
            writes=self.state_writes,
            gate_for=self.gating.gate_for,
            scope_for=self.gating.scoper,
        )
        self._wake = asyncio.Event()
        self._pending: Trigger | None = None  # the cycle asked for, not started yet
        self._good: Held | None = None
        self._bad: str | None = None  # the newest revision, when it failed validation
        self._applied: Held | None = None  # the revision last applied whole (auto-apply)
        self._observed: Held | None = None  # the revision last read whole (plan only)
        self._stalled: str | None = None  # a revision the plan refused as it is
        self._apply_stop: Stop | None = None
        self._cycle: asyncio.Task[None] | None = None
        self._reading = False  # a watch slice is being read: a push may preempt it
        self._preempting = False
        self._fetch_due = 0.0  # when the next fetch is due (monotonic)
        self._last_reassert: float | None = None
        self._reported_drift: frozenset[tuple[str, str, str]] = frozenset()
        self._numbers = 0
        self._urgent = False  # the pending cycle ends a backoff (an operator's sync)
        self._held_words: str | None = None  # the hold last logged
        # While standing by: the holder last logged (its holder id), and the wall-clock time
        # its lease lapses unless renewed, when the next try is due (not a whole interval on).
        self._holder_seen: str | None = None
        self._holder_expires: float | None = None

    # --- driving the loop ---------------------------------------------------------------

    def trigger(self, why: Trigger = "webhook", *, urgent: bool = False) -> str:
        """Ask for a cycle; when it will run, in words. At most one is pending: it runs as
        soon as the cycle in progress ends, or, during a backoff, when the backoff ends
        (unless ``urgent``: an operator's sync runs at once). A push or an operator's sync
        preempts a watch slice being read (it has written nothing)."""
        self._pending = self.status.pending = why
        self._urgent = self._urgent or urgent
        self._wake.set()
        if self.status.failures and not self._urgent:
            return f"when the backoff ends ({self.status.next_cycle})"
        if why in PUSHES and self._reading and self._cycle is not None:
            self._preempting = True
            self._cycle.cancel()
            return "now"
        return "after the cycle in progress" if self.status.running is not None else "now"

    def next_cycle_number(self) -> int:
        """The number the next cycle to start will have (the pending one, if any)."""
        return self._numbers + 1

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

    def _apply_stopping(self, stop: Stop | None) -> None:
        self._apply_stop = stop

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
                if self.settings.yield_lease and self.status.role == "active":
                    async with self.state_writes:  # not under a write of the agent's record
                        await asyncio.to_thread(self.lease.release)
                    # Another replica may take the lease and change the record (a suspension
                    # through it): read again on taking the lease back.
                    self.status.controls.known = False
                why = await self._wait()
        finally:
            self.status.role = "stopping"
            with contextlib.suppress(Exception):  # the agent's record queued: written first
                async with asyncio.timeout(STATE_WRITES_GRACE), self.state_writes:
                    pass
            await asyncio.to_thread(self.lease.release)
            self.status.refresh_gauges()

    async def _wait(self) -> Trigger:
        backing_off = self.status.failures > 0
        delay = self.status.backoff if backing_off else self._next_due() - time.monotonic()
        delay = max(0.0, delay)
        if self.status.role == "standby" and self._holder_expires is not None:
            # Try again as the holder's lease would lapse: failover within the lease, not
            # the lease plus an interval (a renewed lease just means another wait).
            delay = min(delay, max(0.05, self._holder_expires - time.time() + 0.05))
        elif self.status.role == "standby" and self.settings.yield_lease:
            delay = min(delay, 1.0)  # a CI run's lock (no lease): soon released
        window = self.status.controls.window()
        if window is not None and window.until is not None and not backing_off:
            # Apply what waited as the window ends, not up to an interval later.
            delay = min(delay, max(0.05, window.until.timestamp() - time.time() + 0.05))
        self.status.next_cycle = now_iso(time.time() + delay)
        self.status.watchdog.due_in(delay)
        end = time.monotonic() + delay
        # A trigger ends the wait, except a backoff's: the cycle it asked for runs at its end.
        while self.stopping is None and (
            self._pending is None or (backing_off and not self._urgent)
        ):
            self._wake.clear()
            try:
                async with asyncio.timeout(max(0.0, end - time.monotonic())):
                    await self._wake.wait()
            except TimeoutError:
                break
        why = self._pending or ("retry" if backing_off else self._due())
        self._pending, self._urgent = None, False  # status.pending too, once it started
        return why

    def _next_due(self) -> float:
        """When the next fetch, watch slice or stage's turn (a soak's end) is due
        (monotonic)."""
        due = self.watch.due_at() if self.status.role == "active" else None
        opening = self.gating.next_opening() if self.status.role == "active" else None
        if opening is not None:
            turn = time.monotonic() + max(0.0, opening - time.time())
            due = turn if due is None else min(due, turn)
        return self._fetch_due if due is None else min(self._fetch_due, due)

    def _due(self) -> Trigger:
        """What the end of a wait is for: a fetch, or only the watch's slice."""
        fetch = self.status.role != "active" or time.monotonic() >= self._fetch_due
        return "interval" if fetch or self._good is None else "watch"

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
        stats = RequestStats()
        self.status.watchdog.follow(stats)
        try:
            await self._reconcile(record, trigger, stats)
        except asyncio.CancelledError:
            record.result = "preempted" if self._preempting else "interrupted"
            raise
        except BotctlError as exc:
            record.result, record.error = "failed", self._words(str(exc))
        except Exception as exc:  # a bug must not end a long-running agent: report it
            record.result = "failed"
            record.error = self._words(f"unexpected {type(exc).__name__}: {exc}")
        finally:
            self._preempting = self._reading = False
            if trigger != "watch":  # the next fetch an interval after this one ends
                self._fetch_due = time.monotonic() + self.settings.interval
            record.finished = now_iso()
            record.duration = time.monotonic() - started
            record.requests = stats.total
            self._learn(stats)
            self.status.running = None
            self.status.watchdog.beat()
            self._finish(record, failed_before)

    def _learn(self, stats: RequestStats) -> None:
        """The cycle's requests counted; the windows its answers announced learned."""
        self.status.metrics.count_requests(stats)
        for key, (limit, longest) in stats.windows.items():
            self.watch.announced(key, limit, longest)

    def _finish(self, record: CycleRecord, failed_before: int) -> None:
        status = self.status
        status.cycles.append(record)
        status.metrics.cycles.labels(result=record.result).inc()
        if record.result == "failed":
            self._failed(record, failed_before)
        elif record.result not in ("standby", "interrupted", "preempted", "stalled"):
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
                read=record.read or None,
                seconds=round(record.duration, 3),
            )
        elif record.result == "preempted":
            self.log.info("cycle", f"cycle {record.number}: preempted by a push (wrote nothing)")
        status.refresh_gauges()

    def _failed(self, record: CycleRecord, failed_before: int) -> None:
        status = self.status
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

    def _words(self, text: str) -> str:
        """An error as the user reads it: the source's paths, secrets masked. Never raises:
        it describes failures, out of file descriptors included."""
        with contextlib.suppress(Exception):
            text = self.source.display(text)
        return self.redact(text)

    async def _reconcile(self, record: CycleRecord, trigger: Trigger, stats: RequestStats) -> None:
        if not await self._holding(record):
            return
        invalid = self._bad is not None
        if trigger != "watch":
            revision = await asyncio.to_thread(self.source.fetch)
            record.revision = revision.id
            invalid = await self._consider(revision)
        if self._good is None:
            record.result = "invalid"
            return
        held = self._good
        record.revision = held.id
        # Every request of the cycle is fenced by the lease: none goes out once it is lost,
        # or when less than its margin is left (a process paused past it sends nothing).
        service = replace(held.ws.service, stats=stats, fence=self.lease.fence)
        await self._work(held, replace(held.ws, service=service), record, stats)
        if invalid and record.result in ("synced", "drifted", "out_of_sync"):
            record.result = "invalid"

    async def _holding(self, record: CycleRecord) -> bool:
        """Whether this agent holds the lease (taken if free); standing by otherwise."""
        status = self.status
        if not await asyncio.to_thread(self.lease.try_acquire):
            holder = await asyncio.to_thread(self.lease.holder)
            status.role = "standby"
            status.lease_holder = holder.describe() if holder is not None else "(changing hands)"
            status.controls.known = False  # the holder may change it: read again on taking over
            self._standing_by(holder)
            record.result = "standby"
            return False
        if status.role != "active":
            how = f" ({self.lease.took_over})" if self.lease.took_over else ""
            self.log.info("lease", f"holding the state's lease: reconciling{how}")
        status.role, status.lease_holder = "active", None
        self._holder_seen = self._holder_expires = None
        if not status.controls.known:
            await self._take_over_record()
        return True

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

    # --- revisions ------------------------------------------------------------------------

    async def _consider(self, revision: Revision) -> bool:
        """Validate (and load, once) a revision not seen yet; True when the newest revision
        is invalid."""
        good_id = self._good.id if self._good is not None else None
        if revision.id in (good_id, self._bad):
            return revision.id == self._bad
        try:
            if revision.problem is not None:
                raise BotctlError(revision.problem)
            ws = self.make_workspace(revision.directory)
            loaded = await asyncio.to_thread(load, ws)
        except BotctlError as exc:
            self._refuse(revision, str(exc), good_id)
            return True
        desired = loaded.desired
        self.redact.add_variables(bot.api_key_env for bot in desired.bots)
        self.log.info("revision", f"new revision {revision.id}: {len(desired.bots)} chatbot(s)")
        self._good, self._bad = Held(revision, ws, loaded), None
        self.status.refuse_revision(None)
        self.status.revision = revision.id
        self.status.bots_in((b.name, b.chatbot_id) for b in desired.bots)
        self.findings.keep({b.chatbot_id for b in desired.bots})
        self._watching(desired, ws)
        self.source.retain({revision.id})
        return False

    def _watching(self, desired: Desired, ws: Workspace) -> None:
        """The watch follows the revision's chatbots; ``--rate-limit`` is each key's limit."""
        by_key: dict[str, list[str]] = {}
        for bot in desired.bots:
            by_key.setdefault(bot.api_key_env, []).append(bot.chatbot_id)
        self.watch.fleet(by_key)
        for key in by_key:
            if ws.service.rate_limit > 0:
                self.watch.limit(key, ws.service.rate_limit, "rate-limit")
            elif self.watch.keys[key].source == "rate-limit":
                self.watch.limit(key, None, "unknown")  # no longer given: learned again

    def _refuse(self, revision: Revision, problem: str, good_id: str | None) -> None:
        """``revision`` is invalid: reported (status, log, notification), never applied."""
        self._bad = revision.id
        error = self._words(problem)
        self.status.refuse_revision({"revision": revision.id, "error": error})
        keeping = f"; keeping {good_id}" if good_id else ""
        told = f"is invalid and was not applied{keeping}"
        self._not_applied(revision, f"is invalid{keeping}", told, error, keptRevision=good_id)

    def _not_applied(
        self, revision: Revision, why: str, told: str, error: str, **fields: str | None
    ) -> None:
        """A revision not applied: ``why`` in the log, ``told`` in a ``failed``
        notification (with ``fields``)."""
        self.log.error("revision", f"revision {revision.id} {why}: {error}")
        self.notifier.notify(
            "failed",
            f"botctl agent: revision {revision.short} of {self.status.source} {told}:\n{error}",
            source=self.status.source,
            revision=revision.id,
            error=error,
            **fields,
        )

    # --- the work of a cycle ----------------------------------------------------------------

    async def _work(
        self, held: Held, ws: Workspace, record: CycleRecord, stats: RequestStats
    ) -> None:
        """What this cycle reads and writes: a new revision applied (or observed), a
        reassertion, or the watch's slice when due; else nothing (the fleet as last read)."""
        reassert = self._reassert_due()
        new = held.id != self.status.applied_revision
        auto = self.settings.auto_apply
        applying = auto and held.id != self._stalled
        if applying and not (new or reassert) and self.gating.settings.active:
            # What CI recorded meanwhile, a soak that ended: a stage's turn may have come.
            self.gating.refresh(held, await self.passes.state(held, ws))
            self._show_gates()
        wants = applying and (new or reassert or self.gating.due(held))
        hold = self._hold(record) if auto else None
        if wants and hold is not None:
            self._held(record, hold)  # drift is still read and reported
        if wants and hold is None:
            await self._apply(held, ws, record, reassert=reassert)
            await self._promote(held, ws, record)
        elif (wants or not auto) and self._observed is not held:
            await self._observe(held, ws, record)
        elif self._slice_due():
            await self._slice(held, ws, record, stats, hold)
        else:
            self._report_drift(record)

    async def _promote(self, held: Held, ws: Workspace, record: CycleRecord) -> None:
        """The stages the pass's tests opened (no soak): their turn in the same cycle, one
        pass each at most."""
        for _ in self.gating.settings.stages:
            if self.stopping is not None or record.result == "failed":
                return
            if not self.gating.due(held):
                return
            await self._apply(held, ws, record, reassert=False, promoting=True)

    async def _apply(
        self,
        held: Held,
        ws: Workspace,
        record: CycleRecord,
        *,
        reassert: bool,
        promoting: bool = False,
    ) -> None:
        new = promoting or held.id != self.status.applied_revision
        base = None if reassert else self._applied
        try:
            outcome, seen = await self.passes.apply(
                held, base, replace(ws, reassert=reassert), record
            )
        except BotctlError as exc:
            if not terminal(exc):
                raise
            self._stall(held, record, self._words(str(exc)))
            return
        if outcome.reason == "Held":
            self.log.info("apply", f"revision {held.id} held: {outcome.held}")
        if outcome.reason == "StateNotWritten":
            record.error = self._words(
                f"applied, but the state was not written: {outcome.state_error}"
            )
            record.failed = max(record.failed, 1)
        await self._remember_applied(held.revision, outcome)
        if outcome.applied:
            if new:
                self.status.applied_revision, self._applied = held.id, held
                self._stalled = self.status.stalled = None
            if reassert:
                self._last_reassert = time.monotonic()
        if self.stopping is not None:
            record.result = "interrupted"
            return
        self._gated(held, outcome, record)
        self._seen(seen, held, record, whole=base is None)
        if outcome.applied and new:
            self.findings.now_at(held.id)
        self._conclude(record, outcome.applied, seen.failures, new=new)

    async def _observe(self, held: Held, ws: Workspace, record: CycleRecord) -> None:
        """Plan only: a new revision's changed chatbots read (all of them, the first)."""
        chatbots = self.passes.changed(held, self._observed)
        seen, _ = await self.passes.observe(held, ws, chatbots)
        self._observed = held
        self._seen(seen, held, record, whole=chatbots is None)
        self.findings.now_at(held.id)  # the others' files did not change
        self._report_drift(record)

    async def _slice(
        self, held: Held, ws: Workspace, record: CycleRecord, stats: RequestStats, hold: Hold | None
    ) -> None:
        """The watch's slice due, key by key: read at the key's budget, classified, and with
        --self-heal what it found changed outside applied from that same read (unless
        ``hold``: a suspension or a deny window)."""
        taken = self.watch.take()
        drifted: list[DriftItem] = []
        failures: dict[str, str] = {}
        applied = True
        for key, chatbots in taken.parts.items():
            if self._pending in PUSHES:  # a push came meanwhile: it goes first
                self.status.metrics.watch_slices.labels(result="preempted").inc()
                record.result = "preempted"
                return
            part = Slice({key: chatbots}, taken.at)
            seen, live = await self._read_slice(held, ws, part, stats)
            record.read += len(chatbots)
            found = seen.healable() if self.settings.self_heal else []
            if found and hold is not None:
                self._held(record, hold)
                found = []
            # Never a revision the gates hold back from a chatbot (tests failed, a stage).
            found = [i for i in found if self.gating.staging.admits(i.bot.chatbot_id)]
            if found:
                ids = {i.bot.chatbot_id for i in found}
                outcome, healed = await self.passes.heal(held, ws, record, ids, live)
                await self._remember_applied(held.revision, outcome)
                self._seen(healed, held, record)
                drifted += found
                failures.update(healed.failures)
                applied = applied and outcome.applied
        if drifted:
            self._conclude(record, applied, failures, new=False, drifted=drifted)
        else:
            self._report_drift(record)

    async def _read_slice(
        self, held: Held, ws: Workspace, part: Slice, stats: RequestStats
    ) -> tuple[Seen, Any]:
        """One key's part of a slice, read at its budget's pace (never a burst the key's
        other users would meet); a push may preempt it: it has written nothing."""
        ((key, chatbots),) = part.parts.items()
        pace, floor = self.watch.pace(key), ws.service.rate_limit
        if pace is not None:
            rate = min(pace, floor) if floor > 0 else pace
            ws = replace(ws, service=replace(ws.service, rate_limit=rate))
        metrics, sent = self.status.metrics, stats.by_key[key]
        self._reading = True
        try:
            seen, live = await self.passes.observe(held, ws, chatbots)
        except asyncio.CancelledError:
            metrics.watch_slices.labels(result="preempted" if self._preempting else "failed").inc()
            raise
        except BaseException:
            metrics.watch_slices.labels(result="failed").inc()
            raise
        finally:
            self._reading = False
        self.watch.done(part, {key: stats.by_key[key] - sent})
        metrics.watch_slices.labels(result="read").inc()
        metrics.watch_read.inc(len(chatbots))
        self._seen(seen, held, record=None)
        return seen, live

    def _seen(
        self, seen: Seen, held: Held, record: CycleRecord | None, *, whole: bool = False
    ) -> None:
        """A pass's findings into the statuses; its chatbots read now (``whole``: every
        chatbot was: the watch's next slice one spacing on)."""
        at = self.status.applied_revision == held.id or not self.settings.auto_apply
        self.findings.update(seen, held.id, at_revision=at)
        self.watch.read(seen.covered)
        if whole:
            self.watch.restart()
        self.status.ready = True
        if record is not None:
            record.read = max(record.read, len(seen.covered))

    def _gated(self, held: Held, outcome: Outcome, record: CycleRecord) -> None:
        """What the gates say after a pass: the stages in the status, and a test that failed
        in the log and a ``test_failed`` notification."""
        news = self.gating.after(held, outcome, source=self.status.source)
        self._show_gates()
        if news is None:
            return
        record.tests_failed = True
        text = self._words(news.text)
        self.log.error("test", text, revision=held.id)
        self.notifier.notify("test_failed", text, **news.fields)

    def _show_gates(self) -> None:
        """Each stage, and why a chatbot waits, in the status."""
        self.status.stages = self.gating.documents()
        for bot in self.status.bots.values():
            held = self.gating.held(bot.chatbot_id)
            bot.held = self._words(held) if held is not None else None

    def _tests_failed(self, chatbot_id: str) -> str | None:
        """Why a chatbot's tests hold the revision back from it (its status: TestFailed)."""
        if not self.gating.failed(chatbot_id):
            return None
        return self._words(self.gating.held(chatbot_id) or "its tests failed")

    def _stall(self, held: Held, record: CycleRecord, error: str) -> None:
        """The plan of ``held`` cannot be applied as it is: reported once, not retried until
        the next revision (the watch goes on)."""
        self._stalled = held.id
        self.status.stalled = {"revision": held.id, "error": error}
        record.result, record.error = "stalled", error
        told = "cannot be applied as it is (not retried until the next revision)"
        self._not_applied(held.revision, "cannot be applied as it is", told, error)

    def _conclude(
        self,
        record: CycleRecord,
        applied_ok: bool,
        failures: Mapping[str, str],
        *,
        new: bool,
        drifted: Sequence[DriftItem] = (),
    ) -> None:
        """The result of a cycle that applied (or tried to)."""
        if record.failed:  # every failed operation is in ``failures`` too
            record.result = "failed"
            record.error = record.error or "; ".join(sorted(set(failures.values())))[:2000]
        elif record.tests_failed:
            record.result = "test_failed"
            self._reported_drift = frozenset()
        elif applied_ok and record.applied and new:
            record.result = "applied"
            self._reported_drift = frozenset()
            self.notifier.notify(
                "synced",
                f"botctl agent: revision {self._good.revision.short if self._good else ''} "
                f"applied ({record.applied} operation(s))",
                source=self.status.source,
                revision=record.revision,
                applied=record.applied,
            )
        elif applied_ok and record.applied:
            record.result = "healed"
            self._reported_drift = frozenset()
            if drifted:  # a scheduled re-send (--reassert-every) alone is routine: no news
                self.notifier.notify(
                    "healed",
                    f"botctl agent: healed {len(drifted)} value(s) changed outside on "
                    f"{_names(drifted)}",
                    source=self.status.source,
                    revision=record.revision,
                    items=[i.to_document() for i in drifted],
                )
        else:
            self._report_drift(record)

    def _report_drift(self, record: CycleRecord) -> None:
        """The fleet's result, from every chatbot's last read; drift notified when the set
        of drifted values changed."""
        items = self.findings.fleet()
        drift = [i for i in items if i.drift_class != "pending"]
        record.result = "synced"
        if drift:
            record.result = "drifted"
            keys = frozenset(i.key for i in drift)
            if keys != self._reported_drift:
                self._reported_drift = keys
                summary: dict[str, int] = {}
                for item in drift:  # by class, as ``DriftReport.summary`` names them
                    name = "conflicts" if item.drift_class == "conflict" else item.drift_class
                    summary[name] = summary.get(name, 0) + 1
                self.notifier.notify(
                    "drift",
                    f"botctl agent: drift found on {_names(drift)} ({len(drift)} value(s))",
                    source=self.status.source,
                    revision=self.status.revision,
                    summary=summary,
                    items=[i.to_document() for i in drift],
                )
            return
        self._reported_drift = frozenset()
        if len(drift) < len(items) or self.findings.unsynced:
            record.result = "out_of_sync"
        if record.result == "synced" and self.status.bots:
            self.status.last_success = record.finished or now_iso()
            self.status.metrics.last_sync.set(time.time())

    def _slice_due(self) -> bool:
        """Whether the watch's next slice is due, or nearly: a fetch and a slice due within
        moments of each other are one cycle, not two."""
        due = self.watch.due_at()
        slack = min(0.5, self.settings.interval / 2)
        return due is not None and due <= time.monotonic() + slack

    def _reassert_due(self) -> bool:
        every = self.settings.reassert_every
        if not (self.settings.self_heal and every):
            return False
        return self._last_reassert is None or time.monotonic() - self._last_reassert >= every

    # --- controls: suspension, deny windows, the record kept in the state -----------------

    def _hold(self, record: CycleRecord) -> Hold | None:
        """What holds this cycle's applying (a suspension, a deny window; None: it may
        apply). An --override-window it uses is on its record and in the log."""
        hold, override = self.status.controls.decide()
        if override is not None:
            record.override = override.to_document()
            self.log.info(
                "control",
                f"applying inside a deny window: overridden by {override.by or 'an operator'}: "
                f"{override.reason}",
            )
        if hold is None and self._held_words is not None:
            self._held_words = None
            self.log.info("control", "nothing holds applying any more")
        return hold

    def _held(self, record: CycleRecord, hold: Hold) -> None:
        """The cycle had something to apply and did not: said on its record, and in the log
        once per hold (not every cycle of a weekend's window)."""
        record.held = hold.words
        if hold.words != self._held_words:
            self._held_words = hold.words
            self.log.warning("control", f"not applying: {hold.words}")

    async def _take_over_record(self) -> None:
        """On taking the lease: the suspension and the revisions last applied, as the
        replica that held it before left them in the state."""
        async with self.state_writes:  # after a write of the record still waiting for the lease
            found = await asyncio.to_thread(persist.read_record, self.lease.where)
        controls = self.status.controls
        was, controls.suspended, controls.known = controls.suspended, found.suspended, True
        self.status.applied = dict(found.applied)
        if found.suspended is not None and found.suspended != was:
            self.log.warning("control", f"the state says: {suspension_words(found.suspended)}")
        elif found.suspended is None and was is not None:
            self.log.info("control", "the state says: not suspended (resumed through a replica)")

    async def persist(self, change: Callable[[AgentRecord], None], message: str) -> None:
        """Write the agent's record in the state under the lease, between passes (with
        --yield-lease, the lease taken for the write when no cycle holds it)."""
        async with self.state_writes:
            taken = self.settings.yield_lease and self.lease.info is None
            if taken:
                await self._lease_for_record()
            try:
                await asyncio.to_thread(persist.update_record, self.lease, change, message)
            finally:
                if taken and self.status.running is None:
                    await asyncio.to_thread(self.lease.release)

    async def _lease_for_record(self) -> None:
        """--yield-lease, between cycles: the lease taken for a write of the agent's record,
        waiting (as CI's runs wait with --lock-timeout) while another run holds the state's
        lock, at most ``RECORD_LEASE_WAIT`` seconds; ``LockError`` naming the holder after
        that, or once the agent is stopping."""
        deadline = time.monotonic() + RECORD_LEASE_WAIT
        while not await asyncio.to_thread(self.lease.try_acquire):
            if self.stopping is not None or time.monotonic() >= deadline:
                holder = await asyncio.to_thread(self.lease.holder)
                by = holder.describe() if holder is not None else "another run"
                stopping = self.stopping is not None
                why = "the agent is stopping" if stopping else f"waited {RECORD_LEASE_WAIT:g} s"
                raise LockError(f"the state's lock is held by {by} ({why}): not written")
            await asyncio.sleep(0.5)

    async def _remember_applied(self, revision: Revision, outcome: Outcome) -> None:
        """Each chatbot the pass changed: ``revision`` and now, in status and in the state (a
        failed write is said and kept in memory: the apply itself succeeded)."""
        chatbots = outcome.report.written()
        if not chatbots:
            return
        found = LastApplied(revision.id, iso(datetime.now(UTC)))
        self.status.applied.update(dict.fromkeys(chatbots, found))
        current = set(self.status.bots)

        def change(record: AgentRecord) -> None:
            record.applied.update(dict.fromkeys(chatbots, found))
            for gone in set(record.applied) - current:  # chatbots the configuration dropped
                del record.applied[gone]

        try:
            await self.persist(change, f"botctl agent: {revision.short} applied")
        except Exception as exc:  # the apply succeeded: its cycle does not fail for this
            self.log.error(
                "state",
                f"the chatbots' last applied revision was not recorded: {type(exc).__name__}: "
                f"{self._words(str(exc))}",
            )


def _names(items: Sequence[DriftItem]) -> str:
    names = sorted({i.bot.name for i in items})
    shown = ", ".join(names[:5])
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")
