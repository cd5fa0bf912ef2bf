"""A service that holds attribute records outside its own contract, and names that differ only
in letter case, end to end (the real CLI against the sandbox over loopback HTTP): plan, drift,
export and apply carry on with everything else, report each such record with the reason in
every format, and never write to it; a case clash is an impossible change, never a create
that fails at apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e_support import Bench, bot_yaml

ODD: list[Any] = [
    {"name": "made in dashboard", "type": "text", "label": "Odd"},
    {"name": "pick", "type": "select", "label": "Pick"},
    {"name": "flag", "type": "boolean", "archived": 0},
]
SETTINGS = "name: Support"  # as held: only attributes move
ATTRS = "- {name: tier, type: text, label: Tier}\n- {name: seats, type: number}"


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.create_bot(
        "bot-1",
        settings={"name": "Support", "model": "gpt-4o-mini"},
        attributes=[{"name": "tier", "type": "text", "label": "Old tier"}],
    )
    b.admin("PATCH", "/chatbots/bot-1", {"off_contract_attributes": ODD})
    return b


def test_plan_and_apply_carry_on_and_never_touch_them(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(settings=SETTINGS, attributes=ATTRS, extra="prune: true"))
    plan = bench.plan_json(str(bench.config_dir))
    assert [(c["key"], c["action"]) for c in plan["changes"] if c["resource"] == "attribute"] == [
        ("seats", "create"),
        ("tier", "update"),
    ]
    assert [(u["bot"], u["name"]) for u in plan["unmanageable"]] == [
        ("support", "flag"),
        ("support", "made in dashboard"),
        ("support", "pick"),
    ]
    reasons = {u["name"]: u["reason"] for u in plan["unmanageable"]}
    assert reasons["pick"] == 'type "select" is not one of text, number, boolean, date'
    assert reasons["flag"] == "archived 0 is not true or false"
    assert plan["summary"]["unmanageable"] == 3

    text = bench.run("plan", str(bench.config_dir))
    assert text.exit_code == 0, text.output
    assert '  ! attribute "pick": type "select" is not one of' in text.stdout
    markdown = bench.run("plan", "--format", "markdown", str(bench.config_dir))
    assert "**unmanageable attribute** of `support`: `pick`" in markdown.stdout

    bench.clear_log()
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    touched = {w["path"].rsplit("/", 1)[-1] for w in bench.writes()}
    assert touched == {"custom-attributes", "tier"}  # the create of seats, the update of tier
    held = [a for a in bench.bot_state("bot-1")["attributes"] if a.get("name") in reasons]
    assert held == ODD  # exactly as they were
    again = bench.run("plan", "--detailed-exitcode", str(bench.config_dir))
    assert again.exit_code == 0, again.output


def test_a_declared_attribute_held_off_contract_is_reported_not_written(bench: Bench) -> None:
    bench.write(
        "bot.yaml",
        bot_yaml(settings=SETTINGS, attributes="- {name: pick, type: text, label: Pick}"),
    )
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "attribute 'pick' is declared, but the service holds it outside the contract's" in (
        result.output
    )
    assert not [w for w in bench.writes() if "pick" in w["path"] or "custom" in w["path"]]


def test_drift_reports_them_and_counts_the_rest(bench: Bench) -> None:
    bench.write(
        "bot.yaml",
        bot_yaml(settings=SETTINGS, attributes="- {name: tier, type: text, label: Old tier}"),
    )
    result = bench.run("drift", "--format", "json", str(bench.config_dir))
    assert result.exit_code == 0, result.output  # no drift: they are not botctl's to fix
    report = json.loads(result.stdout)
    assert sorted(u["name"] for u in report["unmanageable"]) == [
        "flag",
        "made in dashboard",
        "pick",
    ]
    assert report["summary"]["unmanageable"] == 3
    text = bench.run("drift", str(bench.config_dir))
    assert "Unmanageable live attributes" in text.stdout


def test_export_writes_what_validates_and_names_them_in_a_comment(bench: Bench) -> None:
    out = bench.workdir / "bots"
    result = bench.run("export", "bot-1", "--out", str(out))
    assert result.exit_code == 0, result.output
    (path,) = out.glob("*.yaml")
    text = path.read_text()
    assert [a["name"] for a in yaml.safe_load(text)["spec"]["customAttributes"]] == ["tier"]
    assert '#   "pick": type \\"select\\" is not one of text, number, boolean, date' in text
    assert '#   "made in dashboard": name \\"made in dashboard\\" is not' in text
    validated = bench.run("validate", str(out))
    assert validated.exit_code == 0, validated.output


def test_a_name_differing_from_a_live_one_only_in_case_is_planned_as_impossible(
    bench: Bench,
) -> None:
    """`Tier` beside a live `tier` passed validate and failed at apply on every run."""
    bench.write(
        "bot.yaml",
        bot_yaml(settings=SETTINGS, attributes="- {name: Tier, type: text, label: Tier}"),
    )
    assert bench.run("validate", str(bench.config_dir)).exit_code == 0  # no reads: cannot know
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert (
        "attribute 'Tier' is declared, and the service holds 'tier', which differs only in "
        "letter case"
    ) in result.stderr
    assert bench.writes() == []


def test_names_differing_only_in_case_in_one_document_are_a_located_error(bench: Bench) -> None:
    path = bench.write(
        "bot.yaml",
        bot_yaml(
            settings=SETTINGS,
            attributes="- {name: seats, type: number}\n- {name: Seats, type: number}",
        ),
    )
    result = bench.run("validate", str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert (
        f"{path}:11:14: attribute name 'Seats' differs only in letter case from 'seats' "
        "(item 1 of customAttributes)"
    ) in result.stderr
