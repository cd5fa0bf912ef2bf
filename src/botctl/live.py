"""Service → Live: read what the service lets botctl observe, in the canonical models.

Every quirk of the service's response shapes ends here (ARCHITECTURE, convention 1): records
in camelCase or snake_case, the chatbot list wrapped or not (handled by the client), extra
read-only fields, nulls. What leaves this module is ``Live``: settings as camelCase dicts of
writable fields only, attributes as ``CustomAttribute``.

Reads are the minimum the plan needs: one chatbot-list read per distinct client (API key)
and one attribute-list read per chatbot that may exist, run concurrently within a bound.
"""

from __future__ import annotations

import asyncio
import functools
import re
from collections.abc import Awaitable, Mapping, Sequence, Set
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from botctl.client import ReadsUnavailable, ServiceClient
from botctl.errors import ServiceError
from botctl.models import (
    BotSpec,
    ChatbotSettings,
    CollectCustomerInformation,
    CustomAttribute,
    LeadField,
    Live,
    LiveBot,
    Styles,
)

T = TypeVar("T")

_ID_KEYS = ("id", "chatbotId", "chatbot_id")
_SNAKE = re.compile(r"_([a-z0-9])")

# Which model describes the keys allowed inside each nested settings object; the models are
# the single list of writable fields (contract 2.1-2.4), so a new field needs no change here.
_NESTED: dict[str, type[BaseModel]] = {
    "styles": Styles,
    "collectCustomerInformation": CollectCustomerInformation,
}
_LEAD_FIELDS = ("name", "email", "phone")
_ATTRIBUTE_FIELDS = frozenset(CustomAttribute.model_fields)


async def read_live(
    bots: Sequence[BotSpec],
    clients: Mapping[str, ServiceClient],
    *,
    concurrency: int = 8,
) -> Live:
    """Read the chatbots of ``bots``; ``clients`` are keyed by each bot's ``api_key_env``.

    A read the deployment does not offer (``ReadsUnavailable``) is recorded as unreadable;
    any other failure propagates as the botctl error it is.
    """
    limit = asyncio.Semaphore(max(1, concurrency))
    by_client = _distinct_clients(bots, clients)
    listings = await _gather(
        [_bounded(limit, _read_chatbots(client)) for client in by_client.values()]
    )
    records = dict(zip(by_client, listings, strict=True))
    targets = _dedupe(bots)
    attributes = await _gather(
        [
            _bounded(limit, _read_attributes(clients[bot.api_key_env], bot, records))
            for bot in targets
        ]
    )
    return Live(
        bots={
            bot.chatbot_id: _live_bot(bot, records[id(clients[bot.api_key_env])], attrs)
            for bot, attrs in zip(targets, attributes, strict=True)
        }
    )


def _distinct_clients(
    bots: Sequence[BotSpec], clients: Mapping[str, ServiceClient]
) -> dict[int, ServiceClient]:
    """One entry per client object: two key names may share a client and one list read."""
    distinct: dict[int, ServiceClient] = {}
    for bot in bots:
        client = clients.get(bot.api_key_env)
        if client is None:
            raise ServiceError(
                "read chatbot list",
                f"no API client for ${bot.api_key_env}",
                chatbot_id=bot.chatbot_id,
            )
        distinct.setdefault(id(client), client)
    return distinct


def _dedupe(bots: Sequence[BotSpec]) -> list[BotSpec]:
    seen: dict[str, BotSpec] = {}
    for bot in bots:
        seen.setdefault(bot.chatbot_id, bot)
    return list(seen.values())


async def _read_chatbots(client: ServiceClient) -> dict[str, dict[str, Any]] | None:
    """Chatbot records by id, or ``None`` when this deployment cannot list chatbots."""
    try:
        raw = await client.list_chatbots()
    except ReadsUnavailable:
        return None
    by_id: dict[str, dict[str, Any]] = {}
    for record in raw:
        chatbot_id = next((record[k] for k in _ID_KEYS if record.get(k) is not None), None)
        if chatbot_id is not None:
            by_id.setdefault(str(chatbot_id), record)
    return by_id


