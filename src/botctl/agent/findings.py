"""What the agent knows of each chatbot, from the last pass that read it: its drift items,
the changes no read can check, its status; and what they make of the fleet.

A pass reads some chatbots (a watch slice, the chatbots a revision changes, those an apply
wrote to); its ``Seen`` replaces what was known of those, and only those: the others keep
what their own last read said. A chatbot's status therefore says when it was last read
(``lastRead``)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from botctl.agent.diffview import diffs
from botctl.agent.log import Log, Redactor
from botctl.agent.status import AgentStatus, BotStatus, now_iso
from botctl.plan import Plan
from botctl.reconcile.drift import DriftItem, DriftReport

HEALABLE = ("changed_outside", "conflict")


@dataclass(frozen=True)
class Seen:
    """One pass's findings: the drift of the chatbots it read (``covered``), its plan (for
    the changes no read can check), and the chatbots whose operations failed, with why."""

    report: DriftReport
    plan: Plan
    covered: frozenset[str]
    failures: Mapping[str, str] = field(default_factory=dict)

    def healable(self) -> list[DriftItem]:
        return [i for i in self.report.counted if i.drift_class in HEALABLE]


def unsynced_of(plan: Plan) -> set[str]:
    """What the plan would send beyond what drift classifies: a value nothing can read and
    nothing records (confidence unknown). Those chatbots are out of sync too."""
    return {
        bot.chatbot_id
        for bot, change in plan.changes()
        if change.confidence == "unknown" and change.action != "reassert"
    }


class Findings:
    """Each chatbot's findings, and the statuses they make in ``status``."""

    def __init__(
        self,
        status: AgentStatus,
        log: Log,
        redact: Redactor,
        tests_failed: Callable[[str], str | None] = lambda chatbot_id: None,
    ) -> None:
        self.status = status
        self.log = log
        self.redact = redact
        # Why a chatbot's tests failed at the revision (--test): its status is TestFailed.
        self.tests_failed = tests_failed
        self.items: dict[str, tuple[DriftItem, ...]] = {}
        self.unsynced: set[str] = set()

    def keep(self, chatbot_ids: Collection[str]) -> None:
        """Only these chatbots are the fleet's now (a new revision's)."""
        for chatbot_id in list(self.items):
            if chatbot_id not in chatbot_ids:
                del self.items[chatbot_id]
        self.unsynced &= set(chatbot_ids)

    def update(self, seen: Seen, revision: str, *, at_revision: bool) -> None:
        """What ``seen`` read replaces what was known of those chatbots; their statuses
        follow. ``at_revision``: the chatbots found as declared run ``revision``."""
        by_bot: dict[str, list[DriftItem]] = {c: [] for c in seen.covered}
        for item in seen.report.counted:
            if item.bot.chatbot_id in by_bot:
                by_bot[item.bot.chatbot_id].append(item)
        unsynced = unsynced_of(seen.plan)
        for chatbot_id, items in by_bot.items():
            self.items[chatbot_id] = tuple(items)
            if chatbot_id in unsynced:
                self.unsynced.add(chatbot_id)
            else:
                self.unsynced.discard(chatbot_id)
        self._statuses(seen.covered, seen.failures, revision, at_revision=at_revision)
        found = diffs(seen.report, seen.plan, self.redact)
        for chatbot_id in seen.covered:  # value by value, from the same read (agent.diffview)
            bot = self.status.bots.get(chatbot_id)
            if bot is not None:
                bot.diff = found.get(chatbot_id)

    def _statuses(
        self,
        covered: Collection[str],
        failures: Mapping[str, str],
        revision: str,
        *,
        at_revision: bool,
    ) -> None:
        at = now_iso()
        for chatbot_id in covered:
            bot = self.status.bots.get(chatbot_id)
            if bot is None:
                continue
            drift: dict[str, int] = {}
            for item in self.items.get(chatbot_id, ()):
                drift[item.drift_class] = drift.get(item.drift_class, 0) + 1
            bot.drift, bot.last_read = drift, at
            new = self._status(chatbot_id, drift, failures)
            tests = self.tests_failed(chatbot_id)
            if tests is not None and new not in ("Failed", "Missing"):
                new, bot.last_error = "TestFailed", tests
            elif chatbot_id in failures:
                bot.last_error = failures[chatbot_id]
            elif new == "Missing":
                bot.last_error = "the service does not list this chatbot"
            if new == "Synced":
                bot.last_error = None
                bot.last_sync = at
                if at_revision:
                    bot.revision = revision
            if bot.set_status(new, at):
                self.log.info("status", f"{bot.name}: {new}", chatbot=chatbot_id)

    def _status(
        self, chatbot_id: str, drift: Mapping[str, int], failures: Collection[str]
    ) -> BotStatus:
        if chatbot_id in failures:
            return "Failed"
        if "missing" in drift:
            return "Missing"
        if any(c in drift for c in (*HEALABLE, "unmanaged")):
            return "Drifted"
        if drift or chatbot_id in self.unsynced:
            return "OutOfSync"
        return "Synced"

    def now_at(self, revision: str) -> None:
        """Every chatbot found as declared runs ``revision`` (applied: the others' files
        did not change)."""
        for bot in self.status.bots.values():
            if bot.status == "Synced":
                bot.revision = revision

    def fleet(self) -> Sequence[DriftItem]:
        """Every chatbot's drift items, as last read."""
        return [i for items in self.items.values() for i in items]
