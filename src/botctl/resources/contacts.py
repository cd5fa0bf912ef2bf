"""Contacts and the values they carry for custom attributes (contract 2.7, 4.5, 4.7).

botctl manages attributes, the columns; contacts hold the data. It reads them for two things:

- **Usage** (``count_values``): how many contacts carry a non-null value for an attribute the
  plan archives, renames or cannot change the type of. One paged read of the chatbot's
  contacts (the largest page the contract allows, 1000) counts every attribute asked for at
  once, within a run-wide ``ContactBudget``.
- **Renames** (``migrate``): ``renamedFrom: old`` on a declared attribute. One operation
  creates the new attribute (when the service does not hold it yet), copies each contact's
  value from the old name to the new one, re-reads the contacts to verify, and archives the
  old attribute only when every value is in place. Per contact:

  | old value | new value | outcome |
  |---|---|---|
  | null/absent | any | nothing to move |
  | v | null/absent | moved: ``PATCH`` with the contact's map, whole, plus the new key |
  | v | v (converted) | already right |
  | v | w != v | conflict: left alone, reported, blocks the archive |
  | v that does not convert exactly to the new type | | failed: reported, blocks it |

  The ``PATCH`` body is the contact's ``custom_attributes`` as just read, with the new name
  added: right whether the service merges the map (the sandbox does) or replaces it. A value
  is only ever written where the new attribute holds none, so a re-run, a retry or a resumed
  run never overwrites a value set meanwhile. Progress (the page reached, the counts) goes to
  the state after each page, so a killed run resumes there; the verifying read covers every
  page whatever a resumed run skipped, and what it finds still unmoved is copied (a few
  rounds at most) before anything is archived.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, Protocol

from botctl import contract
from botctl.errors import BotctlError, ReadsUnavailable, ServiceError
from botctl.plan import Operation
from botctl.values import JsonValue

if TYPE_CHECKING:
    import asyncio

PAGE_SIZE = contract.CONTACTS_PAGE_SIZE_MAX
VERIFY_ROUNDS = 3  # copy passes a migration makes before it gives up on unmoved values
SHOWN_IDS = 10  # contact ids a report names (the count says how many more)
DEFAULT_CONCURRENCY = 16  # contact updates at once (the apply sets 2 x --parallelism)
MAX_PAGES = 10_000  # 10 million contacts: a list longer than that is a service that loops


# --- reading ------------------------------------------------------------------------------------


class Page(Protocol):
    @property
    def contacts(self) -> list[dict[str, Any]]: ...

    @property
    def total(self) -> int | None: ...

    @property
    def total_pages(self) -> int | None: ...


class ContactReader(Protocol):
    async def list_contacts(self, chatbot_id: str, page: int, per_page: int = ...) -> Page: ...


class ContactWriter(ContactReader, Protocol):
    async def update_contact(
        self, chatbot_id: str, contact_id: str, custom_attributes: dict[str, Any]
    ) -> dict[str, Any]: ...

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]: ...


@dataclass
class ContactBudget:
    """The run-wide cap on contacts read to count values (``--max-contact-reads``); None:
    no cap."""

    limit: int | None
    used: int = 0

    def allows(self, more: int) -> bool:
        return self.limit is None or self.used + more <= self.limit


class BudgetSpent(Exception):
    """Counting stopped at the run's cap on contacts read."""


async def pages(
    client: ContactReader,
    chatbot_id: str,
    *,
    first: int = 1,
    budget: ContactBudget | None = None,
) -> Any:
    """Yield ``(page number, contacts, total)`` from page ``first`` to the last, one read each
    (``per_page`` 1000). Ends at the last page the service counts, or at a short or empty
    page when it gives no count."""
    page = first
    while True:
        if budget is not None and not budget.allows(1):
            raise BudgetSpent
        got = await client.list_contacts(chatbot_id, page, PAGE_SIZE)
        if budget is not None:
            budget.used += len(got.contacts)
        yield page, got.contacts, got.total
        last = got.total_pages
        if not got.contacts or (last is not None and page >= last):
            return
        if last is None and len(got.contacts) < PAGE_SIZE:
            return
        if page >= MAX_PAGES:  # a list that never ends: a broken service, not 10M contacts
            raise ServiceError(
                "read contacts",
                f"the contact list did not end after {MAX_PAGES:,} pages; stopped reading",
                chatbot_id=chatbot_id,
            )
        page += 1


