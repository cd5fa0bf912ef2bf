"""What the service was read holding, to be recorded in the state as *verified*: the baseline
that drift compares against. Pure: each function takes what was read and returns the values
to record, chatbot by chatbot.

- ``matching``: the declared values the service holds right now (after any apply, and by
  ``botctl refresh``): a chatbot adopted with hand-written YAML gets a baseline this way.
- ``read_back``: the values an apply sent that the service reads back as sent.
- ``observed``: everything a read shows of a chatbot (``botctl export`` writes exactly that).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from botctl.models import BotSpec, Desired, Live, LiveBot
from botctl.plan import BotRef
from botctl.reconcile.apply import ApplyReport
from botctl.resources.registry import kind_of, kinds


@dataclass
class Verified:
    """Values of one chatbot to record as verified, per resource kind (by name): what the
    kind's ``matching`` / ``read_back`` / ``observed`` found (settings: leaf path -> value;
    attributes: name -> attribute)."""

    bot: BotRef
    values: dict[str, dict[str, Any]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return any(self.values.values())

    def of(self, kind: str) -> dict[str, Any]:
        """What was found of one kind."""
        return self.values.get(kind, {})

    def add(self, kind: str, found: dict[str, Any]) -> None:
        if found:
            self.values.setdefault(kind, {}).update(found)


def matching(desired: Desired, live: Live) -> Iterator[Verified]:
    """Per chatbot, the declared values the service was read holding."""
    for bot in desired.bots:
        seen = live.bots.get(bot.chatbot_id)
        if seen is not None and seen.exists:
            found = _matching_bot(bot, seen)
            if found:
                yield found


def _matching_bot(bot: BotSpec, seen: LiveBot) -> Verified:
    found = Verified(bot.ref)
    for kind in kinds():
        found.add(kind.name, kind.matching(bot, seen))
    return found


def read_back(report: ApplyReport, live: Live) -> Iterator[Verified]:
    """Per chatbot, the values an apply sent that the service now reads back as sent."""
    by_bot: dict[str, Verified] = {}
    for result in report.results:
        op = result.operation
        seen = live.bots.get(op.bot.chatbot_id)
        if result.status != "applied" or seen is None:
            continue
        found = by_bot.setdefault(op.bot.chatbot_id, Verified(op.bot))
        found.add(op.resource, kind_of(op.resource).read_back(op, seen))
    return (found for found in by_bot.values() if found)


def observed(bot: BotRef, seen: LiveBot) -> Verified:
    """Everything a read shows of one chatbot: the baseline of an exported chatbot."""
    found = Verified(bot)
    for kind in kinds():
        found.add(kind.name, kind.observed(seen))
    return found
