"""``botctl promote``'s gate.

Two stages, each a label selector (``--from``, ``--to``). The promotion is refused, with every
reason at once, unless:

- each stage selects at least one chatbot, and no chatbot is in both;
- the selectors tell the stages apart: the *stage keys* are the label keys both selectors name
  with different requirements (``stage`` in ``--from stage=staging --to stage=production``). A
  key named alike on both sides (``app in (a,b)`` on each) filters both stages and is no stage
  key, nor is a key only one side names;
- every chatbot promoted (``--to``, narrowed by ``--target``/``--exclude``) has exactly one
  *counterpart* in ``--from``: the chatbot whose labels, stage keys removed from both, are
  equal. None means nothing of it was tested; several mean botctl cannot tell which test run
  speaks for it. Either way it refuses rather than guess;
- every chatbot of ``--from`` runs the configuration as it is now and passed its conversation
  tests there (``resources.rollout``, recorded by ``apply --test``).
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botctl.config.revision import revisions
from botctl.config.selection import Requirement, Selection, matches_all, select_names
from botctl.errors import BotctlError
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.resources.rollout import Rollout
from botctl.store.state import load_state

if TYPE_CHECKING:
    from botctl.models import State
    from botctl.pipeline.reconciler import Applied, Gate
    from botctl.plan import Plan


@dataclass(frozen=True)
class Stage:
    """One side of a promotion: its label selector as given, and parsed."""

    text: str
    requirements: tuple[Requirement, ...]


@dataclass(frozen=True)
class Member:
    """A chatbot of the configuration, as far as pairing is concerned."""

    name: str
    chatbot_id: str
    labels: Mapping[str, str]

    def __str__(self) -> str:
        return f"{self.name} ({self.chatbot_id})"


@dataclass
class Pairing:
    """Which chatbots each stage holds and how they pair; ``problems``: why not (empty: fine)."""

    sources: list[Member] = field(default_factory=list)  # --from's chatbots
    pairs: list[tuple[Member, Member]] = field(default_factory=list)  # (promoted, counterpart)
    problems: list[str] = field(default_factory=list)
    unpaired: list[str] = field(default_factory=list)  # names of --to chatbots without a pair
    keys: frozenset[str] = frozenset()  # the stage keys


@dataclass
class Promotion:
    pairing: Pairing
    problems: list[str]  # the pairing's, then the readiness of --from's chatbots
    ready: list[str]  # names of --from's chatbots that run this revision and passed
    not_ready: bool  # some --from chatbot is not ready (its tests to run or fix)
    current: Mapping[str, str] = field(default_factory=dict)  # revisions, by chatbot id
    covered: frozenset[str] = frozenset()  # names of the chatbots a test covers

    def waiting(self, state: State) -> dict[str, str]:
        """Why each chatbot of --from is not ready in ``state`` (empty: all are)."""
        return readiness(self.pairing.sources, state.rollout, self.current, self.covered)


class PromotionGate:
    """``promote``'s readiness checked again in the apply's gate phase, on the state as the
    apply read it under its lock: the first check (``promotion``) reads the state before the
    apply waits for the lock, and another run (CI, the agent) may record meanwhile that a
    test of --from failed. Not ready any more: held, nothing sent. ``inner``: the apply's own
    gate (``--test``), asked after."""

    def __init__(self, promotion: Promotion, inner: Gate | None) -> None:
        self.promotion = promotion
        self.inner = inner

    def admit(self, plan: Plan, state: State) -> str | None:
        waiting = self.promotion.waiting(state)
        if waiting:
            return (
                "not ready to promote any more (another run recorded this since it was "
                "checked):\n  " + "\n  ".join(waiting.values())
            )
        return self.inner.admit(plan, state) if self.inner is not None else None

    async def check(self, applied: Applied) -> Any:
        return await self.inner.check(applied) if self.inner is not None else None


def stage_keys(source: Sequence[Requirement], target: Sequence[Requirement]) -> frozenset[str]:
    """The label keys that tell the stages apart: named by both selectors, with different
    requirements (all of one key's requirements compared as a set)."""

    def by_key(requirements: Sequence[Requirement]) -> dict[str, frozenset[Requirement]]:
        grouped: dict[str, set[Requirement]] = {}
        for requirement in requirements:
            grouped.setdefault(requirement.key, set()).add(requirement)
        return {key: frozenset(found) for key, found in grouped.items()}

    ours, theirs = by_key(source), by_key(target)
    return frozenset(key for key in ours.keys() & theirs.keys() if ours[key] != theirs[key])


def without(labels: Mapping[str, str], keys: frozenset[str]) -> dict[str, str]:
    return {key: value for key, value in labels.items() if key not in keys}


def counterparts(
    labels: Mapping[str, str], sources: Sequence[Member], keys: frozenset[str]
) -> list[Member]:
    """The chatbots of ``sources`` whose labels equal ``labels`` once ``keys`` are removed."""
    mine = without(labels, keys)
    return [member for member in sources if without(member.labels, keys) == mine]


def pair_stages(
    bots: Sequence[Member],
    source: Stage,
    target: Stage,
    targets: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
) -> Pairing:
    """The stages ``source`` and ``target`` select among ``bots``, ``target`` narrowed by
    ``--target``/``--exclude``, and each promoted chatbot's counterpart."""
    pairing = Pairing(sources=[b for b in bots if matches_all(source.requirements, b.labels)])
    problems = pairing.problems
    selected = [b for b in bots if matches_all(target.requirements, b.labels)]
    if not pairing.sources:
        problems.append(matches_nothing("--from", source, bots, "nothing of it was tested"))
    if not selected:
        problems.append(matches_nothing("--to", target, bots, "nothing to promote"))
    promoted = selected
    if selected and (targets or excludes):
        narrowing = Selection(targets, target.requirements, excludes)
        try:
            kept = set(select_names([(b.name, b.labels) for b in bots], narrowing))
        except BotctlError as exc:
            problems.append(str(exc))
            kept = set()
        promoted = [b for b in selected if b.name in kept]
    in_source = {b.name for b in pairing.sources}
    for member in selected:
        if member.name in in_source:
            problems.append(
                f"{member} is selected by both --from and --to: a stage cannot be promoted "
                "onto itself"
            )
    keys = pairing.keys = stage_keys(source.requirements, target.requirements)
    if not (pairing.sources and promoted):
        return pairing
    if not keys:
        problems.append(
            f"no label key tells the stages apart: --from {source.text} and --to {target.text} "
            "name none with different requirements, so no chatbot of --to can be paired with "
            "the one of --from it was tested as (e.g. --from stage=staging --to stage=production)"
        )
        return pairing
    shown_keys = ", ".join(map(repr, sorted(keys)))
    for member in promoted:
        if member.name in in_source:
            continue
        found = counterparts(member.labels, pairing.sources, keys)
        if len(found) == 1:
            pairing.pairs.append((member, found[0]))
            continue
        rest = without(member.labels, keys)
        labels = ", ".join(f"{k}={v}" for k, v in sorted(rest.items())) or "no other label"
        pairing.unpaired.append(member.name)
        if not found:
            problems.append(
                f"{member}: no chatbot of --from {source.text} has its labels apart from "
                f"{shown_keys} ({labels}): nothing of it was tested"
            )
        else:
            problems.append(
                f"{member}: {len(found)} chatbots of --from {source.text} have its labels apart "
                f"from {shown_keys} ({labels}): {', '.join(b.name for b in found)}; promote "
                "needs exactly one"
            )
    return pairing


def matches_nothing(option: str, stage: Stage, bots: Sequence[Member], why: str) -> str:
    """``--from``/``--to`` selects no chatbot: the values its keys have, and the closest."""
    notes = []
    for key in dict.fromkeys(r.key for r in stage.requirements):
        values = sorted({b.labels[key] for b in bots if key in b.labels})
        if not values:
            close = difflib.get_close_matches(key, sorted({k for b in bots for k in b.labels}))
            notes.append(f"no chatbot has the label {key!r}" + _did_you_mean(close))
            continue
        notes.append(f"values of {key!r}: {', '.join(values)}")
        for requirement in stage.requirements:
            if requirement.key == key and requirement.operator in ("=", "in"):
                for value in sorted(requirement.values - set(values)):
                    close = difflib.get_close_matches(value, values, n=1)
                    notes.append(
                        f"no chatbot has {key}={value}"
                        + _did_you_mean([f"{key}={c}" for c in close])
                    )
    return f"{option} {stage.text} matches no chatbot: {why}" + (
        f" ({'; '.join(notes)})" if notes else ""
    )


def _did_you_mean(close: Sequence[str]) -> str:
    return f", did you mean {' or '.join(close)}?" if close else ""


def promotion(
    ws: Workspace,
    source: Stage,
    target: Stage,
    targets: tuple[str, ...] = (),
    excludes: tuple[str, ...] = (),
) -> Promotion:
    """``ws``'s whole configuration (its selection is not used) against the state: the
    stages, their pairs, and whether the chatbots of ``source`` are ready to be promoted."""
    fleet = load_resolved(ws)
    bots = [Member(b.spec.name, b.spec.chatbot_id, b.spec.labels) for b in fleet.bots]
    pairing = pair_stages(bots, source, target, targets, excludes)
    state = load_state(ws.state_path)
    covered = frozenset(name for t in fleet.tests for name in t.chatbots)
    current = revisions(fleet)
    waiting = readiness(pairing.sources, state.rollout, current, covered)
    ready = [b.name for b in pairing.sources if b.name not in waiting]
    problems = [*pairing.problems, *waiting.values()]
    return Promotion(pairing, problems, ready, bool(waiting), current, covered)


def readiness(
    sources: Sequence[Member],
    rollout: Mapping[str, Rollout],
    current: Mapping[str, str],
    covered: Collection[str],
) -> dict[str, str]:
    """Why each chatbot of ``sources`` that is not ready to be promoted is not, by name: a
    chatbot is ready when a test covers it (``covered``: names) and its staged-rollout record
    says its tests passed at its revision now (``current``: by chatbot id). Also the agent's
    stages (``agent.stages``)."""
    waiting: dict[str, str] = {}
    for bot in sources:
        record = rollout.get(bot.chatbot_id)
        revision = current[bot.chatbot_id]
        if bot.name not in covered:
            waiting[bot.name] = f"{bot}: no conversation test covers it, so none passed"
        elif record is None:
            waiting[bot.name] = f"{bot}: no `apply --test` is recorded for it"
        elif record.revision != revision:
            waiting[bot.name] = (
                f"{bot}: its last apply was revision {record.revision}, the configuration "
                f"is at {revision}"
            )
        elif record.tests_passed is None:
            waiting[bot.name] = f"{bot}: its tests did not run at revision {revision}"
        elif not record.tests_passed:
            waiting[bot.name] = f"{bot}: its tests failed at revision {revision}"
    return waiting
