"""Small builders for unit tests of the pure core."""

from __future__ import annotations

from typing import Any

from botctl.models import BotSpec, ChatbotSettings, CustomAttribute, Desired, Live, LiveBot
from botctl.state import BotRecord, State


def bot(
    name: str = "support",
    chatbot_id: str = "bot-1",
    settings: dict[str, Any] | None = None,
    attributes: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> BotSpec:
    return BotSpec(
        name=name,
        chatbot_id=chatbot_id,
        settings=ChatbotSettings.model_validate(settings or {}, strict=False),
        attributes=tuple(CustomAttribute(**a) for a in attributes or []),
        source=f"{name}.yaml:1",
        **extra,
    )


def desired(*bots: BotSpec) -> Desired:
    return Desired(bots=bots)


def live_bot(
    chatbot_id: str = "bot-1",
    settings: dict[str, Any] | None = None,
    attributes: list[dict[str, Any]] | None = None,
    *,
    readable: bool = True,
    attributes_readable: bool = True,
    exists: bool = True,
) -> LiveBot:
    attrs = {a["name"]: CustomAttribute(**a) for a in attributes or []}
    return LiveBot(
        chatbot_id=chatbot_id,
        exists=exists,
        settings_readable=readable,
        settings=settings or {},
        attributes=attrs if attributes_readable else None,
    )


def live(*bots: LiveBot) -> Live:
    return Live(bots={b.chatbot_id: b for b in bots})


def state(
    chatbot_id: str = "bot-1",
    settings: dict[str, Any] | None = None,
    attributes: dict[str, dict[str, Any]] | None = None,
    bot_name: str = "support",
) -> State:
    record = BotRecord(bot=bot_name, settings=settings or {}, attributes=attributes or {})
    return State(lineage="lineage-1", serial=3, bots={chatbot_id: record})