def values_of(contact: Mapping[str, Any]) -> dict[str, Any]:
    found = contact.get("custom_attributes")
    return dict(found) if isinstance(found, Mapping) else {}


@dataclass(frozen=True)
class Usage:
    """How many contacts carry a value for each attribute counted; ``counts`` is None when
    they could not be counted, and ``note`` says why."""

    counts: dict[str, int] | None
    note: str = ""
    pages: int = 0  # pages one pass over the chatbot's contacts read (``per_page`` 1000)

    def migration_requests(self, name: str) -> tuple[int, int] | None:
        """The contacts' requests of a rename of ``name`` (``migrate``): a copy pass and a
        verifying pass over every page, and an update at most per contact carrying a value
        (reads, updates); None when not counted."""
        if self.counts is None:
            return None
        return 2 * self.pages, self.counts.get(name, 0)


async def count_values(
    client: ContactReader, chatbot_id: str, names: Sequence[str], budget: ContactBudget
) -> Usage:
    """Contacts carrying a non-null value for each of ``names``, in one paged read."""
    counts = dict.fromkeys(names, 0)
    read = 0  # pages: how many one pass reads
    try:
        async for _, contacts, total in pages(client, chatbot_id, budget=budget):
            read += 1
            if total is not None and budget.limit is not None and total > budget.limit:
                return Usage(None, _cap_note(budget))
            for contact in contacts:
                held = values_of(contact)
                for name in names:
                    if held.get(name) is not None:
                        counts[name] += 1
    except BudgetSpent:
        return Usage(None, _cap_note(budget))
    except ReadsUnavailable as exc:
        why = exc.detail if exc.status is None else f"the service offers no contact read ({exc})"
        return Usage(None, f"not counted: {why}")
    return Usage(counts, pages=read)


def _cap_note(budget: ContactBudget) -> str:
    return f"not counted: the run's cap of {budget.limit:,} contacts read (--max-contact-reads)"


# --- values across types ------------------------------------------------------------------------

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


class NoExactValue(ValueError):
    """A value that has no exact equivalent in the new attribute's type."""


def convert(value: Any, from_type: str, to_type: str) -> Any:
    """``value`` of an attribute of ``from_type`` as a value of ``to_type``, exactly: what
    converts back to the same value, or ``NoExactValue``."""
    if from_type == to_type:
        return value
    if to_type == "text":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float):
            text = repr(value)
            return text[:-2] if isinstance(value, float) and text.endswith(".0") else text
        if isinstance(value, str):
            return value
    if isinstance(value, str):
        if to_type == "number" and _NUMBER.fullmatch(value):
            number = float(value)
            if math.isfinite(number):
                exact = int(number) if number.is_integer() and "." not in value else number
                if convert(exact, "number", "text") == value:
                    return exact
        if to_type == "boolean" and value in ("true", "false"):
            return value == "true"
        if to_type == "date" and _is_date(value):
            return value
    raise NoExactValue(f"{value!r} has no exact {to_type} value")


def _is_date(text: str) -> bool:
    try:
        datetime.fromisoformat(text) if "T" in text or " " in text else date.fromisoformat(text)
    except ValueError:
        return False
    return True


def convertible(from_type: str, to_type: str) -> bool:
    """Whether a rename may change the type at all (each value is still checked)."""
    return from_type == to_type or to_type == "text" or from_type == "text"


# --- the rename operation -----------------------------------------------------------------------


