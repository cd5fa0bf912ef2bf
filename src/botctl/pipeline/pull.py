"""``botctl conversations pull``: the chatbots' stored conversations (4.6) of a period, made
into ``ConversationTest`` documents (``conversation.pulled``), personal data redacted
(``conversation.redact``) with the names and values the service holds for the chatbots'
contacts (4.5), written into one directory, all or none.

Reading: ``GET /get-conversations`` per chatbot with ``startDate``/``endDate`` (UTC days,
both inclusive), the ``--source`` filter as ``filteredSources``, pages of 100 (``size``,
the most API-NOTES allows) from page 1 until a page holds fewer (the answer has no totals),
newest first, until ``--max`` tests are taken. Writing: a test whose file exists in the
directory is kept as it is (it may have been edited) unless ``overwrite``; one whose name is
a test of the configuration already is skipped.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path

from botctl import contract
from botctl.config.messages import did_you_mean
from botctl.config.selection import Selection
from botctl.conversation.pulled import Harvest, Harvester, Pulled, PullRules
from botctl.conversation.redact import Contacts, Redactor, Rule
from botctl.errors import BotctlError, ReadsUnavailable
from botctl.models import BotSpec
from botctl.pipeline.conversations import masked_values
from botctl.pipeline.flows import _refs, _service, write_all_or_none
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.service.client import ServiceClient
from botctl.service.connect import connect

MAX_PAGES = 10_000  # of either list: a service that never ends a list is an error, not a hang


@dataclass(frozen=True)
class PullOptions:
    chatbots: tuple[str, ...]  # metadata.name or a glob
    since: date
    until: date
    sources: tuple[str, ...]
    out: Path
    rules: PullRules
    redact: tuple[Rule, ...] = ()
    contact_names: bool = True  # read the contacts to redact what the service holds
    overwrite: bool = False


@dataclass
class BotPull:
    bot: BotSpec
    harvest: Harvest
    read: int  # conversations read
    redacted: dict[str, int]


@dataclass
class PullReport:
    bots: list[BotPull] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)  # existed: left as they are


async def pull_conversations(ws: Workspace, options: PullOptions) -> PullReport:
    """Read, redact, write (all or none); nothing is written when any read fails."""
    whole = load_resolved(replace(ws, selection=Selection()))
    names = [b.spec.name for b in whole.bots]
    for pattern in options.chatbots:
        if not any(fnmatch.fnmatchcase(name, pattern) for name in names):
            raise BotctlError(
                f"CHATBOT {pattern!r}: no chatbot of the configuration is named so"
                + did_you_mean(pattern, names)
                + f"; chatbots: {', '.join(names)}"
            )
    bots = [
        b.spec
        for b in whole.bots
        if any(fnmatch.fnmatchcase(b.spec.name, p) for p in options.chatbots)
    ]
    known = frozenset(t.name for t in whole.tests)
    pulled_at = datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    report = PullReport()
    async with connect(_refs(bots), ws.environ, _service(ws, bots)) as clients:
        for bot in bots:
            client = clients[bot.api_key_env]
            contacts = await _contacts(client, bot) if options.contact_names else Contacts()
            redactor = Redactor(contacts, options.redact, secrets=masked_values(ws, bots))
            taker = Harvester(bot.name, bot.chatbot_id, redactor, options.rules, pulled_at, known)
            read = await _read(client, bot, options, taker)
            report.bots.append(BotPull(bot, taker.found, read, dict(redactor.found)))
    _write(report, [t for b in report.bots for t in b.harvest.tests], options)
    return report


async def _read(client: ServiceClient, bot: BotSpec, options: PullOptions, taker: Harvester) -> int:
    size = contract.CONVERSATIONS_PAGE_SIZE_MAX
    read = 0
    for page in range(1, MAX_PAGES + 1):
        records = await client.list_conversations(
            bot.chatbot_id,
            page,
            start=options.since.isoformat(),
            end=options.until.isoformat(),
            sources=options.sources,
            size=size,
        )
        read += len(records)
        for record in records:
            taker.take(record)
        if len(records) < size or taker.full:
            return read
    raise BotctlError(
        f"{bot.name} ({bot.chatbot_id}): the conversation list did not end within "
        f"{MAX_PAGES} pages of {size}; narrow --since or --source"
    )


async def _contacts(client: ServiceClient, bot: BotSpec) -> Contacts:
    """Every contact of the chatbot, for their names and values; a service that cannot list
    them is an error (nothing is written unredacted) unless --no-contact-names."""
    records = []
    per_page = contract.CONTACTS_PAGE_SIZE_MAX
    try:
        for page in range(1, MAX_PAGES + 1):
            found = await client.list_contacts(bot.chatbot_id, page, per_page)
            records += found.contacts
            last = found.total_pages is not None and page >= found.total_pages
            if last or len(found.contacts) < per_page:
                return Contacts.from_records(records)
    except ReadsUnavailable as exc:
        raise BotctlError(
            f"{bot.name} ({bot.chatbot_id}): cannot read its contacts, whose names and values "
            f"are redacted from the conversations ({exc}); nothing was written. Pass "
            "--no-contact-names to pull with the patterns alone"
        ) from None
    raise BotctlError(
        f"{bot.name} ({bot.chatbot_id}): the contact list did not end within {MAX_PAGES} pages"
    )


def _write(report: PullReport, tests: Sequence[Pulled], options: PullOptions) -> None:
    """Every new test's file, all or none; an existing one kept unless ``overwrite``."""
    files, existing = [], []
    for test in tests:
        path = options.out / test.file_name
        if path.exists() or path.is_symlink():
            existing.append((path, test.text))
        else:
            files.append((path, test.text))
    if options.overwrite:
        files, existing = [*files, *existing], []
    write_all_or_none(options.out, files, replace_existing=options.overwrite)
    report.written = [p for p, _ in files]
    report.kept = [p for p, _ in existing]