async def _read_attributes(
    client: ServiceClient,
    bot: BotSpec,
    records: Mapping[int, dict[str, dict[str, Any]] | None],
) -> dict[str, CustomAttribute] | None:
    listing = records[id(client)]
    if listing is not None and bot.chatbot_id not in listing:
        return None  # the list says it does not exist: nothing to read
    try:
        raw = await client.list_attributes(bot.chatbot_id)
    except ReadsUnavailable:
        return None
    return parse_attributes(bot.chatbot_id, raw)


def _live_bot(
    bot: BotSpec,
    listing: dict[str, dict[str, Any]] | None,
    attributes: dict[str, CustomAttribute] | None,
) -> LiveBot:
    if listing is None:  # unknown whether it exists; assume so and let writes tell
        return LiveBot(chatbot_id=bot.chatbot_id, attributes=attributes)
    record = listing.get(bot.chatbot_id)
    if record is None:
        return LiveBot(chatbot_id=bot.chatbot_id, exists=False, settings_readable=True)
    return LiveBot(
        chatbot_id=bot.chatbot_id,
        settings_readable=True,
        settings=normalise_settings(record),
        attributes=attributes,
    )


def normalise_settings(record: Mapping[str, Any]) -> dict[str, Any]:
    """A raw chatbot record → the observable writable settings, camelCase, nulls dropped."""
    settings = _known(record, set(ChatbotSettings.model_fields))
    for key, model in _NESTED.items():
        if key in settings:
            nested = _nested(settings[key], model)
            if nested:
                settings[key] = nested
            else:
                del settings[key]
    return settings


def parse_attributes(
    chatbot_id: str, raw: Sequence[Mapping[str, Any]]
) -> dict[str, CustomAttribute]:
    """Attribute records → models by name; extra keys dropped, a malformed record an error."""
    parsed: dict[str, CustomAttribute] = {}
    for record in raw:
        fields = _known(record, _ATTRIBUTE_FIELDS)
        try:
            attribute = CustomAttribute.model_validate(fields)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(p) for p in problem["loc"]) or "record"
            raise ServiceError(
                "read attributes",
                f"unexpected attribute record {record.get('name')!r}: {where}: {problem['msg']}",
                chatbot_id=chatbot_id,
            ) from None
        parsed.setdefault(attribute.name, attribute)
    return parsed


@functools.lru_cache(maxsize=1024)
def _camel(key: str) -> str:
    # Cached: the same few dozen keys come back in every record of every chatbot.
    return _SNAKE.sub(lambda m: m.group(1).upper(), key)


def _known(record: Mapping[str, Any], allowed: Set[str]) -> dict[str, Any]:
    """Keys mapped to camelCase, kept when allowed and not null; a camelCase key wins over
    its snake_case twin, since it is the spelling the write uses."""
    out: dict[str, Any] = {}
    for key, value in record.items():
        name = _camel(key)
        if name not in allowed or value is None or (name in out and name != key):
            continue
        out[name] = value
    return out


def _nested(value: Any, model: type[BaseModel]) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        return {}  # not a shape we understand: not observable
    fields = _known(value, set(model.model_fields))
    if model is CollectCustomerInformation:
        for key in _LEAD_FIELDS:
            if key in fields:
                lead = _nested(fields[key], LeadField)
                if lead:
                    fields[key] = lead
                else:
                    del fields[key]
    return fields


async def _bounded(limit: asyncio.Semaphore, work: Awaitable[T]) -> T:
    async with limit:
        return await work


async def _gather(work: list[Awaitable[T]]) -> list[T]:
    """Run all; on failure cancel the rest and raise the first error itself (not a group),
    so the CLI sees the botctl error it knows how to print."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_run(item)) for item in work]
    except BaseExceptionGroup as group_error:
        raise _first_leaf(group_error) from None
    return [task.result() for task in tasks]


async def _run(work: Awaitable[T]) -> T:
    return await work


def _first_leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error
