"""Attributes and the contacts who carry them, end to end: the real CLI against the sandbox
over HTTP. Usage counted in the plan (every format), archives of values refused without
consent, --no-contact-reads, and renames that move every value (README "Contacts")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from botctl.sandbox.server import RunningSandbox
from tests.e2e_support import Bench, bot_yaml

PLAN = "{name: plan, type: text, label: Plan}"


@pytest.fixture
def bench(sandbox: RunningSandbox, tmp_path: Path) -> Bench:
    return Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)


def seed(bench: Bench, carriers: int, without: int = 0, **extra: Any) -> None:
    """bot-1 with attributes plan (text) and score (number); ``carriers`` contacts carry a
    plan value, ``without`` carry none."""
    generate: list[dict[str, Any]] = [
        {"count": carriers, "prefix": "c", "custom_attributes": {"plan": "pro-{i}", "score": 7}}
    ]
    if without:
        generate.append({"count": without, "prefix": "n", "custom_attributes": {"score": 1}})
    attributes = [
        {"name": "plan", "type": "text", "label": "Plan"},
        {"name": "score", "type": "number", "label": "Score"},
    ]
    bench.create_bot("bot-1", attributes=attributes, generate_contacts=generate, **extra)


def adopt(bench: Bench, attributes: str) -> None:
    """Configuration and state that manage plan and score as they are."""
    bench.write("support.yaml", bot_yaml(attributes=attributes))
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output


def contact_reads(bench: Bench) -> list[dict[str, Any]]:
    return [r for r in bench.requests() if "/contacts" in r["path"]]


def contacts(bench: Bench) -> dict[str, dict[str, Any]]:
    return {c["external_id"]: c for c in bench.bot_state("bot-1")["contacts"]}


BOTH = f"- {PLAN}\n- {{name: score, type: number, label: Score}}"
SCORE_ONLY = "- {name: score, type: number, label: Score}"


def test_archive_count_in_every_format(bench: Bench) -> None:
    seed(bench, carriers=1204, without=300)
    adopt(bench, BOTH)
    bench.write(
        "support.yaml",
        bot_yaml(attributes=f"- {{name: plan, type: text, archived: true}}\n{SCORE_ONLY}"),
    )
    bench.clear_log()
    text = bench.run("plan", "--allow-archive-with-values", str(bench.config_dir))
    assert text.exit_code == 0, text.output
    assert "- archive attribute plan (1,204 contacts carry a value)  (verified)" in text.stdout
    reads = contact_reads(bench)
    assert len(reads) == 2  # 1,504 contacts: two pages of 1000, read once for the chatbot
    assert [r["query"] for r in reads] == [
        {"per_page": "1000", "page": "1"},
        {"per_page": "1000", "page": "2"},
    ]
    document = bench.run(
        "plan", "--format", "json", "--allow-archive-with-values", str(bench.config_dir)
    )
    change = next(c for c in json.loads(document.stdout)["changes"] if c["action"] == "archive")
    assert change["contacts_with_value"] == 1204
    markdown = bench.run(
        "plan", "--format", "markdown", "--allow-archive-with-values", str(bench.config_dir)
    )
    assert "| support | `plan` | 1,204 | verified |" in markdown.stdout
    github = bench.run(
        "plan", "--format", "github", "--allow-archive-with-values", str(bench.config_dir)
    )
    assert "archive attribute plan (1,204 contacts carry a value)" in github.stdout


def test_archive_with_values_refused_without_consent(bench: Bench) -> None:
    seed(bench, carriers=12)
    adopt(bench, BOTH)
    bench.write("support.yaml", bot_yaml(attributes=SCORE_ONLY))  # plan dropped: archived
    bench.clear_log()
    refused = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert refused.exit_code == 1
    assert "archive attribute plan (12 contacts carry a value)" in refused.output
    assert "--allow-archive-with-values" in refused.output
    assert "Traceback" not in refused.output
    assert [r for r in bench.requests() if r["method"] != "GET"] == []  # nothing changed
    # Consent on the attribute itself is enough.
    consent = "- {name: plan, type: text, archived: true, archiveWithValues: true}"
    bench.write("support.yaml", bot_yaml(attributes=f"{consent}\n{SCORE_ONLY}"))
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    plan = next(a for a in bench.bot_state("bot-1")["attributes"] if a["name"] == "plan")
    assert plan["archived"] is True
    assert contacts(bench)["c3"]["custom_attributes"]["plan"] == "pro-3"  # kept, read-only


def test_archive_without_values_needs_no_consent(bench: Bench) -> None:
    seed(bench, carriers=1)
    adopt(bench, BOTH)
    bench.admin("PATCH", "/chatbots/bot-1", {"attributes": [{"name": "empty", "type": "text"}]})
    bench.write(
        "support.yaml",
        bot_yaml(attributes=f"{BOTH}\n- {{name: empty, type: text, archived: true}}"),
    )
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "- archive attribute empty (0 contacts carry a value)" in result.stdout


def test_no_contact_reads_sends_no_contact_request(bench: Bench) -> None:
    seed(bench, carriers=5)
    adopt(bench, BOTH)
    bench.write("support.yaml", bot_yaml(attributes=SCORE_ONLY))
    bench.clear_log()
    result = bench.run("plan", "--format", "json", "--no-contact-reads", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    change = next(c for c in json.loads(result.stdout)["changes"] if c["action"] == "archive")
    assert change["contacts_with_value"] is None
    assert "--no-contact-reads" in change["contacts_note"]
    assert contact_reads(bench) == []
    text = bench.run("plan", "--no-contact-reads", str(bench.config_dir))
    assert "contacts carrying a value: unknown" in text.stdout
    assert "BC307" in text.output


def test_no_count_without_an_archive(bench: Bench) -> None:
    seed(bench, carriers=5)
    adopt(bench, BOTH)
    bench.write("support.yaml", bot_yaml(attributes=BOTH.replace("label: Plan", "label: P")))
    bench.clear_log()
    assert bench.run("plan", str(bench.config_dir)).exit_code == 0
    assert contact_reads(bench) == []


def test_contact_read_cap(bench: Bench) -> None:
    seed(bench, carriers=2500)
    adopt(bench, BOTH)
    bench.write("support.yaml", bot_yaml(attributes=SCORE_ONLY))
    bench.clear_log()
    result = bench.run("plan", "--max-contact-reads", "1000", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "contacts carrying a value: unknown, not counted: the run's cap of 1,000" in (
        result.stdout
    )
    assert len(contact_reads(bench)) <= 1


def test_type_change_refusal_counts(bench: Bench) -> None:
    seed(bench, carriers=40)
    bench.write(
        "support.yaml", bot_yaml(attributes=f"- {{name: plan, type: number}}\n{SCORE_ONLY}")
    )
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 1
    assert "attribute 'plan': 40 contacts carry a value" in result.output


RENAMED = "- {name: tier, type: text, label: Tier, renamedFrom: plan}\n" + SCORE_ONLY


def test_rename_moves_every_value_then_archives(bench: Bench) -> None:
    seed(bench, carriers=5000, without=200)
    adopt(bench, BOTH)
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    plan = bench.run("plan", str(bench.config_dir))
    assert plan.exit_code == 0, plan.output
    assert "> rename attribute plan -> tier (5,000 contacts carry a value)  (verified)" in (
        plan.stdout
    )
    assert "1 to rename" in plan.stdout
    document = bench.plan_json(str(bench.config_dir))
    [change] = document["changes"]
    assert (change["action"], change["renamed_from"], change["contacts_with_value"]) == (
        "rename",
        "plan",
        5000,
    )
    drift = bench.run("drift", "--format", "json", str(bench.config_dir))
    assert drift.exit_code == 2, drift.output
    [pending] = json.loads(drift.stdout)["pending"]
    assert (pending["key"], pending["action"], pending["contacts_with_value"]) == (
        "tier",
        "rename",
        None,  # drift reads no contact: it counts nothing
    )
    markdown = bench.run("plan", "--format", "markdown", str(bench.config_dir)).stdout
    assert "| support | rename | attribute | `plan` -> `tier` (5,000 contacts carry a value) |" in (
        markdown
    )
    saved = bench.workdir / "rename.plan"
    assert bench.run("plan", "--out", str(saved), str(bench.config_dir)).exit_code == 0
    result = bench.run("apply", "--state", str(bench.state_path), "--plan", str(saved))
    assert result.exit_code == 0, result.output
    assert "migrating plan -> tier: 1,000 / 5,200 contacts" in result.stdout
    assert "5,000 moved, 0 already right, 0 in conflict, 0 failed" in result.stdout
    held = contacts(bench)
    assert all(held[f"c{i}"]["custom_attributes"]["tier"] == f"pro-{i}" for i in range(1, 5001))
    assert all("tier" not in held[f"n{i}"]["custom_attributes"] for i in range(1, 201))
    assert held["c9"]["custom_attributes"]["score"] == 7  # the other values untouched
    attributes = {a["name"]: a for a in bench.bot_state("bot-1")["attributes"]}
    assert attributes["plan"]["archived"] is True
    assert attributes["tier"]["archived"] is False
    state = json.loads(bench.state_path.read_text())["bots"]["bot-1"]
    assert "migrations" not in state  # done: no progress left to keep
    assert state["attributes"]["plan"]["archived"] is True
    again = bench.run("plan", "--detailed-exitcode", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    drift = bench.run("drift", str(bench.config_dir))
    assert drift.exit_code == 0, drift.output
    rendered = bench.run("render", str(bench.config_dir))
    assert "renamedFrom: plan" in rendered.output


def test_rename_needs_contact_reads(bench: Bench) -> None:
    seed(bench, carriers=3)
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", "--no-contact-reads", str(bench.config_dir))
    assert result.exit_code == 1
    assert "a rename moves the contacts' values and must read them" in result.output
    assert [r for r in bench.requests() if r["method"] != "GET"] == []
    assert contact_reads(bench) == []


def test_rename_conflict_is_left_alone_and_reported(bench: Bench) -> None:
    seed(bench, carriers=30)
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {
            "attributes": [{"name": "tier", "type": "text", "label": "Tier"}],
            "contacts": [
                {"external_id": "both", "custom_attributes": {"plan": "old", "tier": "newer"}},
                {"external_id": "same", "custom_attributes": {"plan": "gold", "tier": "gold"}},
            ],
        },
    )
    adopt(bench, f"{BOTH}\n- {{name: tier, type: text, label: Tier}}")
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert "30 moved, 1 already right, 1 in conflict, 0 failed" in result.output
    assert "conflict: both" in result.output
    held = contacts(bench)
    assert held["both"]["custom_attributes"] == {"plan": "old", "tier": "newer"}
    assert held["c7"]["custom_attributes"]["tier"] == "pro-7"
    plan = next(a for a in bench.bot_state("bot-1")["attributes"] if a["name"] == "plan")
    assert plan["archived"] is False  # not every value moved: the old one stays
    # Resolved by hand (the old value cleared): the next apply archives it.
    bench.admin("PATCH", "/chatbots/bot-1", {})
    httpx.patch(
        f"{bench.api_url}/chatbots/bot-1/contacts/both",
        json={"data": {"custom_attributes": {"plan": None}}},
        headers={"Authorization": "Bearer test-key"},
    ).raise_for_status()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    plan = next(a for a in bench.bot_state("bot-1")["attributes"] if a["name"] == "plan")
    assert plan["archived"] is True


def test_rename_recorded_unfinished_resumes_though_the_source_is_archived(bench: Bench) -> None:
    """The state still records a rename under way, and plan is archived: by a run killed
    before it recorded its archive, or by a person midway. Either way the apply moves the
    values left (never stranded under the archived name) and clears the record."""
    seed(bench, carriers=30)
    adopt(bench, BOTH)
    tier = {"name": "tier", "type": "text", "label": "Tier"}
    archived = {"name": "plan", "type": "text", "label": "Plan", "archived": True}
    bench.admin("PATCH", "/chatbots/bot-1", {"attributes": [archived, tier]})
    for i in range(1, 11):  # the first ten moved before the stop
        httpx.patch(
            f"{bench.api_url}/chatbots/bot-1/contacts/c{i}",
            json={"data": {"custom_attributes": {"tier": f"pro-{i}"}}},
            headers={"Authorization": "Bearer test-key"},
            timeout=10,
        ).raise_for_status()
    state = json.loads(bench.state_path.read_text())
    state["bots"]["bot-1"]["migrations"] = {
        "tier": {"from": "plan", "phase": "copy", "page": 0, "total": 30, "moved": 10}
    }
    bench.state_path.write_text(json.dumps(state))
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    plan = bench.run("plan", str(bench.config_dir))
    assert "> rename attribute plan -> tier (30 contacts carry a value)" in plan.stdout, plan.output
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    held = contacts(bench)
    assert all(held[f"c{i}"]["custom_attributes"]["tier"] == f"pro-{i}" for i in range(1, 31))
    assert "migrations" not in json.loads(bench.state_path.read_text())["bots"]["bot-1"]
    assert not [w for w in bench.writes() if w["path"].endswith("/attributes/plan")]
    again = bench.run("plan", "--detailed-exitcode", str(bench.config_dir))
    assert again.exit_code == 0, again.output


def test_rename_with_a_type_change_converts_exactly(bench: Bench) -> None:
    bench.create_bot(
        "bot-1",
        attributes=[{"name": "code", "type": "text"}],
        contacts=[
            {"external_id": "a", "custom_attributes": {"code": "42"}},
            {"external_id": "b", "custom_attributes": {"code": "4.50"}},
        ],
    )
    adopt(bench, "- {name: code, type: text}")
    bench.write(
        "support.yaml", bot_yaml(attributes="- {name: num, type: number, renamedFrom: code}")
    )
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert "1 moved, 0 already right, 0 in conflict, 1 failed" in result.output
    assert "b ('4.50' has no exact number value)" in result.output
    assert contacts(bench)["a"]["custom_attributes"]["num"] == 42


def test_rename_under_the_rate_limit_honours_429(sandbox_factory: Any, tmp_path: Path) -> None:
    """The sandbox answers 429 past 10 requests a second (a bucket of 10), announcing no
    window (with one, botctl spreads its requests over it and meets no 429); botctl, unpaced,
    backs off as told and still moves every value. The limit is low enough that 8 requests
    in flight over loopback pass it however loaded the machine (at 60 a second, a loaded
    machine's botctl sometimes never did, and met no 429 to honour)."""
    server = sandbox_factory(rate_limit=10, rate_limit_headers=False)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    seed(bench, carriers=60)
    bench.write("support.yaml", bot_yaml(attributes=RENAMED))
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "60 moved, 0 already right, 0 in conflict, 0 failed" in result.stdout
    assert any(r["status"] == 429 for r in bench.requests())
    assert all(
        c["custom_attributes"]["tier"] == c["custom_attributes"]["plan"]
        for c in contacts(bench).values()
    )