@dataclass
class Progress:
    """A migration's progress, as the state records it (``to_json``/``from_json``)."""

    source: str  # the old name
    page: int = 0  # the last page of the copy pass done
    total: int | None = None
    moved: int = 0
    already: int = 0
    conflicts: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    phase: str = "copy"  # copy, verify, blocked (conflicts or failures), archive

    def to_json(self) -> dict[str, JsonValue]:
        return {
            "from": self.source,
            "phase": self.phase,
            "page": self.page,
            "total": self.total,
            "moved": self.moved,
            "already_right": self.already,
            "conflicts": list(self.conflicts[:SHOWN_IDS]),
            "conflict_count": len(self.conflicts),
            "failed": list(self.failed[:SHOWN_IDS]),
            "failed_count": len(self.failed),
        }

    def line(self, target: str) -> str:
        """The progress line: ``migrating plan -> tier: 4,200 / 12,000 contacts``."""
        rename = f"{self.source} -> {target}"
        if self.phase == "copy":
            done = self.page * PAGE_SIZE
            if self.total is not None:
                done = min(done, self.total)
            total = f"{self.total:,}" if self.total is not None else "?"
            return f"migrating {rename}: {done:,} / {total} contacts"
        if self.phase == "verify":
            return (
                f"verifying {rename}: reading every contact back ({self.moved:,} moved, "
                f"{self.already:,} already right so far)"
            )
        if self.phase == "blocked":
            return (
                f"{rename}: {len(self.conflicts):,} in conflict, {len(self.failed):,} failed: "
                f"{self.source} stays active"
            )
        return f"archiving {self.source}: every value is in {target}"

    @classmethod
    def from_json(cls, data: Any, source: str) -> Progress | None:
        """Progress recorded for the same rename, or None (another, or unreadable)."""
        if not isinstance(data, Mapping) or data.get("from") != source:
            return None
        page, moved = data.get("page"), data.get("moved")
        if not isinstance(page, int) or not isinstance(moved, int) or page < 0 or moved < 0:
            return None
        already = data.get("already_right")
        already = already if isinstance(already, int) and already >= 0 else 0
        return cls(source, page=page, moved=moved, already=already)


@dataclass(frozen=True)
class Hooks:
    """What a migration tells its run: progress to record in the state and show, and the
    progress recorded by an earlier run of the same rename."""

    recorded: Callable[[Operation], Progress | None] = lambda op: None
    progress: Callable[[Operation, Progress], None] = lambda op, p: None


_RUN: contextvars.ContextVar[tuple[Hooks, int]] = contextvars.ContextVar(
    "botctl_migrations", default=(Hooks(), DEFAULT_CONCURRENCY)
)


@contextlib.contextmanager
def migrations(hooks: Hooks, concurrency: int) -> Iterator[None]:
    """The renames an apply carries out within this block report to ``hooks`` and send up
    to ``concurrency`` contact updates at once (the tasks the apply starts inherit it)."""
    token = _RUN.set((hooks, max(1, concurrency)))
    try:
        yield
    finally:
        _RUN.reset(token)


async def migrate_in_run(
    op: Operation, client: ContactWriter, create: Callable[[], Awaitable[str]]
) -> str:
    """``migrate`` with the run's hooks and concurrency (``migrations``)."""
    hooks, concurrency = _RUN.get()
    return await migrate(op, client, hooks, concurrency=concurrency, create=create)


@dataclass
class _Pass:
    moved: int = 0
    already: int = 0
    pending: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)  # contact id -> why its PATCH failed


async def migrate(
    op: Operation,
    client: ContactWriter,
    hooks: Hooks,
    *,
    concurrency: int,
    create: Callable[[], Awaitable[str]],
) -> str:
    """Carry out one ``migrate_attribute`` operation (see the module's docstring). ``create``
    creates the new attribute (the attribute kind's uncertainty-proof create)."""
    body = op.body
    source, target = str(body["from"]), op.subject
    chatbot_id = op.bot.chatbot_id
    if body.get("create") is not None:
        await create()
    resumed = hooks.recorded(op)
    progress = resumed or Progress(source)  # conflicts and failures are found anew
    first = progress.page + 1 if resumed is not None else 1
    import asyncio  # here: configurations load without the event loop's machinery

    gate = asyncio.Semaphore(max(1, concurrency))
    errors: dict[str, str] = {}
    for round_ in range(VERIFY_ROUNDS):
        progress.phase = "copy"
        copied = await _copy(op, client, progress, hooks, gate, first=first)
        progress.moved += copied.moved
        if round_ == 0:  # a later pass meets the same contacts again
            progress.already += copied.already
        errors.update(copied.errors)
        progress.phase = "verify"
        hooks.progress(op, progress)
        check = await _verify(op, client)
        progress.conflicts, progress.failed = check.conflicts, check.failed
        if not check.pending:
            break
        first = 1  # values still to move: another pass over every page
    else:
        progress.failed += [
            f"{contact_id} ({errors.get(contact_id, 'the new value did not appear')})"
            for contact_id in check.pending
        ]
    summary = (
        f"{progress.moved:,} moved, {progress.already:,} already right, "
        f"{len(progress.conflicts):,} in conflict, {len(progress.failed):,} failed"
    )
    if progress.conflicts or progress.failed:
        progress.phase = "blocked"
        hooks.progress(op, progress)
        raise BotctlError(
            f"{op.bot.name}: rename {source} -> {target}: {summary}; {source} is left "
            f"active (archived only once every value is moved).{_listed(progress)}\n"
            f"Resolve each (set {target} or clear {source} on the contact) and apply again."
        )
    progress.phase = "archive"
    hooks.progress(op, progress)
    archive = body.get("archive")
    if isinstance(archive, dict):
        await client.update_attribute(chatbot_id, source, dict(archive))
    return f"{summary}; verified by re-reading the contacts; {source} archived"


