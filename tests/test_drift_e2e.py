"""Drift and adoption as users live them, end to end: the real CLI against the sandbox over
HTTP on 127.0.0.1. Adopt with export (or hand-written YAML and refresh), then the nightly
drift tells changed outside, pending, conflict, unknown origin and missing apart."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e_support import KEY, Bench, bot_yaml

ACCOUNTS = {"key-a": "KEY_A", "key-b": "KEY_B", "key-c": "KEY_C"}
ENV = {env: key for key, env in ACCOUNTS.items()}


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={KEY: "standard", **dict.fromkeys(ACCOUNTS, "standard")})
    b = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    b.env = dict(ENV)
    return b


def seed_fleet(bench: Bench) -> list[tuple[str, str]]:
    """Three accounts with three chatbots each, set up by hand in the dashboard."""
    made = []
    for n, (key, env) in enumerate(ACCOUNTS.items()):
        for i in range(3):
            chatbot_id = f"{key}-bot-{i}"
            bench.create_bot(
                chatbot_id,
                account=key,
                settings={
                    "name": f"Bot {n}.{i}",
                    "model": "gpt-4o-mini",
                    "visibility": "public",
                    "instructions": f"Help with topic {i}.",
                    "temp": 0.5,
                },
                attributes=[
                    {"name": "tier", "type": "text", "label": "Tier"},
                    {"name": "churn_risk", "type": "number", "label": "Churn risk"},
                    {"name": "legacy", "type": "boolean", "label": "Legacy", "archived": True},
                ],
            )
            made.append((chatbot_id, env))
    return made


def export_all(bench: Bench) -> Path:
    out = bench.workdir / "bots"
    for env in ACCOUNTS.values():
        result = bench.run(
            "export",
            "--all",
            "--api-key-env",
            env,
            "--out",
            str(out / env),
            "--state",
            str(bench.state_path),
        )
        assert result.exit_code == 0, result.output
    return out


def drift_json(bench: Bench, *paths: str, expect: int | None = None) -> dict[str, Any]:
    result = bench.run("drift", "--format", "json", *paths)
    assert expect is None or result.exit_code == expect, result.output
    return dict(json.loads(result.stdout))


def edit_yaml(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, (old, text)
    path.write_text(text.replace(old, new, 1))


def exported_file(out: Path, chatbot_id: str) -> Path:
    return next(p for p in out.rglob("*.yaml") if f"chatbotId: {chatbot_id}" in p.read_text())


def test_export_then_drift_is_clean_for_three_accounts(bench: Bench) -> None:
    seed_fleet(bench)
    out = export_all(bench)
    report = drift_json(bench, str(out), expect=0)
    assert report["drift"] is False
    assert report["summary"]["changed_outside"] == report["summary"]["pending"] == 0
    assert report["summary"]["unknown_origin"] == 0
    # ... and plan agrees: nothing to do.
    assert bench.plan_json(str(out))["changes"] == []
    # A no-op apply keeps it so, and writes nothing to the service.
    bench.clear_log()
    assert bench.run("apply", "--auto-approve", str(out)).exit_code == 0
    assert bench.writes() == []
    assert drift_json(bench, str(out), expect=0)["drift"] is False


def test_each_class_after_export(bench: Bench) -> None:
    seed_fleet(bench)
    out = export_all(bench)
    # A dashboard edit of a readable setting and of an attribute label: changed outside.
    bench.admin(
        "PATCH",
        "/chatbots/key-a-bot-0",
        {
            "settings": {"model": "gpt-5-mini"},
            "attributes": [{"name": "tier", "label": "Plan tier (dashboard)"}],
        },
    )
    # A YAML edit not applied yet: pending.
    edit_yaml(exported_file(out, "key-b-bot-1"), "name: Bot 1.1", "name: Renamed in git")
    # Both moved the same value: conflict.
    edit_yaml(exported_file(out, "key-c-bot-2"), "model: gpt-4o-mini", "model: gpt-5-nano")
    bench.admin("PATCH", "/chatbots/key-c-bot-2", {"settings": {"model": "claude-haiku-4-5"}})

    report = drift_json(bench, str(out), expect=2)
    outside = {(c["chatbotId"], c["key"]): c for c in report["changed_outside"]}
    assert set(outside) == {("key-a-bot-0", "model"), ("key-a-bot-0", "tier")}
    assert outside["key-a-bot-0", "model"]["live"] == "gpt-5-mini"
    assert outside["key-a-bot-0", "model"]["last_applied"] == "gpt-4o-mini"
    assert outside["key-a-bot-0", "model"]["basis"] == "verified"
    assert outside["key-a-bot-0", "tier"]["live"]["label"] == "Plan tier (dashboard)"
    (pending,) = report["pending"]
    assert (pending["chatbotId"], pending["key"], pending["confidence"]) == (
        "key-b-bot-1",
        "name",
        "verified",
    )
    assert (pending["before"], pending["after"]) == ("Bot 1.1", "Renamed in git")  # never null
    (conflict,) = report["conflicts"]
    assert (conflict["chatbotId"], conflict["key"]) == ("key-c-bot-2", "model")
    assert (conflict["last_applied"], conflict["live"], conflict["desired"]) == (
        "gpt-4o-mini",
        "claude-haiku-4-5",
        "gpt-5-nano",
    )
    assert report["unknown_origin"] == []
    assert report["missing"] == []
    # Every verified change of plan appears in drift, with its live value.
    plan = bench.plan_json(str(out))
    verified = {
        (c["chatbotId"], c["key"]) for c in plan["changes"] if c["confidence"] == "verified"
    }
    listed = {
        (c["chatbotId"], c["key"])
        for key in ("changed_outside", "pending", "conflicts")
        for c in report[key]
    }
    assert verified == listed
    text = bench.run("drift", str(out)).stdout
    assert 'model: recorded "gpt-4o-mini" (verified), now "gpt-5-mini"' in text
    assert "Conflicts (the service and the configuration both moved):" in text


def test_hand_written_yaml_is_unknown_origin_until_refresh(bench: Bench) -> None:
    bench.create_bot(
        "bot-1",
        settings={"name": "Support", "model": "gpt-4o-mini"},
        attributes=[{"name": "tier", "type": "text", "label": "Tier"}],
    )
    bench.write(
        "bot.yaml",
        bot_yaml(
            settings="name: Support\nmodel: gpt-4o-mini",
            attributes="- {name: tier, type: text, label: Tier}",
        ),
    )
    cfg = str(bench.config_dir)
    # In sync but never recorded: nothing to report as drift.
    assert drift_json(bench, cfg, expect=0)["drift"] is False
    # The dashboard moves a value: with no record, nobody can tell who moved.
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
    report = drift_json(bench, cfg, expect=2)
    (unknown,) = report["unknown_origin"]
    assert (unknown["key"], unknown["live"], unknown["desired"]) == (
        "model",
        "gpt-5-mini",
        "gpt-4o-mini",
    )
    # Put back by hand, then refresh records the baseline: the next edit is changed outside.
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-4o-mini"}})
    bench.clear_log()
    refreshed = bench.run("refresh", "--state", str(bench.state_path), cfg)
    assert refreshed.exit_code == 0, refreshed.output
    assert "2 setting value(s) and 1 attribute(s) verified" in refreshed.stdout
    assert bench.writes() == []  # read-only on the service
    state = json.loads(bench.state_path.read_text())
    record = state["bots"]["bot-1"]
    assert record["verified_settings"] == ["model", "name"]
    assert record["verified_attributes"] == ["tier"]
    assert drift_json(bench, cfg, expect=0)["drift"] is False
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-mini"}})
    assert [c["key"] for c in drift_json(bench, cfg, expect=2)["changed_outside"]] == ["model"]


def test_refresh_takes_the_lock(bench: Bench) -> None:
    from botctl.store.lock import StateLock

    bench.create_bot("bot-1", settings={"name": "Support Bot"})
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot"))
    with StateLock(bench.state_path):
        result = bench.run("refresh", "--state", str(bench.state_path), str(bench.config_dir))
    assert result.exit_code == 1
    assert "is locked by pid" in result.stderr


def test_a_deleted_chatbot_is_missing_and_the_others_still_checked(bench: Bench) -> None:
    seed_fleet(bench)
    out = export_all(bench)
    bench.admin("PATCH", "/chatbots/key-a-bot-2", {"settings": {"name": "Edited"}})
    response = httpx.delete(
        f"{bench.api_url}/delete-chatbot",
        params={"chatbotId": "key-a-bot-1"},
        headers={"Authorization": "Bearer key-a"},
    )
    assert response.status_code == 200, response.text
    report = drift_json(bench, str(out), expect=2)
    assert [m["chatbotId"] for m in report["missing"]] == ["key-a-bot-1"]
    assert [(c["chatbotId"], c["key"]) for c in report["changed_outside"]] == [
        ("key-a-bot-2", "name")
    ]
    # plan: an error for that chatbot (exit 1), the others still planned.
    planned = bench.run("plan", "--format", "json", str(out))
    assert planned.exit_code == 1
    assert "chatbot key-a-bot-1 does not exist in the account of $KEY_A" in planned.stderr
    assert [c["chatbotId"] for c in json.loads(planned.stdout)["changes"]] == ["key-a-bot-2"]
    # apply: nothing without --skip-missing; the others with it (still exit 1).
    bench.clear_log()
    refused = bench.run("apply", "--auto-approve", str(out))
    assert refused.exit_code == 1
    assert "--skip-missing" in refused.stderr
    assert bench.writes() == []
    applied = bench.run("apply", "--auto-approve", "--skip-missing", str(out))
    assert applied.exit_code == 1, applied.output
    assert "Apply complete: 1 applied" in applied.stdout
    assert [w["body"].get("name") for w in bench.writes()] == ["Bot 0.2"]


def test_unmanaged_chatbots_are_listed_not_counted(bench: Bench) -> None:
    bench.create_bot("bot-1", settings={"name": "Support Bot"})
    bench.create_bot("faq-bot", settings={"name": "FAQ"})
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot"))
    report = drift_json(bench, str(bench.config_dir), expect=0)
    assert report["unmanaged_chatbots"] == [
        {"chatbotId": "faq-bot", "name": "FAQ", "apiKeyEnv": "BOTCTL_API_KEY"}
    ]


def test_ignore_attributes_leaves_dashboard_attributes_alone(bench: Bench) -> None:
    bench.create_bot(
        "bot-1",
        settings={"name": "Support Bot"},
        attributes=[
            {"name": "crm_sync_id", "type": "text", "label": "CRM"},
            {"name": "crm_owner", "type": "text", "label": "Owner"},
            {"name": "stray", "type": "text", "label": "Stray"},
        ],
    )
    bench.write(
        "bot.yaml",
        bot_yaml(settings="name: Support Bot", extra="prune: true\nignoreAttributes: ['crm_*']"),
    )
    plan = bench.plan_json(str(bench.config_dir))
    assert [(c["key"], c["action"]) for c in plan["changes"]] == [("stray", "archive")]
    assert plan["unmanaged"] == []
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    attrs = {a["name"]: a["archived"] for a in bench.bot_state("bot-1")["attributes"]}
    assert attrs == {"crm_sync_id": False, "crm_owner": False, "stray": True}
    assert drift_json(bench, str(bench.config_dir), expect=0)["unmanaged"] == []


def test_accept_and_acknowledged_with_expiry(bench: Bench) -> None:
    bench.create_bot(
        "bot-1",
        settings={"name": "Support Bot"},
        attributes=[{"name": "legacy_flag", "type": "boolean", "label": "Legacy"}],
    )
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot"))
    cfg = str(bench.config_dir)
    ack = bench.workdir / "ack.json"
    assert bench.run("drift", cfg).exit_code == 2  # an unmanaged attribute, every night
    accepted = bench.run("drift", cfg, "--accept", str(ack), "--for", "7d")
    assert accepted.exit_code == 0, accepted.output
    entries = json.loads(ack.read_text())["entries"]
    assert [(e["chatbotId"], e["resource"], e["key"]) for e in entries] == [
        ("bot-1", "attribute", "legacy_flag")
    ]
    until = datetime.fromisoformat(entries[0]["until"])
    assert timedelta(days=6, hours=23) < until - datetime.now(UTC) <= timedelta(days=7)
    quiet = bench.run("drift", cfg, "--acknowledged", str(ack))
    assert quiet.exit_code == 0, quiet.output
    assert "1 acknowledged item(s) skipped" in quiet.stdout
    # A different live value is not what was acknowledged: counted again.
    bench.admin("PATCH", "/chatbots/bot-1", {"attributes": [{"name": "legacy_flag", "label": "X"}]})
    assert bench.run("drift", cfg, "--acknowledged", str(ack)).exit_code == 2
    bench.admin(
        "PATCH", "/chatbots/bot-1", {"attributes": [{"name": "legacy_flag", "label": "Legacy"}]}
    )
    # Expired: counted again, and reported as such.
    entries[0]["until"] = (datetime.now(UTC) - timedelta(minutes=1)).isoformat()
    ack.write_text(json.dumps({"entries": entries}))
    expired = bench.run("drift", cfg, "--acknowledged", str(ack))
    assert expired.exit_code == 2
    assert "Acknowledgements expired (counted again):" in expired.stdout
    assert "support: attribute legacy_flag" in expired.stdout


def test_a_nested_object_sent_whole_shows_what_it_removes(bench_with_reads: Any) -> None:
    bench = bench_with_reads("extended")
    bench.create_bot(
        "bot-1",
        settings={"name": "Support Bot", "styles": {"theme": "dark", "buttonColor": "#0a84ff"}},
    )
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot\nstyles: {theme: light}"))
    plan = bench.run("plan", str(bench.config_dir))
    assert '~ settings styles.buttonColor: "#0a84ff" -> (removed)' in plan.stdout
    assert '~ settings styles.theme: "dark" -> "light"' in plan.stdout
    data = bench.plan_json(str(bench.config_dir))
    removed = next(c for c in data["changes"] if c["key"] == "styles.buttonColor")
    assert (removed["before"], removed["after"], removed["confidence"]) == (
        "#0a84ff",
        None,
        "verified",
    )


def test_unreadable_nested_object_warns_once_per_chatbot(bench: Bench) -> None:
    bench.create_bot("bot-1", settings={"name": "Old"})
    bench.write(
        "bot.yaml",
        bot_yaml(
            settings="name: Support Bot\nstyles: {theme: light}\n"
            "collectCustomerInformation: {title: Hi}"
        ),
    )
    data = bench.plan_json(str(bench.config_dir))
    (warning,) = data["warnings"]
    assert warning.startswith(
        "warning[BC302]: support: collectCustomerInformation and styles are sent whole"
    )


def test_reassert_heals_a_write_only_setting_edited_in_the_dashboard(bench: Bench) -> None:
    bench.create_bot("bot-1", settings={"name": "Old"})
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot\ntemp: 0.2"))
    cfg = str(bench.config_dir)
    assert bench.run("apply", "--auto-approve", cfg).exit_code == 0
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"temp": 0.9}})  # invisible to reads
    bench.clear_log()
    plain = bench.run("apply", "--auto-approve", cfg)
    assert plain.exit_code == 0
    assert "No changes" in plain.stdout
    assert bench.writes() == []
    assert bench.bot_state("bot-1")["settings"]["temp"] == 0.9  # left alone
    planned = bench.run("plan", "--reassert", "--detailed-exitcode", cfg)
    assert planned.exit_code == 0, planned.output  # reasserting is not a change
    assert "= reassert settings temp: 0.2" in planned.stdout
    data = json.loads(bench.run("plan", "--reassert", "--format", "json", cfg).stdout)
    assert [(c["key"], c["action"]) for c in data["changes"]] == [("temp", "reassert")]
    healed = bench.run("apply", "--reassert", "--auto-approve", cfg)
    assert healed.exit_code == 0, healed.output
    (write,) = bench.writes()
    assert write["body"] == {"chatbotId": "bot-1", "temp": 0.2}  # one request per chatbot
    assert bench.bot_state("bot-1")["settings"]["temp"] == 0.2


@pytest.fixture
def bench_with_reads(sandbox_factory: Any, tmp_path: Path) -> Any:
    def make(reads: str) -> Bench:
        server = sandbox_factory(api_keys={KEY: "standard"}, reads=reads)
        return Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)

    return make
