"""What the agent knows: each chatbot's status, the revisions, the recent cycles; and the same
as Prometheus metrics. Plain data: ``listener`` serves it, ``page`` shows it."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from botctl.agent.control import Controls
from botctl.agent.diffview import BotDiff
from botctl.agent.watch import Watch
from botctl.resources.agentrecord import LastApplied
from botctl.service.pacing import RequestStats

BotStatus = Literal["Synced", "OutOfSync", "Drifted", "Failed", "TestFailed", "Missing", "Unknown"]
STATUSES: tuple[BotStatus, ...] = (
    "Synced",
    "OutOfSync",
    "Drifted",
    "Failed",
    "TestFailed",  # its tests failed at the revision (--test): not applied again until it changes
    "Missing",
    "Unknown",
)
DRIFT_CLASSES = ("changed_outside", "pending", "conflict", "unknown_origin", "missing", "unmanaged")
CycleResult = Literal[
    "synced",  # nothing to do: every chatbot as declared
    "applied",  # a new revision applied
    "healed",  # drift re-applied (--self-heal, --reassert-every)
    "out_of_sync",  # changes pending, not applied (plan only)
    "drifted",  # drift found and only reported
    "invalid",  # the newest revision failed validation; the last good one kept
    "failed",  # the cycle failed (source, service, state, apply)
    "standby",  # another agent holds the lease
    "interrupted",  # stopped by a signal
    "test_failed",  # applied, and a gate's conversation test failed (--test)
    "preempted",  # a drift watch read given up for a push (it wrote nothing)
    "stalled",  # the revision cannot be applied as it is: not retried until the next one
]
CYCLE_RESULTS: tuple[str, ...] = CycleResult.__args__  # type: ignore[attr-defined]
# What became of a webhook delivery: refused (401, 408, 413), pong (a ping), ignored (not a
# push, or a push to another branch), duplicate (seen before), standby (503: not the lease
# holder), triggered (a cycle asked for).
WEBHOOK_RESULTS = ("refused", "pong", "ignored", "duplicate", "standby", "triggered")
# The control API (``botctl agent sync|suspend|resume``): what each request became.
CONTROL_ACTIONS = ("sync", "suspend", "resume")
CONTROL_RESULTS = ("done", "unauthorized", "standby", "invalid")
CLOSE_REASONS = ("timeout", "evicted", "refused")


def now_iso(at: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if at is None else at, UTC).isoformat(
        timespec="seconds"
    )


@dataclass
class BotState:
    name: str
    chatbot_id: str
    status: BotStatus = "Unknown"
    revision: str | None = None  # the revision last applied to it (or found in sync)
    last_sync: str | None = None  # when it was last found or made as declared
    last_change: str | None = None  # when its status last changed
    last_error: str | None = None
    drift: dict[str, int] = field(default_factory=dict)  # drift class -> items
    diff: BotDiff | None = None  # what drifted or would be applied, value by value
    last_read: str | None = None  # when the status was last made from a read of the service
    held: str | None = None  # why the revision is not written to it now (--test, --stages)

    def set_status(self, status: BotStatus, at: str) -> bool:
        changed = status != self.status
        if changed:
            self.status, self.last_change = status, at
        return changed

    def to_document(self, applied: LastApplied | None = None) -> dict[str, Any]:
        """``applied``: the revision whose apply last changed it, and when."""
        diff = self.diff or BotDiff((), 0)
        return {
            "name": self.name,
            "chatbotId": self.chatbot_id,
            "status": self.status,
            "revision": self.revision,
            "lastAppliedRevision": applied.revision if applied else None,
            "lastApplied": applied.at if applied else None,
            "lastSync": self.last_sync,
            "lastChange": self.last_change,
            "lastError": self.last_error,
            "drift": dict(self.drift),
            "diff": diff.to_document(),
            "lastRead": self.last_read,
            "held": self.held,
        }


@dataclass
class CycleRecord:
    number: int
    trigger: str  # "start", "interval", "webhook", "retry"
    started: str
    revision: str | None = None
    result: CycleResult = "synced"
    finished: str | None = None
    duration: float = 0.0
    applied: int = 0
    failed: int = 0
    error: str | None = None
    plan: dict[str, Any] | None = None  # the plan's JSON when the cycle applied
    held: str | None = None  # why it applied nothing it would have (suspended, a window)
    override: dict[str, Any] | None = None  # the --override-window that let it apply
    read: int = 0  # chatbots the cycle read from the service
    requests: int = 0  # requests the cycle sent
    tests_failed: bool = False  # a gate's conversation test failed (--test)

    def to_document(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "trigger": self.trigger,
            "started": self.started,
            "finished": self.finished,
            "durationSeconds": round(self.duration, 3),
            "revision": self.revision,
            "result": self.result,
            "applied": self.applied,
            "failed": self.failed,
            "error": self.error,
            "plan": self.plan,
            "held": self.held,
            "windowOverride": self.override,
            "read": self.read,
            "requests": self.requests,
        }


class Metrics:
    """The agent's Prometheus metrics, in a registry of its own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.cycles = Counter(
            "botctl_agent_cycles", "Reconcile cycles by result.", ["result"], registry=r
        )
        self.chatbots = Gauge(
            "botctl_agent_chatbots", "Chatbots by status.", ["status"], registry=r
        )
        self.drift = Gauge(
            "botctl_agent_drift_items", "Drift items by class.", ["drift_class"], registry=r
        )
        self.requests = Counter(
            "botctl_agent_requests",
            "Requests to the service by operation and HTTP status (error: no answer).",
            ["operation", "status"],
            registry=r,
        )
        self.retries = Counter("botctl_agent_retries", "Requests retried.", registry=r)
        self.throttled = Counter(
            "botctl_agent_throttled", "Answers 429 (rate limited).", registry=r
        )
        self.apply_duration = Histogram(
            "botctl_agent_apply_duration_seconds",
            "Duration of applies.",
            buckets=(0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
            registry=r,
        )
        self.last_sync = Gauge(
            "botctl_agent_last_sync_timestamp_seconds",
            "Unix time of the last cycle that left every chatbot as declared.",
            registry=r,
        )
        self.revision = Info(
            "botctl_agent_revision", "The revision the agent reconciles.", registry=r
        )
        self.backoff = Gauge(
            "botctl_agent_backoff_seconds",
            "Delay before the next cycle after failures (0: none).",
            registry=r,
        )
        self.lease = Gauge(
            "botctl_agent_lease_held", "1 while this agent holds the state's lease.", registry=r
        )
        self.notifications = Counter(
            "botctl_agent_notifications",
            "Notifications by outcome (sent, failed after retries, dropped).",
            ["result"],
            registry=r,
        )
        self.webhooks = Counter(
            "botctl_agent_webhooks",
            "Webhook deliveries by outcome (triggered, duplicate, ignored, refused, ...).",
            ["result"],
            registry=r,
        )
        self.connections_closed = Counter(
            "botctl_agent_http_connections_closed",
            "Listener connections the agent closed: timeout (no whole request head in time), "
            "evicted (the oldest idle one, to make room), refused (every one busy).",
            ["reason"],
            registry=r,
        )
        self._steering_metrics(r)
        for result in CYCLE_RESULTS:
            self.cycles.labels(result=result)
        for result in WEBHOOK_RESULTS:
            self.webhooks.labels(result=result)
        for reason in CLOSE_REASONS:
            self.connections_closed.labels(reason=reason)
        for status in STATUSES:
            self.chatbots.labels(status=status).set(0)
        for drift_class in DRIFT_CLASSES:
            self.drift.labels(drift_class=drift_class).set(0)
        self.revision.info({"revision": "", "source": ""})
        self._watch(r)

    def _watch(self, r: CollectorRegistry) -> None:
        """The drift watch's: its round, its oldest read, its budget, its slices."""
        self.watch_cover = Gauge(
            "botctl_agent_watch_cover_seconds",
            "Seconds the drift watch takes to read every chatbot once, within its budget.",
            registry=r,
        )
        self.watch_oldest = Gauge(
            "botctl_agent_watch_oldest_read_seconds",
            "Age of the oldest read a chatbot's status comes from.",
            registry=r,
        )
        self.watch_budget = Gauge(
            "botctl_agent_watch_budget_requests_per_second",
            "Requests per second the drift watch may send, by API key (its share of the "
            "key's limit).",
            ["api_key_env"],
            registry=r,
        )
        self.watch_slices = Counter(
            "botctl_agent_watch_slices",
            "Drift watch slices by outcome: read, preempted (by a push), failed.",
            ["result"],
            registry=r,
        )
        self.watch_read = Counter(
            "botctl_agent_watch_chatbots_read", "Chatbots the drift watch read.", registry=r
        )
        for result in ("read", "preempted", "failed"):
            self.watch_slices.labels(result=result)

    def _steering_metrics(self, r: CollectorRegistry) -> None:
        """What holds applying, the refused revision, the control API's requests."""
        self.invalid_revision = Gauge(
            "botctl_agent_invalid_revision",
            "1 while the newest revision (the label) is refused as invalid and the last good one "
            "is kept; 0 (revision empty) otherwise.",
            ["revision"],
            registry=r,
        )
        self.suspended = Gauge(
            "botctl_agent_suspended",
            "1 while the agent is suspended (botctl agent suspend): it applies nothing.",
            registry=r,
        )
        self.deny_window = Gauge(
            "botctl_agent_deny_window_active",
            "1 while a --deny-window holds: the agent applies nothing.",
            registry=r,
        )
        self.control = Counter(
            "botctl_agent_control_requests",
            "Requests to the control API by action and outcome (done, unauthorized, standby, "
            "invalid).",
            ["action", "result"],
            registry=r,
        )
        for action in CONTROL_ACTIONS:
            for outcome in CONTROL_RESULTS:
                self.control.labels(action=action, result=outcome)
        self.invalid_revision.labels(revision="").set(0)

    def count_requests(self, stats: RequestStats) -> None:
        for (operation, status), count in stats.responses.items():
            self.requests.labels(operation=operation, status=status).inc(count)
        if stats.retries:
            self.retries.inc(stats.retries)
        if stats.rate_limited:
            self.throttled.inc(stats.rate_limited)


class Watchdog:
    """Whether the loop moves. It is stalled when nothing happened for ``limit`` seconds past
    the later of its last sign of life (a cycle started or finished, a request of the cycle
    sent or answered) and the time the next cycle was due (a backoff is no stall)."""

    def __init__(self, limit: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self.clock = clock
        self._alive = clock()
        self._due = self._alive
        self._stats: RequestStats | None = None
        self._requests = 0

    def beat(self) -> None:
        self._alive = self.clock()

    def due_in(self, seconds: float) -> None:
        self._due = self.clock() + seconds

    def follow(self, stats: RequestStats) -> None:
        """A cycle's requests: each one sent or answered is a sign of life (a long apply
        that makes progress is no stall)."""
        self._stats, self._requests = stats, -1

    def stalled_for(self) -> float | None:
        """Seconds without a sign of life past the due time, once over the limit; else None."""
        now = self.clock()
        if self._stats is not None:
            requests = self._stats.total + sum(self._stats.responses.values())
            if requests != self._requests:
                self._requests, self._alive = requests, now
        quiet = now - max(self._alive, self._due)
        return quiet if quiet > self.limit else None


Role = Literal["starting", "active", "standby", "stopping"]


class AgentStatus:
    """Everything ``/status`` and the page show, updated by the loop."""

    def __init__(
        self,
        source: str,
        *,
        history: int = 20,
        watchdog: float = 300.0,
        controls: Controls | None = None,
    ) -> None:
        self.source = source
        # Suspension and deny windows: what may hold applying (``control``).
        self.controls = controls if controls is not None else Controls()
        # Each chatbot's last applied revision and when, by chatbot id (kept in the state).
        self.applied: dict[str, LastApplied] = {}
        self.role: Role = "starting"
        self.revision: str | None = None  # the good revision reconciled
        self.applied_revision: str | None = None
        self.invalid: dict[str, str] | None = None  # {revision, error} of a refused revision
        self.bots: dict[str, BotState] = {}
        self.cycles: deque[CycleRecord] = deque(maxlen=history)
        self.ready = False  # a cycle completed and the service answered
        self.last_success: str | None = None
        self.failures = 0  # consecutive failed cycles
        self.backoff = 0.0
        self.next_cycle: str | None = None
        self.lease_holder: str | None = None
        self.last_error: str | None = None
        self.running: int | None = None  # the number of the cycle in progress
        self.pending: str | None = None  # the trigger of the cycle asked for and not started
        # A revision the plan refused as it is (a safety cap): {revision, error}.
        self.stalled: dict[str, str] | None = None
        self.watch: Watch | None = None  # the drift watch's schedule, once there is one
        # Each stage (--stages): its revision and its gate (``agent.stages.gate_document``).
        self.stages: list[dict[str, Any]] = []
        self.watchdog = Watchdog(watchdog)
        self.metrics = Metrics()
        self.metrics.suspended.set_function(lambda: self.controls.suspended is not None)
        self.metrics.deny_window.set_function(lambda: self.controls.window() is not None)

    def refuse_revision(self, invalid: dict[str, str] | None) -> None:
        """The newest revision refused (``{revision, error}``), or None once a good one is
        the newest: in ``/status``, on the page and in ``botctl_agent_invalid_revision``."""
        self.invalid = invalid
        gauge = self.metrics.invalid_revision
        gauge.clear()
        gauge.labels(revision=invalid["revision"] if invalid else "").set(1 if invalid else 0)

    @property
    def serving_role(self) -> bool:
        """Ready (``/readyz``): this replica knows its role and can play it, active or
        standby; not while starting (the lease not yet tried) or stopping. The service's
        health is not part of it (``ready``, ``/status``, ``/metrics`` say that)."""
        return self.role in ("active", "standby")

    def bots_in(self, refs: Iterable[tuple[str, str]]) -> None:
        """Keep exactly the chatbots of the reconciled revision (name, chatbot id)."""
        wanted = dict(refs)
        for chatbot_id in list(self.bots):
            if chatbot_id not in set(wanted.values()):
                del self.bots[chatbot_id]
        for name, chatbot_id in wanted.items():
            bot = self.bots.setdefault(chatbot_id, BotState(name, chatbot_id))
            bot.name = name

    def drift_summary(self) -> dict[str, int]:
        total = dict.fromkeys(DRIFT_CLASSES, 0)
        for bot in self.bots.values():
            for drift_class, count in bot.drift.items():
                total[drift_class] = total.get(drift_class, 0) + count
        return total

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = dict.fromkeys(STATUSES, 0)
        for bot in self.bots.values():
            found[bot.status] += 1
        return found

    def refresh_gauges(self) -> None:
        m = self.metrics
        for status, count in self.counts().items():
            m.chatbots.labels(status=status).set(count)
        for drift_class, count in self.drift_summary().items():
            m.drift.labels(drift_class=drift_class).set(count)
        m.backoff.set(self.backoff)
        m.lease.set(1 if self.role == "active" else 0)
        m.revision.info({"revision": self.revision or "", "source": self.source})
        self.refresh_watch_gauges()

    def refresh_watch_gauges(self) -> None:
        """The watch's gauges, as of now (``/metrics`` asks at each scrape: the oldest read
        ages between cycles)."""
        m = self.metrics
        if self.watch is not None:
            cover = self.watch.cover_seconds()
            m.watch_cover.set(cover or 0)
            m.watch_oldest.set(self.watch.oldest()[1] or 0)
            for name in self.watch.keys:
                budget = self.watch.shape(name).budget
                m.watch_budget.labels(api_key_env=name).set(budget or 0)

    def to_document(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "role": self.role,
            "ready": self.ready,
            "revision": self.revision,
            "appliedRevision": self.applied_revision,
            "invalidRevision": self.invalid,
            "lastSuccess": self.last_success,
            "lastError": self.last_error,
            "consecutiveFailures": self.failures,
            "backoffSeconds": self.backoff,
            "nextCycle": self.next_cycle,
            "cycleInProgress": self.running,
            "pendingCycle": self.pending,
            "leaseHolder": self.lease_holder,
            "stalledRevision": self.stalled,
            "watch": self.watch.to_document() if self.watch is not None else None,
            "summary": self.counts(),
            "drift": self.drift_summary(),
            **self.controls.to_document(),
            "stages": self.stages,
            "chatbots": [
                b.to_document(self.applied.get(b.chatbot_id))
                for b in sorted(self.bots.values(), key=lambda b: b.name)
            ],
            "cycles": [c.to_document() for c in reversed(self.cycles)],
        }
