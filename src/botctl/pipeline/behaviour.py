"""``botctl test --baseline SELECTOR``: the conversation tests on the selected chatbots and on
their baseline counterparts, paired as ``botctl promote`` pairs stages, and how much each
answer changed (``conversation.compare``).

- The *baseline* is every chatbot the selector matches; the chatbots *under test* are the
  selected ones (``--target``, ``-l``, ``--exclude``) outside the baseline.
- The *stage keys* are the label keys the baseline selector names, except those ``-l`` names
  with the same requirements (``app=support`` on both sides filters, it tells no stage).
- A chatbot under test pairs with the one baseline chatbot whose labels are the same once the
  stage keys are removed from both (``pipeline.promote.counterparts``); none or several is an
  error naming every such chatbot at once, and nothing is sent.
- A test runs on a pair when it covers either chatbot of it: a test drawn from production's
  conversations (``chatbots: [support]``) compares a preview with production unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from botctl.config.conversation import ConversationTest
from botctl.config.resolve import Fleet
from botctl.config.selection import Requirement, Selection, matches_all, select_names
from botctl.conversation.compare import BehaviourReport, compare
from botctl.conversation.run import run_cases
from botctl.errors import BotctlError
from botctl.models import BotSpec
from botctl.pipeline.conversations import (
    chat_through,
    chosen_tests,
    judges_of,
    masked_values,
    whole_and_selected,
)
from botctl.pipeline.flows import _refs, _service
from botctl.pipeline.promote import Member, Stage, counterparts, matches_nothing
from botctl.pipeline.workspace import Workspace
from botctl.service.connect import connect


@dataclass(frozen=True)
class Pairs:
    pairs: tuple[tuple[BotSpec, BotSpec], ...]  # (under test, baseline)
    keys: frozenset[str]


def stage_keys(baseline: Sequence[Requirement], selector: Sequence[Requirement]) -> frozenset[str]:
    """The baseline selector's keys, less those ``-l`` names with the same requirements."""

    def by_key(requirements: Sequence[Requirement]) -> dict[str, frozenset[Requirement]]:
        return {
            key: frozenset(r for r in requirements if r.key == key)
            for key in {r.key for r in requirements}
        }

    ours, selected = by_key(baseline), by_key(selector)
    return frozenset(key for key in ours if selected.get(key) != ours[key])


def pair_with_baseline(fleet: Fleet, selection: Selection, baseline: Stage) -> Pairs:
    """Each selected chatbot outside the baseline, with its baseline counterpart; a
    ``BotctlError`` naming every problem at once when one has none or several."""
    bots = [b.spec for b in fleet.bots]
    members = {b.name: Member(b.name, b.chatbot_id, b.labels) for b in bots}
    base = [b for b in bots if matches_all(baseline.requirements, b.labels)]
    if not base:
        found = matches_nothing(
            "--baseline", baseline, list(members.values()), "there is nothing to compare with"
        )
        raise BotctlError(found)
    chosen = set(select_names([(b.name, b.labels) for b in bots], selection))
    in_base = {b.name for b in base}
    tested = [b for b in bots if b.name in chosen and b.name not in in_base]
    if not tested:
        raise BotctlError(
            f"--baseline {baseline.text}: every selected chatbot is a baseline chatbot, so none "
            "is left to test; select the chatbots to test, e.g. -l stage=preview"
        )
    # Never empty here: were every key of the baseline named alike by -l, every chatbot -l
    # selects would be a baseline chatbot.
    keys = stage_keys(baseline.requirements, selection.selector)
    by_name = {b.name: b for b in bots}
    pairs, problems = [], []
    shown = ", ".join(map(repr, sorted(keys)))
    for bot in tested:
        matched = counterparts(bot.labels, [members[b.name] for b in base], keys)
        if len(matched) == 1:
            pairs.append((bot, by_name[matched[0].name]))
            continue
        rest = ", ".join(f"{k}={v}" for k, v in sorted(bot.labels.items()) if k not in keys)
        what = (
            "no baseline chatbot has"
            if not matched
            else f"{len(matched)} baseline chatbots ({', '.join(m.name for m in matched)}) have"
        )
        problems.append(
            f"{members[bot.name]}: {what} its labels apart from {shown} "
            f"({rest or 'no other label'}); --baseline needs exactly one"
        )
    if problems:
        raise BotctlError(
            "cannot pair the chatbots under test with --baseline "
            f"{baseline.text}:\n  " + "\n  ".join(problems)
        )
    return Pairs(tuple(pairs), keys)


def paired_cases(
    tests: Sequence[ConversationTest], pairs: Sequence[tuple[BotSpec, BotSpec]]
) -> list[tuple[ConversationTest, BotSpec, BotSpec]]:
    """Each test on each pair it covers (either side), in the tests' order."""
    return [
        (test, tested, base)
        for test in tests
        for tested, base in pairs
        if tested.name in test.chatbots or base.name in test.chatbots
    ]


async def run_behaviour(
    ws: Workspace, baseline: Stage, names: Sequence[str] = ()
) -> BehaviourReport:
    """``botctl test --baseline``: every selected chatbot's tests on it and on its
    counterpart, both answers of each sent message and how much they differ."""
    fleet, _ = whole_and_selected(ws)
    tests = chosen_tests(fleet, names)
    found = pair_with_baseline(fleet, ws.selection, baseline)
    todo = paired_cases(tests, found.pairs)
    covered = {tested.name for _, tested, _ in todo}
    untested = tuple(t.name for t, _ in found.pairs if t.name not in covered)
    if not todo:
        return BehaviourReport(baseline.text, (), untested)
    judges = judges_of(fleet, [t for t, _, _ in todo])
    asked = {bot.name: bot for _, tested, base in todo for bot in (tested, base)}
    everyone = list({**asked, **judges}.values())
    async with connect(_refs(everyone), ws.environ, _service(ws, everyone)) as clients:
        results = await run_cases(
            [case for t, tested, base in todo for case in ((t, tested), (t, base))],
            chat_through(clients),
            parallelism=ws.parallelism,
            secrets=masked_values(ws, everyone),
            judges=judges,
        )
    pairs = tuple(compare(results[2 * i], results[2 * i + 1]) for i in range(len(todo)))
    return BehaviourReport(baseline.text, pairs, untested)
