"""Small builders for unit tests of the pure core."""

from __future__ import annotations

from typing import Any

from botctl.models import BotRecord, BotSpec, Desired, Live, LiveBot, State
from botctl.plan import BotRef, Operation, OperationKind
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.attributes import read_live
from botctl.resources.settings import ChatbotSettings

REF = BotRef("support", "bot-1", "BOTCTL_API_KEY")


def settings(values: dict[str, Any] | None = None) -> ChatbotSettings:
    return ChatbotSettings.model_validate(values or {}, strict=False)


def bot(
    name: str = "support",
    chatbot_id: str = "bot-1",
    settings: dict[str, Any] | None = None,
    attributes: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> BotSpec:
    if "secrets" in extra and "secret_texts" not in extra:
        # As the loader records them: every declared string that resolved a secret.
        values = {s.value for s in extra["secrets"]}
        strings = [*_strings(settings or {}), *_strings(attributes or [])]
        extra["secret_texts"] = tuple(t for t in strings if any(v in t for v in values))
    return BotSpec(
        name=name,
        chatbot_id=chatbot_id,
        settings=ChatbotSettings.model_validate(settings or {}, strict=False),
        attributes=tuple(CustomAttribute(**a) for a in attributes or []),
        source=f"{name}.yaml:1",
        **extra,
    )


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple):
        return [text for item in value for text in _strings(item)]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    return []


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
    # As the live read parses them: a record outside the contract's rules is set aside.
    attrs, off_contract = read_live(attributes or [])
    observed = ChatbotSettings.model_validate(settings or {}, strict=False)
    return LiveBot(
        chatbot_id=chatbot_id,
        exists=exists,
        settings=observed if readable and exists else None,
        attributes=attrs if attributes_readable and exists else None,
        off_contract=off_contract if attributes_readable and exists else (),
    )


def live(*bots: LiveBot) -> Live:
    return Live(bots={b.chatbot_id: b for b in bots})


def state(
    chatbot_id: str = "bot-1",
    settings: dict[str, Any] | None = None,
    attributes: dict[str, dict[str, Any]] | None = None,
    bot_name: str = "support",
) -> State:
    record = BotRecord(
        bot=bot_name,
        settings=ChatbotSettings.model_validate(settings or {}, strict=False),
        attributes={k: CustomAttribute(**v) for k, v in (attributes or {}).items()},
    )
    return State(lineage="lineage-1", serial=3, bots={chatbot_id: record})


def operation(
    kind: OperationKind = "update_settings",
    subject: str = "settings",
    body: dict[str, Any] | None = None,
    *,
    record: dict[str, Any] | None = None,
    ref: BotRef = REF,
    fallback: dict[str, Any] | None = None,
) -> Operation:
    """An operation as a plan would hold it (without changes unless a test needs them)."""
    body = body if body is not None else {"name": "A"}
    return Operation(ref, kind, subject, body, record if record is not None else body, (), fallback)
