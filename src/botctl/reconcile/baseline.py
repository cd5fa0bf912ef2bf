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

from botctl.models import BotSpec, Desired, Live, LiveBot
from botctl.plan import BotRef
from botctl.reconcile.apply import ApplyReport
from botctl.resources.attributes import CustomAttribute
from botctl.values import JsonValue, flatten, same_value


@dataclass
class Verified:
    """Values of one chatbot to record as verified."""

    bot: BotRef
    settings: dict[str, JsonValue] = field(default_factory=dict)  # leaf path -> value
    attributes: dict[str, CustomAttribute] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.settings or self.attributes)


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
    if seen.settings is not None:
        observed = seen.settings.leaves
        for path, value in bot.settings.leaves.items():
            if path in observed and same_value(observed[path], value):
                found.settings[path] = value
    if seen.attributes is not None:
        for attribute in bot.attributes:
            now = seen.attributes.get(attribute.name)
            if now is None or now.type != attribute.type:
                continue
            listed = now.to_json()
            if all(same_value(listed.get(k), v) for k, v in attribute.managed().items()):
                found.attributes[attribute.name] = CustomAttribute.model_validate(
                    {"name": attribute.name, "type": attribute.type, **attribute.managed()}
                )
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
        if op.resource == "settings" and seen.settings is not None:
            observed = seen.settings.leaves
            for path, sent in flatten(op.state_record).items():
                if path in observed and same_value(observed[path], sent):
                    found.settings[path] = sent
        elif op.resource == "attribute" and seen.attributes is not None:
            now = seen.attributes.get(op.subject)
            listed = now.to_json() if now is not None else {}
            if now is not None and all(
                same_value(listed.get(k), v) for k, v in op.state_record.items()
            ):
                found.attributes[op.subject] = CustomAttribute.model_validate(op.state_record)
    return (found for found in by_bot.values() if found)


def observed(bot: BotRef, seen: LiveBot) -> Verified:
    """Everything a read shows of one chatbot: the baseline of an exported chatbot."""
    return Verified(
        bot,
        settings=dict(seen.settings.leaves) if seen.settings is not None else {},
        attributes=dict(seen.attributes or {}),
    )
