"""Service -> Live: read what the service lets botctl observe, in the resources' own models.

The response envelopes are the client's business; the records inside are each resource kind's
(``ResourceKind.read_live`` of every kind in the registry). What leaves this module is ``Live``.

Reads are the minimum the plan needs: one chatbot-list read per distinct client (API key),
then each kind's reads of each chatbot that may exist (an attribute list), run concurrently
within a bound.
"""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, TypeVar

from botctl.errors import ReadsUnavailable, ServiceError
from botctl.models import BotSpec, Live, LiveBot
from botctl.resources.kind import ResourceKind
from botctl.resources.registry import kinds
from botctl.service.client import ServiceClient

T = TypeVar("T")

_ID_KEYS = ("id", "chatbotId", "chatbot_id")


async def read_live(
    bots: Sequence[BotSpec], clients: Mapping[str, ServiceClient], *, concurrency: int
) -> Live:
    """Read the chatbots of ``bots``; ``clients`` are keyed by each bot's ``api_key_env``.

    A read the deployment does not offer, or that ``--no-reads`` turned off
    (``ReadsUnavailable``), is recorded as unreadable; any other failure propagates as the
    botctl error it is (a 404 on the chatbot list among them: it means a wrong URL far more
    often than a deployment without reads, which ``--no-reads`` declares).
    """
    # The cycle collector is off while the reads allocate, as it is while the configuration
    # loads and the plan is made (``pipeline.workspace.collector_paused``): its full
    # collections would scan what the run holds (the configuration, the state: millions of
    # objects at 5,000 chatbots) again and again and find nothing there (0.2 of 0.4 s of a
    # large plan; see README, Benchmarks). Back on when the reads end, failed or not; left
    # off if a caller turned it off. Not ``gc.freeze``: what it sets aside returns to the
    # oldest generation uncounted, so the garbage of every run of a long-running process
    # (the agent) waited for a rare full collection, and memory grew.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return await _read_live(bots, clients, concurrency)
    finally:
        if enabled:
            gc.enable()


async def _read_live(
    bots: Sequence[BotSpec], clients: Mapping[str, ServiceClient], concurrency: int
) -> Live:
    limit = asyncio.Semaphore(max(1, concurrency))
    by_client = _distinct_clients(bots, clients)
    listings = await _gather(
        [_bounded(limit, _read_chatbots(client)) for client in by_client.values()]
    )
    records = dict(zip(by_client, listings, strict=True))
    targets = _dedupe(bots)
    reads = [
        (bot, kind, records[id(clients[bot.api_key_env])]) for bot in targets for kind in kinds()
    ]
    parts = await _gather(
        [
            _bounded(limit, _read_part(clients[bot.api_key_env], bot, kind, listing))
            for bot, kind, listing in reads
        ]
    )
    found: dict[str, dict[str, Any]] = {bot.chatbot_id: {} for bot in targets}
    for (bot, _, _), part in zip(reads, parts, strict=True):
        if part is not None:
            found[bot.chatbot_id].update(part)
    return Live(
        bots={
            bot.chatbot_id: _live_bot(bot, records[id(clients[bot.api_key_env])], found)
            for bot in targets
        },
        listed={
            env: {chatbot_id: _name(record) for chatbot_id, record in listing.items()}
            for env in sorted({bot.api_key_env for bot in bots})
            if (listing := records[id(clients[env])]) is not None
        },
    )


_READ_SUBJECTS = {"read chatbot list": "settings", "read attributes": "attributes"}


def refused_read_notes(clients: Mapping[str, ServiceClient]) -> tuple[str, ...]:
    """Warnings for the reads the service refused (405/501, API-NOTES note 3), so that an
    automatic fallback to the state file is never silent."""
    notes = []
    for client in {id(c): c for c in clients.values()}.values():
        for (operation, status), count in sorted(client.refused_reads.items()):
            if operation not in _READ_SUBJECTS:
                continue  # the contact list: a count the plan says is unknown, not a fallback
            subject = _READ_SUBJECTS.get(operation, operation)
            times = f" for {count} chatbots" if count > 1 else ""
            notes.append(
                f"the service answered {operation} with HTTP {status}{times} (${client.key_name}):"
                f" it offers no such read, so {subject} are compared with what botctl last "
                "applied; --no-reads sends no reads at all"
            )
    return tuple(notes)


def _name(record: Mapping[str, Any]) -> str:
    name = record.get("name")
    return name if isinstance(name, str) else ""


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


async def _read_part(
    client: ServiceClient,
    bot: BotSpec,
    kind: ResourceKind,
    listing: Mapping[str, dict[str, Any]] | None,
) -> dict[str, Any] | None:
    """One kind's live parts of one chatbot; None when the list says it does not exist
    (nothing to read)."""
    if listing is not None and bot.chatbot_id not in listing:
        return None
    listed = listing.get(bot.chatbot_id) if listing is not None else None
    return await kind.read_live(client, bot.chatbot_id, listed)


def _live_bot(
    bot: BotSpec, listing: dict[str, dict[str, Any]] | None, found: Mapping[str, dict[str, Any]]
) -> LiveBot:
    if listing is not None and bot.chatbot_id not in listing:
        return LiveBot(chatbot_id=bot.chatbot_id, exists=False)
    # Without a list, whether it exists is unknown: assumed so, and writes tell.
    return LiveBot.of(bot.chatbot_id, found[bot.chatbot_id])


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
