"""End-to-end: the real CLI against the sandbox over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import KEY, Bench, bot_yaml

ATTRS = """\
- {name: plan_tier, type: text, label: Plan tier, description: Billing plan}
- {name: score, type: number, label: Score}"""


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.create_bot("bot-1", settings={"name": "Old name", "model": "gpt-4o-mini"})
    return b


@pytest.fixture
def bench_with(sandbox_factory: Callable[..., Any], tmp_path: Path) -> Callable[..., Bench]:
    def make(**config: Any) -> Bench:
        server = sandbox_factory(api_keys={KEY: "standard"}, **config)
        b = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
        b.create_bot("bot-1", settings={"name": "Old name", "model": "gpt-4o-mini"})
        return b

    return make


def test_first_apply_then_noop_reapply_sends_no_write(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    first = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert first.exit_code == 0, first.output
    assert "Apply complete: 3 applied, 0 failed" in first.stdout
    live = bench.bot_state("bot-1")
    assert live["settings"]["name"] == "Support Bot"
    assert live["settings"]["temp"] == 0.2
    assert {a["name"] for a in live["attributes"]} == {"plan_tier", "score"}
    writes = bench.writes()
    assert len(writes) == 3
    assert writes[0]["body"] == {
        "chatbotId": "bot-1",
        "name": "Support Bot",
        "model": "gpt-5-mini",
        "temp": 0.2,
    }

    bench.clear_log()
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    assert "No changes" in again.stdout
    assert bench.writes() == []
    assert bench.plan_json(str(bench.config_dir))["changes"] == []


def test_plan_detailed_exitcode_and_formats(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml())
    result = bench.run("plan", "--detailed-exitcode", str(bench.config_dir))
    assert result.exit_code == 2, result.output
    assert '~ settings name: "Old name" -> "Support Bot"  (verified)' in result.stdout
    assert "settings temp: (unknown) -> 0.2  (unknown)" in result.stdout
    md = bench.run("plan", "--format", "markdown", str(bench.config_dir))
    assert md.stdout.startswith("### botctl plan")
    data = bench.plan_json(str(bench.config_dir))
    assert data["format_version"] == 1
    assert {c["key"]: c["confidence"] for c in data["changes"]} == {
        "model": "verified",
        "name": "verified",
        "temp": "unknown",
    }
    assert bench.writes() == []  # plan never writes


@pytest.mark.parametrize(
    ("second", "action", "expected"),
    [
        (
            "- {name: plan_tier, type: text, label: Tier (renamed), description: Billing plan}",
            "update",
            {"label": "Tier (renamed)", "archived": False},
        ),
        (
            "- {name: plan_tier, type: text, label: Plan tier, archived: true}",
            "archive",
            {"label": "Plan tier", "archived": True},
        ),
        ("[]", "archive", {"archived": True}),  # dropped from YAML: botctl created it
    ],
)
def test_attribute_transitions(
    bench: Bench, second: str, action: str, expected: dict[str, Any]
) -> None:
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS.splitlines()[0]))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.write("bot.yaml", bot_yaml(attributes=second) if second != "[]" else bot_yaml())
    plan = bench.plan_json(str(bench.config_dir))
    assert [(c["key"], c["action"]) for c in plan["changes"]] == [("plan_tier", action)]
    bench.clear_log()
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    (write,) = bench.writes()
    assert write["method"] == "PUT"
    assert "archived" in write["body"]  # always explicit
    attr = next(a for a in bench.bot_state("bot-1")["attributes"] if a["name"] == "plan_tier")
    assert {k: attr[k] for k in expected} == expected


def test_unarchive_instead_of_second_create(bench: Bench) -> None:
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {"attributes": [{"name": "plan_tier", "type": "text", "label": "Old", "archived": True}]},
    )
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS.splitlines()[0]))
    plan = bench.plan_json(str(bench.config_dir))
    assert [(c["key"], c["action"]) for c in plan["changes"] if c["resource"] == "attribute"] == [
        ("plan_tier", "unarchive")
    ]
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    assert not any(
        w["method"] == "POST" and "custom-attributes" in w["path"] for w in bench.writes()
    )


def test_type_change_is_refused_before_any_write(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(attributes="- {name: score, type: number, label: Score}"))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.write("bot.yaml", bot_yaml(attributes="- {name: score, type: text, label: Score}"))
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert "cannot change an attribute's type" in result.stderr
    assert "Traceback" not in result.output
    assert bench.writes() == []


def test_drift_after_dashboard_edit(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    clean = bench.run("drift", str(bench.config_dir))
    assert clean.exit_code == 0, clean.output
    assert "No drift" in clean.stdout
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {
            "settings": {"name": "Edited in dashboard"},
            "attributes": [{"name": "score", "label": "S"}],
        },
    )
    bench.clear_log()
    state_before = bench.state_path.read_text()
    result = bench.run("drift", str(bench.config_dir))
    assert result.exit_code == 2, result.output
    assert (
        'settings name: recorded "Support Bot" (verified), now "Edited in dashboard"'
        in result.stdout
    )
    assert "attribute score" in result.stdout
    assert bench.writes() == []  # read-only
    assert bench.state_path.read_text() == state_before  # never writes state
    data = json.loads(bench.run("drift", "--format", "json", str(bench.config_dir)).stdout)
    assert data["summary"]["changed_outside"] == 2


@pytest.mark.parametrize("prune", [False, True])
def test_prune_off_reports_on_archives(bench: Bench, prune: bool) -> None:
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {"attributes": [{"name": "stray", "type": "text", "label": "Stray"}]},
    )
    extra = "prune: true" if prune else ""
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS.splitlines()[0], extra=extra))
    plan = bench.plan_json(str(bench.config_dir))
    archives = [c["key"] for c in plan["changes"] if c["action"] == "archive"]
    unmanaged = [u["name"] for u in plan["unmanaged"]]
    assert (archives, unmanaged) == ((["stray"], []) if prune else ([], ["stray"]))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    stray = next(a for a in bench.bot_state("bot-1")["attributes"] if a["name"] == "stray")
    assert stray["archived"] is prune
    drift = bench.run("drift", str(bench.config_dir))
    assert drift.exit_code == (0 if prune else 2)


def test_readless_service_with_and_without_state(bench_with: Callable[..., Bench]) -> None:
    bench = bench_with(reads="none")  # both reads answer 404, as a wrong URL would
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS))
    refused = bench.run("plan", str(bench.config_dir))
    assert refused.exit_code == 1
    assert f"GET {bench.api_url}/get-chatbots: is --api-url right?" in refused.stderr
    assert "--no-reads" in refused.stderr
    # Declared read-less from here on: no read is sent, the plan says so.
    bench.env["BOTCTL_NO_READS"] = "1"
    bench.clear_log()
    text = bench.run("plan", str(bench.config_dir))
    assert text.exit_code == 0, text.output
    assert "Reads: none (--no-reads)" in text.stdout.splitlines()[1]
    markdown = bench.run("plan", "--format", "markdown", str(bench.config_dir))
    assert "\n> Reads: none (--no-reads)" in markdown.stdout
    plan = bench.plan_json(str(bench.config_dir))
    assert plan["reads"] == "none"
    assert {c["confidence"] for c in plan["changes"]} == {"unknown"}
    first = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert first.exit_code == 0, first.output
    assert {a["name"] for a in bench.bot_state("bot-1")["attributes"]} == {"plan_tier", "score"}
    assert [r["path"] for r in bench.requests() if r["method"] == "GET"] == []
    # With state: converged, nothing sent.
    bench.clear_log()
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    assert bench.writes() == []
    # Without state: everything is unknown again; settings are re-sent, attributes are probed
    # with an update (200) and never created a second time.
    bench.state_path.unlink()
    bench.clear_log()
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    methods = sorted(w["method"] for w in bench.writes())
    assert methods == ["POST", "PUT", "PUT"]  # one settings update, two probes
    assert len(bench.bot_state("bot-1")["attributes"]) == 2


def test_a_saved_plan_is_applied_reading_as_it_was_made(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS))
    cfg, plan_file = str(bench.config_dir), str(bench.workdir / "plan.json")
    # Made from reads: applying it with --no-reads could not check that nothing moved.
    assert bench.run("plan", "--out", plan_file, cfg).exit_code == 0
    refused = bench.run("apply", "--plan", plan_file, "--no-reads")
    assert refused.exit_code == 1
    assert "run it without --no-reads" in refused.stderr
    assert bench.writes() == []
    # Made with --no-reads: applied without any read, no flag needed.
    made = bench.run("plan", "--no-reads", "--out", plan_file, "--format", "json", cfg)
    assert json.loads(made.stdout)["reads"] == "none"
    bench.clear_log()
    applied = bench.run("apply", "--plan", plan_file)
    assert applied.exit_code == 0, applied.output
    assert "Reads: none (--no-reads)" in applied.stdout
    assert [r for r in bench.requests() if r["method"] == "GET"] == []
    # Existence unknown: each attribute is probed with an update (404), then created.
    assert sorted(w["method"] for w in bench.writes()) == ["POST"] * 3 + ["PUT"] * 2
    assert {a["name"] for a in bench.bot_state("bot-1")["attributes"]} == {"plan_tier", "score"}


def test_refresh_needs_reads(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml())
    result = bench.run("refresh", "--no-reads", str(bench.config_dir))
    assert result.exit_code == 1
    assert "refresh records what the service shows: it needs reads" in result.stderr
    assert bench.requests() == []


def test_a_wrong_base_url_is_an_error_not_a_service_without_reads(bench: Bench) -> None:
    """Every path of a wrong base URL answers 404: no plan of creates, but an error naming
    the URL, from every command that reads, and nothing written."""
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS))
    wrong = bench.url + "/not-the-api/api/v1"
    env = {"BOTCTL_API_URL": wrong}
    for args in (
        ("plan", str(bench.config_dir)),
        ("apply", "--auto-approve", str(bench.config_dir)),
        ("drift", str(bench.config_dir)),
        ("export", "--all"),
    ):
        result = bench.run(*args, env=env)
        assert result.exit_code == 1, (args, result.output)
        assert f"GET {wrong}/get-chatbots: is --api-url right?" in result.stderr, args
        assert "Traceback" not in result.output
    assert bench.writes() == []
    assert not bench.state_path.exists()


def test_extended_read_shape_verifies_more(bench_with: Callable[..., Bench]) -> None:
    bench = bench_with(reads="extended")
    bench.write(
        "bot.yaml", bot_yaml(settings="name: Support Bot\ntemp: 0.2\nstyles: {theme: dark}")
    )
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"temp": 0.9}})
    plan = bench.plan_json(str(bench.config_dir))
    assert [(c["key"], c["before"], c["confidence"]) for c in plan["changes"]] == [
        ("temp", 0.9, "verified")
    ]


def test_apply_saved_plan_and_refuse_stale_plan(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(attributes=ATTRS))
    plan_file = bench.workdir / "plan.json"
    made = bench.run("plan", "--out", str(plan_file), str(bench.config_dir))
    assert made.exit_code == 0, made.output
    applied = bench.run("apply", "--plan", str(plan_file))
    assert applied.exit_code == 0, applied.output
    assert bench.bot_state("bot-1")["settings"]["name"] == "Support Bot"
    # A plan of the new state, then the world moves: it is refused, nothing written.
    bench.write("bot.yaml", bot_yaml(settings="name: Support Bot v2"))
    assert bench.run("plan", "--out", str(plan_file), str(bench.config_dir)).exit_code == 0
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"name": "Dashboard"}})
    bench.clear_log()
    stale = bench.run("apply", "--plan", str(plan_file))
    assert stale.exit_code == 1
    assert "service changed since the plan was made" in stale.stderr
    assert "name" in stale.stderr
    assert bench.writes() == []


def test_saved_plan_refused_after_another_apply(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml())
    plan_file = bench.workdir / "plan.json"
    assert bench.run("plan", "--out", str(plan_file), str(bench.config_dir)).exit_code == 0
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    stale = bench.run("apply", "--plan", str(plan_file))
    assert stale.exit_code == 1
    assert "state changed since the plan was made" in stale.stderr


def test_multiple_files_and_accounts(bench: Bench) -> None:
    bench.add_account("sales-key")
    bench.create_bot("bot-2", account="sales-key")
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    bench.write(
        "more/sales.yaml",
        bot_yaml("sales", "bot-2", "name: Sales Bot", extra="apiKeyEnv: SALES_BOT_KEY"),
    )
    result = bench.run(
        "apply", "--auto-approve", str(bench.config_dir), env={"SALES_BOT_KEY": "sales-key"}
    )
    assert result.exit_code == 0, result.output
    assert bench.bot_state("bot-2")["settings"]["name"] == "Sales Bot"
    missing = bench.run("plan", str(bench.config_dir))
    assert missing.exit_code == 1
    assert "$SALES_BOT_KEY (for sales)" in missing.stderr
    # The sales bot is invisible to the support key's account.
    wrong = bench.run("plan", str(bench.config_dir), env={"SALES_BOT_KEY": KEY})
    assert wrong.exit_code == 1
    assert "bot-2 does not exist in the account of $SALES_BOT_KEY" in wrong.stderr


def test_target_limits_the_run(bench: Bench) -> None:
    bench.create_bot("bot-2")
    bench.write("a.yaml", bot_yaml())
    bench.write("b.yaml", bot_yaml("sales", "bot-2", "name: Sales"))
    plan = bench.run("plan", "--format", "json", "--target", "sales", str(bench.config_dir))
    assert {c["bot"] for c in json.loads(plan.stdout)["changes"]} == {"sales"}
    typo = bench.run("plan", "--target", "sale", str(bench.config_dir))
    assert typo.exit_code == 1
    assert "did you mean 'sales'" in typo.stderr


def test_wrong_key_is_a_located_error_without_the_key(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml())
    result = bench.run("plan", str(bench.config_dir), env={"BOTCTL_API_KEY": "wrong-secret-key"})
    assert result.exit_code == 1
    assert "401" in result.stderr
    assert "Unauthorized access" in result.stderr
    assert "wrong-secret-key" not in result.output
    assert "Traceback" not in result.output


def test_unreachable_service(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml())
    result = bench.run(
        "plan", str(bench.config_dir), env={"BOTCTL_API_URL": "http://127.0.0.1:9/api/v1"}
    )
    assert result.exit_code == 1
    assert "Traceback" not in result.output
    assert "read chatbot list" in result.stderr


def test_bad_yaml_never_reaches_the_network(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(settings="name: X\ntemp: 7"))
    bench.clear_log()
    for command in ("validate", "plan", "apply", "drift"):
        args = [command, str(bench.config_dir)]
        if command == "apply":
            args.insert(1, "--auto-approve")
        result = bench.run(*args)
        assert result.exit_code == 1, (command, result.output)
        assert "bot.yaml:" in result.stderr
    assert bench.requests() == []


def test_apply_without_terminal_refuses_changes(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml())
    result = bench.run("apply", str(bench.config_dir))
    assert result.exit_code == 1
    assert "no terminal to confirm on" in result.stderr
    assert "--auto-approve" in result.stderr
    assert bench.writes() == []  # it read, to know whether there was anything to confirm
    assert not bench.state_path.exists()


def test_apply_without_terminal_and_nothing_to_do_succeeds(bench: Bench) -> None:
    """CI runs `botctl apply` on every merge: with nothing to change there is nothing to
    confirm, so no --auto-approve is needed."""
    bench.write("bot.yaml", bot_yaml())
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.clear_log()
    result = bench.run("apply", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "No changes" in result.stdout
    assert bench.writes() == []


def test_locked_state_fails_fast(bench: Bench) -> None:
    from botctl.store.lock import StateLock

    bench.write("bot.yaml", bot_yaml())
    with StateLock(bench.state_path):
        result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert "is locked by pid" in result.stderr
    assert bench.writes() == []


def test_safety_cap_refuses_mass_archive(bench: Bench) -> None:
    many = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(10))
    bench.write("bot.yaml", bot_yaml(attributes=many))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.write("bot.yaml", bot_yaml(attributes="\n".join(many.splitlines()[:6])))
    bench.clear_log()
    refused = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert refused.exit_code == 1
    assert "archives 4 of its 10 active attributes" in refused.stderr
    assert bench.writes() == []
    planned = bench.run("plan", str(bench.config_dir))
    assert planned.exit_code == 1
    forced = bench.run("apply", "--auto-approve", "--force", str(bench.config_dir))
    assert forced.exit_code == 0, forced.output
    assert len(bench.writes()) == 4


def test_unknown_model_opt_out_and_the_services_400(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(settings="name: X\nmodel: gpt-9-turbo"))
    refused = bench.run("plan", str(bench.config_dir))
    assert refused.exit_code == 1
    assert "--allow-unknown-models" in refused.stderr
    result = bench.run("apply", "--auto-approve", "--allow-unknown-models", str(bench.config_dir))
    assert result.exit_code == 1
    warning = next(line for line in result.stdout.splitlines() if ": warning[BC102]: " in line)
    assert "'gpt-9-turbo' is not a known model" in warning
    failed = [line for line in result.stdout.splitlines() if line.startswith("FAILED")]
    assert failed == [
        "FAILED   support: update_settings settings: chatbot bot-1: update settings failed: "
        "HTTP 400: Invalid request data"
    ]
    assert "Apply incomplete: 0 applied, 1 failed, 0 not attempted." in result.stdout


def test_undeclared_label_is_not_managed(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(attributes="- {name: tier, type: text}"))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    created = bench.bot_state("bot-1")["attributes"][0]
    assert created["label"] == "tier"  # a create always sends a label: the name
    bench.admin("PATCH", "/chatbots/bot-1", {"attributes": [{"name": "tier", "label": "Tier"}]})
    drift = bench.run("drift", str(bench.config_dir))
    assert drift.exit_code == 0, drift.output
    assert bench.plan_json(str(bench.config_dir))["changes"] == []