def _listed(progress: Progress) -> str:
    lines = []
    for what, ids in (("conflict", progress.conflicts), ("failed", progress.failed)):
        if ids:
            more = f" (and {len(ids) - SHOWN_IDS:,} more)" if len(ids) > SHOWN_IDS else ""
            lines.append(f"\n  {what}: {', '.join(ids[:SHOWN_IDS])}{more}")
    return "".join(lines)


def _wanted(op: Operation, held: Mapping[str, Any]) -> tuple[str, Any]:
    """What the contact's values mean for the rename: ("none" | "move" | "already" |
    "conflict" | "failed", the new value or the reason)."""
    source, target = str(op.body["from"]), op.subject
    old = held.get(source)
    if old is None:
        return "none", None
    try:
        value = convert(old, str(op.body["from_type"]), str(op.body["type"]))
    except NoExactValue as exc:
        return "failed", str(exc)
    new = held.get(target)
    if new is None:
        return "move", value
    if same(new, value):
        return "already", value
    return "conflict", new


def same(a: Any, b: Any) -> bool:
    """Equal as values of one attribute: 2 and 2.0 are, true and 1 are not. Exact, unlike
    ``values.same_value`` (whose tolerance is for settings read back from float storage): a
    customer's 2.0000001 is another value than 2, so a conflict, never "already right"."""
    if isinstance(a, bool | str) or isinstance(b, bool | str):
        return type(a) is type(b) and a == b
    return bool(a == b)


async def _copy(
    op: Operation,
    client: ContactWriter,
    progress: Progress,
    hooks: Hooks,
    gate: asyncio.Semaphore,
    *,
    first: int,
) -> _Pass:
    import asyncio

    result = _Pass()
    async for page, contacts, total in pages(client, op.bot.chatbot_id, first=first):
        progress.total = total
        moves = []
        for contact in contacts:
            held = values_of(contact)
            outcome, value = _wanted(op, held)
            if outcome == "already":
                result.already += 1
            elif outcome == "move":
                moves.append((str(contact.get("external_id")), {**held, op.subject: value}))
        outcomes = await asyncio.gather(*(_move(op, client, gate, *m) for m in moves))
        for (contact_id, _), error in zip(moves, outcomes, strict=True):
            if error is None:
                result.moved += 1
            else:
                result.errors[contact_id] = error
        progress.page = page
        hooks.progress(
            op,
            replace(
                progress,
                moved=progress.moved + result.moved,
                already=progress.already + result.already,
                total=total,
            ),
        )
    return result


async def _move(
    op: Operation,
    client: ContactWriter,
    gate: asyncio.Semaphore,
    contact_id: str,
    values: dict[str, Any],
) -> str | None:
    """One contact's PATCH: None, or why it failed (left to the verifying read: it may have
    landed, and a contact deleted meanwhile has nothing to move)."""
    async with gate:
        try:
            await client.update_contact(op.bot.chatbot_id, contact_id, values)
        except ServiceError as exc:
            return exc.detail
    return None


async def _verify(op: Operation, client: ContactWriter) -> _Pass:
    result = _Pass()
    async for _, contacts, _ in pages(client, op.bot.chatbot_id):
        for contact in contacts:
            outcome, detail = _wanted(op, values_of(contact))
            contact_id = str(contact.get("external_id"))
            if outcome == "move":
                result.pending.append(contact_id)
            elif outcome == "conflict":
                result.conflicts.append(contact_id)
            elif outcome == "failed":
                result.failed.append(f"{contact_id} ({detail})")
    return result
