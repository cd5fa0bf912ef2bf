"""Contacts: exact value conversion, renames planned, and the migration against an in-memory
service that either merges or replaces a contact's custom_attributes on PATCH."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from botctl.errors import ApiError, BotctlError, ImpossibleChangeError
from botctl.plan import Operation
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.usage import ContactPolicy, annotate, refuse_archives, wanted
from botctl.resources.contacts import (
    PAGE_SIZE,
    ContactBudget,
    Hooks,
    NoExactValue,
    Progress,
    Usage,
    convert,
    count_values,
    migrate,
)
from tests.factories import bot, desired, live, live_bot, state

# --- conversion ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "from_type", "to_type", "expected"),
    [
        ("pro", "text", "text", "pro"),
        (42, "number", "text", "42"),
        (4.5, "number", "text", "4.5"),
        (True, "boolean", "text", "true"),
        ("2024-05-01", "date", "text", "2024-05-01"),
        ("42", "text", "number", 42),
        ("-4.5", "text", "number", -4.5),
        ("false", "text", "boolean", False),
        ("2024-05-01", "text", "date", "2024-05-01"),
    ],
)
def test_exact_conversions(value: Any, from_type: str, to_type: str, expected: Any) -> None:
    converted = convert(value, from_type, to_type)
    assert converted == expected
    assert type(converted) is type(expected)


@pytest.mark.parametrize(
    ("value", "to_type"),
    [
        ("4.50", "number"),
        ("1e3", "number"),
        ("042", "number"),
        ("nan", "number"),
        ("yes", "boolean"),
        ("True", "boolean"),
        ("May 1", "date"),
        (" 42", "number"),
    ],
)
def test_inexact_values_are_refused(value: str, to_type: str) -> None:
    with pytest.raises(NoExactValue):
        convert(value, "text", to_type)


# --- planning -----------------------------------------------------------------------------------

PLAN: dict[str, Any] = {"name": "plan", "type": "text", "label": "Plan"}
TIER: dict[str, Any] = {"name": "tier", "type": "text", "label": "Tier", "renamedFrom": "plan"}


def test_rename_is_one_operation() -> None:
    plan = compute_plan(desired(bot(attributes=[TIER])), live(live_bot(attributes=[PLAN])), state())
    [op] = plan.operations
    assert (op.kind, op.subject) == ("migrate_attribute", "tier")
    assert op.body["from"] == "plan"
    assert op.body["create"] == {"name": "tier", "type": "text", "label": "Tier", "archived": False}
    assert op.body["archive"] == {"label": "Plan", "archived": True}
    [change] = op.changes
    assert change.action == "rename"
    assert wanted(plan) == {"bot-1": (op.bot, ["plan"])}
    assert (op.sends, op.contact_reads, op.contact_updates) == (2, None, None)
    assert plan.requests().total is None  # not counted yet
    counted = annotate(plan, {"bot-1": Usage({"plan": 7}, pages=3)})
    assert next(counted.changes())[1].contacts_with_value == 7
    assert counted.to_document()["changes"][0]["renamed_from"] == "plan"
    # Create and archive, a copy pass and a verifying pass over 3 pages, 7 updates at most.
    [counted_op] = counted.operations
    assert (counted_op.contact_reads, counted_op.contact_updates) == (6, 7)
    assert counted.requests().total == 2 + 6 + 7


def test_rename_resumed_without_the_create() -> None:
    observed = [PLAN, {k: v for k, v in TIER.items() if k != "renamedFrom"}]
    plan = compute_plan(
        desired(bot(attributes=[TIER])), live(live_bot(attributes=observed)), state()
    )
    [op] = plan.operations
    assert op.kind == "migrate_attribute"
    assert op.body["create"] is None
    assert op.sends == 1  # the archive only


def test_rename_done_plans_nothing() -> None:
    observed = [{**PLAN, "archived": True}, {k: v for k, v in TIER.items() if k != "renamedFrom"}]
    plan = compute_plan(
        desired(bot(attributes=[TIER])), live(live_bot(attributes=observed)), state()
    )
    assert plan.operations == ()


def test_rename_recorded_unfinished_is_resumed_though_the_source_is_archived() -> None:
    # A run killed after its archive landed, before the state recorded it: the migration is
    # still in the state. Resumed (values left move, nothing created or archived), not skipped.
    observed = [{**PLAN, "archived": True}, {k: v for k, v in TIER.items() if k != "renamedFrom"}]
    recorded = state()
    recorded.bots["bot-1"].migrations["tier"] = Progress("plan", page=2, moved=1950).to_json()
    plan = compute_plan(
        desired(bot(attributes=[TIER])), live(live_bot(attributes=observed)), recorded
    )
    [op] = plan.operations
    assert (op.kind, op.subject, op.body["create"], op.body["archive"]) == (
        "migrate_attribute",
        "tier",
        None,
        None,
    )
    other = state()
    other.bots["bot-1"].migrations["tier"] = Progress("level").to_json()  # another rename's
    assert (
        compute_plan(
            desired(bot(attributes=[TIER])), live(live_bot(attributes=observed)), other
        ).operations
        == ()
    )


def test_rename_of_an_unknown_source_is_a_create_with_a_warning() -> None:
    plan = compute_plan(desired(bot(attributes=[TIER])), live(live_bot(attributes=[])), state())
    assert [op.kind for op in plan.operations] == ["create_attribute"]
    assert any("BC306" in w for w in plan.warnings)


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        ([{**TIER, "renamedFrom": "tier"}], "cannot be renamed from itself"),
        ([TIER, PLAN], "'plan' is declared too"),
        ([{**TIER, "type": "boolean"}], "cannot move to a 'boolean' attribute"),
    ],
)
def test_impossible_renames(declared: list[dict[str, Any]], problem: str) -> None:
    observed = [{**PLAN, "type": "number"}] if "boolean" in problem else [PLAN]
    with pytest.raises(ImpossibleChangeError, match=problem):
        compute_plan(
            desired(bot(attributes=declared)), live(live_bot(attributes=observed)), state()
        )


def test_archive_with_values_needs_consent() -> None:
    archived = {**PLAN, "archived": True}
    plan = compute_plan(
        desired(bot(attributes=[archived])), live(live_bot(attributes=[PLAN])), state()
    )
    counted = annotate(plan, {"bot-1": Usage({"plan": 1204})})
    with pytest.raises(BotctlError, match=r"archive attribute plan \(1,204 contacts carry"):
        refuse_archives(counted, desired(bot(attributes=[archived])), ContactPolicy())
    refuse_archives(counted, None, ContactPolicy(allow_archive_with_values=True))
    consent = desired(bot(attributes=[{**archived, "archiveWithValues": True}]))
    refuse_archives(counted, consent, ContactPolicy())
    refuse_archives(annotate(plan, {"bot-1": Usage({"plan": 0})}), None, ContactPolicy())
    unknown = annotate(plan, {"bot-1": Usage(None, "not counted: off")})
    refuse_archives(unknown, None, ContactPolicy())  # unknown: a warning, not a refusal
    assert any("BC307" in w for w in unknown.warnings)


# --- the migration ------------------------------------------------------------------------------


@dataclass
class Page:
    contacts: list[dict[str, Any]]
    total: int | None
    total_pages: int | None


class Service:
    """Contacts in memory; PATCH merges or replaces ``custom_attributes``."""

    def __init__(self, contacts: dict[str, dict[str, Any]], *, replace: bool) -> None:
        self.contacts = contacts
        self.replace = replace
        self.pages: list[int] = []
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.archived: list[str] = []
        self.created: list[str] = []
        self.fail: set[str] = set()

    async def list_contacts(self, chatbot_id: str, page: int, per_page: int = PAGE_SIZE) -> Page:
        self.pages.append(page)
        ids = sorted(self.contacts)
        chunk = ids[(page - 1) * per_page : page * per_page]
        data = [{"external_id": i, "custom_attributes": dict(self.contacts[i])} for i in chunk]
        return Page(data, len(ids), -(-len(ids) // per_page))

    async def update_contact(
        self, chatbot_id: str, contact_id: str, custom_attributes: dict[str, Any]
    ) -> dict[str, Any]:
        self.patches.append((contact_id, dict(custom_attributes)))
        if contact_id in self.fail:
            raise ApiError(f"update contact {contact_id}", 400, "Invalid request data")
        if self.replace:
            self.contacts[contact_id] = dict(custom_attributes)
        else:
            self.contacts[contact_id].update(custom_attributes)
        return {}

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]:
        self.created.append(body["name"])
        return body

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.archived.append(name)
        return body

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]:
        return []


def rename_op(create: bool = True) -> Operation:
    plan = compute_plan(desired(bot(attributes=[TIER])), live(live_bot(attributes=[PLAN])), state())
    op = plan.operations[0]
    return (
        op
        if create
        else Operation(
            op.bot,
            op.kind,
            op.subject,
            {**op.body, "create": None},
            op.state_record,
            op.changes,
            op.fallback,
        )
    )


def world(n: int) -> dict[str, dict[str, Any]]:
    return {f"c{i:05}": {"plan": f"p{i}", "other": i} for i in range(n)}


def run(op: Operation, service: Service, hooks: Hooks | None = None) -> str:
    async def create() -> str:
        await service.create_attribute("bot-1", dict(op.body["create"] or {}))
        return ""

    return asyncio.run(migrate(op, service, hooks or Hooks(), concurrency=8, create=create))


@pytest.mark.parametrize("replace", [False, True], ids=["merge", "replace"])
def test_body_is_right_whether_patch_merges_or_replaces(replace: bool) -> None:
    service = Service(world(2500), replace=replace)
    note = run(rename_op(), service)
    assert note.startswith("2,500 moved, 0 already right, 0 in conflict, 0 failed")
    assert all(
        c == {"plan": f"p{i}", "other": i, "tier": f"p{i}"}
        for i, c in enumerate(service.contacts.values())
    )
    assert service.patches[0] == ("c00000", {"plan": "p0", "other": 0, "tier": "p0"})
    assert (service.created, service.archived) == (["tier"], ["plan"])
    assert service.pages == [1, 2, 3, 1, 2, 3]  # copy, then the verifying read


def test_conflicts_and_failures_block_the_archive() -> None:
    contacts = world(20)
    contacts["c00003"]["tier"] = "newer"
    contacts["c00004"]["tier"] = "p4"
    service = Service(contacts, replace=False)
    service.fail = {"c00005"}
    with pytest.raises(BotctlError) as caught:
        run(rename_op(), service)
    text = str(caught.value)
    assert "17 moved, 1 already right, 1 in conflict, 1 failed" in text
    assert "conflict: c00003" in text
    assert "c00005 (HTTP 400: Invalid request data)" in text
    assert service.contacts["c00003"]["tier"] == "newer"  # never overwritten
    assert service.archived == []
    assert not any(cid == "c00003" for cid, _ in service.patches)


def test_resume_starts_after_the_recorded_page_and_verifies_all() -> None:
    contacts = world(3000)
    for cid in sorted(contacts)[:2000]:  # pages 1 and 2 moved by the killed run
        contacts[cid]["tier"] = contacts[cid]["plan"]
    service = Service(contacts, replace=False)
    recorded = Progress("plan", page=2, moved=2000)
    shown: list[str] = []
    hooks = Hooks(lambda op: recorded, lambda op, p: shown.append(p.line(op.subject)))
    note = run(rename_op(create=False), service, hooks)
    assert service.pages == [3, 1, 2, 3]
    assert note.startswith("3,000 moved, 0 already right")
    assert "migrating plan -> tier: 3,000 / 3,000 contacts" in shown
    assert len(service.patches) == 1000


def test_resume_that_missed_values_copies_them_before_archiving() -> None:
    """Progress says page 2, but page 1 holds unmoved values (contacts added since): the
    verifying read finds them, another pass moves them, then the archive."""
    service = Service(world(1500), replace=False)
    note = run(rename_op(create=False), service, Hooks(lambda op: Progress("plan", page=1)))
    assert service.pages == [2, 1, 2, 1, 2, 1, 2]
    assert all(c["tier"] == c["plan"] for c in service.contacts.values())
    assert service.archived == ["plan"]
    assert "1,500 moved" in note


def test_count_values_in_one_paged_read_within_the_budget() -> None:
    contacts = world(2100)
    contacts["c00001"]["plan"] = None
    service = Service(contacts, replace=False)
    usage = asyncio.run(count_values(service, "bot-1", ["plan", "other"], ContactBudget(None)))
    assert usage.counts == {"plan": 2099, "other": 2100}
    assert service.pages == [1, 2, 3]
    assert usage.pages == 3
    assert usage.migration_requests("plan") == (6, 2099)
    capped = asyncio.run(count_values(service, "bot-1", ["plan"], ContactBudget(1500)))
    assert capped.counts is None
    assert "cap of 1,500" in capped.note


def test_progress_round_trips_through_the_state_file() -> None:
    from botctl.models import State
    from botctl.plan import BotRef
    from botctl.store.keys import KeySource
    from botctl.store.state import state_from_text, state_text

    state = State(lineage="l1", serial=1, salt="0" * 64)
    record = state.record(BotRef("support", "bot-1", "BOTCTL_API_KEY"))
    assert '"migrations"' not in state_text(state)  # written only while there are some
    record.migrations["tier"] = Progress("plan", page=3, moved=2900, already=12).to_json()
    no_key = KeySource(key=None, origin="", file=None)
    again = state_from_text(state_text(state), "state.json", no_key, check_key=False)
    recorded = Progress.from_json(again.bots["bot-1"].migrations["tier"], "plan")
    assert recorded is not None
    assert (recorded.page, recorded.moved, recorded.already) == (3, 2900, 12)
    assert Progress.from_json(again.bots["bot-1"].migrations["tier"], "other") is None
    assert Progress.from_json({"from": "plan", "page": -1, "moved": 0}, "plan") is None


def test_a_contact_list_that_never_ends_is_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from botctl.errors import ServiceError
    from botctl.resources import contacts as module

    class Loop(Service):
        async def list_contacts(self, chatbot_id: str, page: int, per_page: int = 1000) -> Page:
            self.pages.append(page)
            return Page(
                [{"external_id": "x", "custom_attributes": {"plan": "p"}}] * per_page, None, None
            )

    monkeypatch.setattr(module, "MAX_PAGES", 5)
    service = Loop({}, replace=False)
    with pytest.raises(ServiceError, match="did not end after 5 pages"):
        asyncio.run(count_values(service, "bot-1", ["plan"], ContactBudget(None)))
    assert service.pages == [1, 2, 3, 4, 5]
