"""The agent's gates and stages (``--test``, ``--stages``): which chatbots a revision may
reach now, from the state's staged-rollout record (``resources.rollout``, the one ``apply
--test`` and ``promote`` read and write) and the time each stage has been passing. Pure: the
loop hands it the revision's chatbots, their configuration revisions and the record.

- A chatbot whose tests failed at its configuration revision now (``Rollout(revision, False)``)
  is *held*: the agent never writes that revision to it again, neither the next cycle nor
  self-heal, until a commit changes its configuration or its tests (a new revision).
- Stages (``--stages stage=staging,stage=production``): each requirement is one stage, in
  order. The first stage receives every revision; stage k+1 receives it only once every
  chatbot of stage k passed its tests at the revision it has now, as ``botctl promote --from
  <k> --to <k+1>`` would allow (its pairing and its refusals), and ``--soak`` has passed
  since stage k was first seen passing there. A chatbot no stage selects is not staged: it is
  applied as without ``--stages`` (a judge chatbot, say).
- A chatbot a test covers whose tests have not run at the revision it runs (its record holds
  no verdict at its configuration revision now) is *untested*: a pass runs its tests. Only
  when the state records it as running that configuration: one the state records with other
  values (applied since by CI from another commit, or held back by a stage) would be written
  over by such a pass, not tested; a stage's chatbots get the revision when the stage opens.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from botctl.agent.status import now_iso
from botctl.config.selection import SelectorError, parse_selector
from botctl.errors import BotctlError
from botctl.pipeline.promote import Member, Stage, pair_stages, readiness
from botctl.resources.rollout import Rollout

GateResult = Literal["passed", "failed", "pending", "waiting", "soaking", "refused"]
GATE_RESULTS: tuple[str, ...] = GateResult.__args__  # type: ignore[attr-defined]


def parse_stages(text: str) -> tuple[Stage, ...]:
    """``--stages``: label requirements separated by commas, each one stage, in order
    (``stage in (qa,staging)`` is one). At least two, each another."""
    try:
        requirements = parse_selector(text)
    except SelectorError as exc:
        raise BotctlError(f"--stages {text!r}: {exc}") from None
    stages = tuple(Stage(str(r), (r,)) for r in requirements)
    if len(stages) < 2:
        raise BotctlError(
            f"--stages {text!r}: names one stage; give two or more, in order "
            "(e.g. --stages stage=staging,stage=production), or gate one with --test alone"
        )
    seen: set[str] = set()
    for stage in stages:
        if stage.text in seen:
            raise BotctlError(f"--stages {text!r}: {stage.text} is named twice")
        seen.add(stage.text)
    return stages


def failed_at(rollout: Mapping[str, Rollout], current: Mapping[str, str]) -> frozenset[str]:
    """The chatbots (ids) whose tests failed at their configuration revision now: held."""
    return frozenset(
        chatbot_id
        for chatbot_id, revision in current.items()
        if rollout.get(chatbot_id) == Rollout(revision, False)
    )


def untested(
    current: Mapping[str, str],
    covered: Collection[str],
    rollout: Mapping[str, Rollout],
    elsewhere: Collection[str] = (),
) -> frozenset[str]:
    """The chatbots (ids; ``current``: their configuration revisions now, ``covered``: those a
    test covers) whose tests a pass runs: their record holds no verdict at their revision now,
    and they are not ``elsewhere`` (ids the state records with other values than this revision
    asks: what another run applied since, a stage's hold; see the module)."""
    found = set()
    for chatbot_id, revision in current.items():
        record = rollout.get(chatbot_id)
        verdict = (
            record.tests_passed if record is not None and record.revision == revision else None
        )
        if chatbot_id in covered and verdict is None and chatbot_id not in elsewhere:
            found.add(chatbot_id)
    return frozenset(found)


@dataclass
class SoakClock:
    """When each stage was first seen passing at the revisions its chatbots have now (kept
    in memory: a restarted agent soaks again, never less)."""

    since: dict[str, tuple[str, float]] = field(default_factory=dict)

    def passing(self, stage: str, fingerprint: str, now: float) -> float:
        found = self.since.get(stage)
        if found is None or found[0] != fingerprint:
            found = self.since[stage] = (fingerprint, now)
        return found[1]

    def forget(self, stage: str) -> None:
        self.since.pop(stage, None)


@dataclass(frozen=True)
class StageGate:
    """One stage at the newest revision. ``open``: it may receive it; ``ready``: every chatbot
    of it passed its tests at its revision now (the next stage's gate); ``waiting``: why
    not, per chatbot; ``refused``: why it cannot follow the stage before (promote's
    refusals); ``passing_since``/``opens_at``: the soak."""

    stage: Stage
    members: tuple[Member, ...]
    open: bool
    ready: bool
    failed: tuple[str, ...] = ()  # names of its chatbots whose tests failed: held
    waiting: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    blocked_by: str | None = None  # the stage before, while it holds this one back
    passing_since: float | None = None
    opens_at: float | None = None  # soaking: when this stage may receive the revision

    @property
    def result(self) -> GateResult:
        if self.refused:
            return "refused"
        if self.opens_at is not None:
            return "soaking"
        if not self.open:
            return "waiting"
        if self.failed:
            return "failed"
        return "passed" if self.ready else "pending"

    def reasons(self) -> list[str]:
        """In words, why the stage is where it is (empty when it passed)."""
        if self.refused:
            return list(self.refused)
        if self.opens_at is not None:
            at = now_iso(self.opens_at)
            return [f"soaking: {self.blocked_by} passed; this stage receives the revision at {at}"]
        if not self.open:
            return [f"waiting for {self.blocked_by} to pass its tests at this revision"]
        return list(self.waiting)


@dataclass(frozen=True)
class Staging:
    """Which chatbots the newest revision may reach now; see the module."""

    gates: tuple[StageGate, ...] = ()
    failed: frozenset[str] = frozenset()  # chatbot ids whose tests failed at their revision
    waiting: Mapping[str, str] = field(default_factory=dict)  # id -> its stage's hold, in words

    def admits(self, chatbot_id: str) -> bool:
        return chatbot_id not in self.failed and chatbot_id not in self.waiting

    def held(self, chatbot_id: str) -> str | None:
        """Why the newest revision is not written to the chatbot now (None: it may be)."""
        if chatbot_id in self.failed:
            return "its tests failed at this revision: not applied again until it changes"
        return self.waiting.get(chatbot_id)

    def next_opening(self) -> float | None:
        """When a soaking stage may receive the revision (the loop wakes then)."""
        times = [g.opens_at for g in self.gates if g.opens_at is not None]
        return min(times) if times else None

    def stage_of(self, chatbot_id: str) -> StageGate | None:
        for gate in self.gates:
            if any(m.chatbot_id == chatbot_id for m in gate.members):
                return gate
        return None


def staging(
    stages: Sequence[Stage],
    members: Sequence[Member],
    current: Mapping[str, str],
    covered: Collection[str],
    rollout: Mapping[str, Rollout],
    *,
    soak: float = 0.0,
    clock: SoakClock | None = None,
    now: float = 0.0,
) -> Staging:
    """The gates of ``stages`` over ``members`` (the newest revision's chatbots; ``current``:
    their configuration revisions by id; ``covered``: the names a test covers) given the
    state's ``rollout`` record; without stages, only the chatbots whose tests failed."""
    failed = failed_at(rollout, current)
    waiting: dict[str, str] = {}
    clock = clock if clock is not None else SoakClock()
    gates: list[StageGate] = []
    before: StageGate | None = None
    for stage in stages:
        gate = _gate(stage, before, members, current, covered, rollout, failed, soak, clock, now)
        if not gate.open:
            why = gate.reasons()[0] if gate.reasons() else "waiting"
            for member in gate.members:
                waiting.setdefault(member.chatbot_id, f"{gate.stage.text}: {why}")
        gates.append(gate)
        before = gate
    return Staging(tuple(gates), failed, waiting)


def _gate(
    stage: Stage,
    before: StageGate | None,
    members: Sequence[Member],
    current: Mapping[str, str],
    covered: Collection[str],
    rollout: Mapping[str, Rollout],
    failed: frozenset[str],
    soak: float,
    clock: SoakClock,
    now: float,
) -> StageGate:
    """One stage's gate, after ``before`` (None: the first stage, always open)."""
    mine = tuple(m for m in members if all(r.matches(m.labels) for r in stage.requirements))
    waiting = readiness(mine, rollout, current, covered)
    ready = bool(mine) and not waiting
    failed_names = tuple(m.name for m in mine if m.chatbot_id in failed)
    passing_since = None
    if ready:
        fingerprint = ",".join(sorted(current[m.chatbot_id] for m in mine))
        passing_since = clock.passing(stage.text, fingerprint, now)
    else:
        clock.forget(stage.text)
    common: dict[str, Any] = {
        "members": mine,
        "ready": ready,
        "failed": failed_names,
        "waiting": tuple(waiting.values()),
        "passing_since": passing_since,
    }
    if before is None:
        return StageGate(stage, open=True, **common)
    promote = f"as `promote --from {before.stage.text} --to {stage.text}`"
    pairing = pair_stages(members, before.stage, stage) if mine else None
    refused = tuple(f"{promote}: {p}" for p in pairing.problems) if pairing else ()
    blocked = before.stage.text
    if refused or not (before.open and before.ready):
        return StageGate(stage, open=False, refused=refused, blocked_by=blocked, **common)
    assert before.passing_since is not None
    opens = before.passing_since + soak
    if opens > now:
        return StageGate(stage, open=False, blocked_by=blocked, opens_at=opens, **common)
    return StageGate(stage, open=True, **common)


def gate_document(gate: StageGate, revision: str | None) -> dict[str, Any]:
    """A stage in ``/status``: ``revision`` is the source's revision it last received."""
    return {
        "stage": gate.stage.text,
        "chatbots": [m.name for m in gate.members],
        "revision": revision,
        "gate": gate.result,
        "open": gate.open,
        "reasons": gate.reasons(),
        "passingSince": now_iso(gate.passing_since) if gate.passing_since is not None else None,
        "opensAt": now_iso(gate.opens_at) if gate.opens_at is not None else None,
    }
