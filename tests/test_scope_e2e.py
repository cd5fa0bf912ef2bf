"""``--changed-since REF`` end to end: the real CLI against the sandbox over HTTP on 127.0.0.1,
in a real git repository whose commits the tests make. Each scoping rule through the CLI:
changed, a Defaults change, a label moving a chatbot under a Defaults selector, pending in
the state, removed, a chatbotId change, the project file as it was at REF, composition with
the selection, and the clear errors. Reads follow the scope: counted in the sandbox's log."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import KEY, Bench, bot_yaml

SETTINGS = "name: Bot {i}\nmodel: gpt-5-mini\ntemp: 0.2"
ATTRIBUTES = "- name: tier\n  type: text\n  label: Tier"
DEFAULTS_EU = """\
apiVersion: botctl/v1
kind: Defaults
metadata:
  name: eu
spec:
  selector:
    matchLabels:
      region: eu
  settings:
    visibility: {visibility}
"""


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_SYSTEM": os.devnull,
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.config_dir.mkdir(parents=True)
    git(b.config_dir, "init", "-q", "-b", "main")
    return b


def bot_doc(i: int, *, labels: str = "", settings: str | None = None, **kw: Any) -> str:
    extra = kw.pop("extra", "")
    text = bot_yaml(
        name=f"bot-{i}",
        chatbot_id=kw.pop("chatbot_id", f"bot-{i}"),
        settings=settings if settings is not None else SETTINGS.format(i=i),
        attributes=ATTRIBUTES,
        extra=extra,
    )
    if labels:
        text = text.replace("spec:\n", f"  labels:\n{labels}spec:\n", 1)
    return text


def fleet(bench: Bench, count: int, *, eu: int = 0) -> str:
    """``count`` chatbots on the service and in the configuration (the first ``eu`` labelled
    region=eu, under a Defaults), applied in full and committed: the base of a PR."""
    for i in range(count):
        bench.create_bot(f"bot-{i}")
        labels = "    region: eu\n" if i < eu else ""
        bench.write(f"bot-{i}.yaml", bot_doc(i, labels=labels))
    if eu:
        bench.write("defaults.yaml", DEFAULTS_EU.format(visibility="public"))
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    return commit(bench.config_dir, "base")


def scoped_plan(bench: Bench, ref: str, *args: str, expect: int = 0) -> dict[str, Any]:
    bench.clear_log()
    result = bench.run(
        "plan", "--format", "json", "--changed-since", ref, str(bench.config_dir), *args
    )
    assert result.exit_code == expect, result.output
    return dict(json.loads(result.stdout))


def reads(bench: Bench) -> list[str]:
    return [r["path"] for r in bench.requests() if r["method"] == "GET"]


def scope_of(plan: dict[str, Any]) -> dict[str, list[str]]:
    return {b["bot"]: b["reasons"] for b in plan["scope"]["chatbots"]}


def changed_bots(plan: dict[str, Any]) -> set[str]:
    return {c["bot"] for c in plan["changes"]}


def test_one_chatbot_changed_reads_two_and_plans_only_it(bench: Bench) -> None:
    base = fleet(bench, 6)
    bench.write("bot-3.yaml", bot_doc(3, settings="name: Bot 3\nmodel: gpt-5-mini\ntemp: 0.7"))
    commit(bench.config_dir, "bot-3 warmer")
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {"bot-3": ["changed"]}
    assert plan["scope"]["total"] == 6
    assert plan["scope"]["commit"] == base
    assert [(c["bot"], c["key"], c["after"]) for c in plan["changes"]] == [("bot-3", "temp", 0.7)]
    assert reads(bench) == ["/api/v1/get-chatbots", "/api/v1/chatbots/bot-3/custom-attributes"]
    text = bench.run("plan", "--changed-since", base, str(bench.config_dir)).stdout
    assert f"Scope: 1 of 6 chatbots changed since {base[:12]}" in text
    assert "bot-3 (bot-3): configuration changed" in text
    markdown = bench.run(
        "plan", "--format", "markdown", "--changed-since", "HEAD~1", str(bench.config_dir)
    ).stdout
    assert f"Scope: 1 of 6 chatbots changed since `{base[:12]}` (`HEAD~1`)" in markdown


def test_uncommitted_edits_count_and_nothing_changed_reads_nothing(bench: Bench) -> None:
    fleet(bench, 3)
    plan = scoped_plan(bench, "HEAD")
    assert plan["scope"]["chatbots"] == []
    assert plan["changes"] == []
    assert bench.requests() == []  # no chatbot in scope: no key touched, no read
    bench.write("bot-1.yaml", bot_doc(1, settings="name: Renamed\nmodel: gpt-5-mini\ntemp: 0.2"))
    plan = scoped_plan(bench, "HEAD")  # the working tree against HEAD: not yet committed
    assert scope_of(plan) == {"bot-1": ["changed"]}
    assert changed_bots(plan) == {"bot-1"}


def test_defaults_change_selects_exactly_the_chatbots_it_reaches(bench: Bench) -> None:
    base = fleet(bench, 8, eu=3)
    bench.write("defaults.yaml", DEFAULTS_EU.format(visibility="private"))
    commit(bench.config_dir, "eu private")
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {f"bot-{i}": ["changed"] for i in range(3)}
    assert changed_bots(plan) == {"bot-0", "bot-1", "bot-2"}
    assert len(reads(bench)) == 1 + 3  # the list once, an attribute list per chatbot in scope
    full = bench.plan_json(str(bench.config_dir))
    assert full["changes"] == plan["changes"]


def test_a_label_moves_a_chatbot_under_a_defaults_selector(bench: Bench) -> None:
    base = fleet(bench, 4, eu=1)
    # bot-2 joins the region: the eu Defaults now reach it; nothing else of it changed.
    bench.write("bot-2.yaml", bot_doc(2, labels="    region: eu\n"))
    # bot-3 gets a label no Defaults select: its resolved configuration still differs.
    bench.write("bot-3.yaml", bot_doc(3, labels="    team: sales\n"))
    commit(bench.config_dir, "labels")
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {"bot-2": ["changed"], "bot-3": ["changed"]}
    assert [(c["bot"], c["key"]) for c in plan["changes"]] == [("bot-2", "visibility")]


def test_a_chatbot_left_pending_by_an_earlier_apply_stays_in_scope(bench: Bench) -> None:
    fleet(bench, 4)
    bench.write("bot-0.yaml", bot_doc(0, settings="name: Bot 0\nmodel: gpt-5-mini\ntemp: 0.5"))
    bench.write("bot-1.yaml", bot_doc(1, settings="name: Bot 1\nmodel: gpt-5-mini\ntemp: 0.5"))
    merged = commit(bench.config_dir, "two changes")
    # The apply on merge reached only bot-0 (as if it was interrupted before bot-1).
    result = bench.run(
        "apply", "--auto-approve", "--changed-since", "HEAD~1", "--target", "bot-0",
        str(bench.config_dir),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    bench.write("bot-2.yaml", bot_doc(2, settings="name: Bot 2\nmodel: gpt-5-mini\ntemp: 0.9"))
    commit(bench.config_dir, "next change")
    plan = scoped_plan(bench, merged)
    assert scope_of(plan) == {"bot-1": ["pending"], "bot-2": ["changed"]}
    assert {(c["bot"], c["after"]) for c in plan["changes"]} == {("bot-1", 0.5), ("bot-2", 0.9)}


def test_without_a_state_every_chatbot_is_in_scope(bench: Bench) -> None:
    base = fleet(bench, 3)
    bench.state_path.unlink()
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {f"bot-{i}": ["unrecorded"] for i in range(3)}


def test_a_removed_document_is_listed_and_nothing_is_planned_for_it(bench: Bench) -> None:
    base = fleet(bench, 3)
    (bench.config_dir / "bot-2.yaml").unlink()
    commit(bench.config_dir, "retire bot-2")
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {"bot-2": ["removed"]}
    assert plan["scope"]["planned"] == 0
    assert plan["scope"]["removed"] == 1
    assert plan["changes"] == []
    assert bench.requests() == []
    text = bench.run("plan", "--changed-since", base, str(bench.config_dir)).stdout
    assert "Scope: 0 of 2 chatbots changed since" in text
    assert "1 removed" in text


def test_a_renamed_file_with_the_same_chatbot_is_no_change(bench: Bench) -> None:
    base = fleet(bench, 3)
    git(bench.config_dir, "mv", "bot-1.yaml", "renamed.yaml")
    commit(bench.config_dir, "rename")
    plan = scoped_plan(bench, base)
    assert plan["scope"]["chatbots"] == []
    assert bench.requests() == []


def test_a_chatbot_id_change_is_a_removal_and_an_addition(bench: Bench) -> None:
    base = fleet(bench, 3)
    bench.create_bot("bot-1-new")
    bench.write("bot-1.yaml", bot_doc(1, chatbot_id="bot-1-new"))
    commit(bench.config_dir, "bot-1 moves")
    plan = scoped_plan(bench, base)
    reasons = {(b["chatbotId"], tuple(b["reasons"])) for b in plan["scope"]["chatbots"]}
    assert reasons == {
        ("bot-1-new", ("added", "chatbot-id-changed")),
        ("bot-1", ("removed", "chatbot-id-changed")),
    }
    assert {c["chatbotId"] for c in plan["changes"]} == {"bot-1-new"}
    assert reads(bench) == [
        "/api/v1/get-chatbots",
        "/api/v1/chatbots/bot-1-new/custom-attributes",
    ]


def test_composes_with_target_selector_and_exclude(bench: Bench) -> None:
    base = fleet(bench, 5, eu=2)
    for i in (0, 1, 3, 4):
        labels = "    region: eu\n" if i < 2 else ""
        settings = f"name: Bot {i}\nmodel: gpt-5-mini\ntemp: 0.6"
        bench.write(f"bot-{i}.yaml", bot_doc(i, labels=labels, settings=settings))
    commit(bench.config_dir, "four changes")
    assert set(scope_of(scoped_plan(bench, base, "--target", "bot-[0-3]"))) == {
        "bot-0",
        "bot-1",
        "bot-3",
    }
    assert set(scope_of(scoped_plan(bench, base, "-l", "region=eu"))) == {"bot-0", "bot-1"}
    plan = scoped_plan(bench, base, "--exclude", "bot-0")
    assert set(scope_of(plan)) == {"bot-1", "bot-3", "bot-4"}
    assert plan["scope"]["total"] == 4


def test_the_project_file_as_it_was_at_ref(bench: Bench) -> None:
    root = bench.config_dir
    (root / "bots").mkdir()
    for i in range(3):
        bench.create_bot(f"bot-{i}")
        (root / "bots" / f"bot-{i}.yaml").write_text(bot_doc(i))
    project = root / "botctl.yaml"
    project.write_text("apiVersion: botctl/v1\nkind: Project\npaths: [bots]\n")
    assert bench.run("apply", "--auto-approve", "--config", str(project)).exit_code == 0
    base = commit(root, "base")
    # The directory is renamed and the project file follows: the same chatbots.
    git(root, "mv", "bots", "chatbots")
    project.write_text("apiVersion: botctl/v1\nkind: Project\npaths: [chatbots]\n")
    (root / "chatbots" / "bot-2.yaml").write_text(
        bot_doc(2, settings="name: Bot 2\nmodel: gpt-5-mini\ntemp: 0.4")
    )
    commit(root, "move")
    bench.clear_log()
    result = bench.run(
        "plan", "--format", "json", "--changed-since", base, "--config", str(project)
    )
    assert result.exit_code == 0, result.output
    assert scope_of(json.loads(result.stdout)) == {"bot-2": ["changed"]}


def test_apply_and_drift_follow_the_scope(bench: Bench) -> None:
    base = fleet(bench, 4)
    bench.write("bot-1.yaml", bot_doc(1, settings="name: Bot 1\nmodel: gpt-5-mini\ntemp: 0.8"))
    commit(bench.config_dir, "bot-1")
    bench.admin("PATCH", "/chatbots/bot-3", {"settings": {"name": "Edited by hand"}})
    bench.clear_log()
    result = bench.run("drift", "--format", "json", "--changed-since", base, str(bench.config_dir))
    assert result.exit_code == 2, result.output
    report = json.loads(result.stdout)
    assert scope_of(report) == {"bot-1": ["changed"]}
    assert [p["bot"] for p in report["pending"]] == ["bot-1"]
    assert report["changed_outside"] == []  # bot-3's drift is the nightly full check's
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", "--changed-since", base, str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "Scope: 1 of 4 chatbots changed since" in result.stdout
    assert {w["path"] for w in bench.writes()} == {"/api/v1/update-chatbot-settings"}
    assert [w["body"]["chatbotId"] for w in bench.writes()] == ["bot-1"]
    assert bench.bot_state("bot-1")["settings"]["temp"] == 0.8
    assert scoped_plan(bench, base)["scope"]["chatbots"] == [
        {"chatbotId": "bot-1", "bot": "bot-1", "apiKeyEnv": "BOTCTL_API_KEY",
         "reasons": ["changed"]}
    ]  # fmt: skip


def test_an_unresolvable_ref_is_a_clear_error(bench: Bench) -> None:
    fleet(bench, 2)
    bench.clear_log()
    result = bench.run("plan", "--changed-since", "no-such-branch", str(bench.config_dir))
    assert result.exit_code == 1
    assert "--changed-since no-such-branch: git cannot resolve it" in result.output
    assert "Traceback" not in result.output
    assert bench.requests() == []
    result = bench.run("plan", "--changed-since", "--upload-pack=x", str(bench.config_dir))
    assert result.exit_code == 1
    assert "is not a git revision" in result.output


def test_a_configuration_outside_git_is_a_clear_error(bench: Bench, tmp_path: Path) -> None:
    elsewhere = tmp_path / "loose"
    elsewhere.mkdir()
    bench.create_bot("bot-0")
    (elsewhere / "bot-0.yaml").write_text(bot_doc(0))
    result = bench.run(
        "plan",
        "--changed-since",
        "main",
        str(elsewhere),
        env={"GIT_CEILING_DIRECTORIES": str(tmp_path)},
    )
    assert result.exit_code == 1
    assert "is not in a git repository" in result.output
    assert "Traceback" not in result.output
    assert bench.requests() == []


def test_a_broken_configuration_at_ref_puts_every_chatbot_in_scope(bench: Bench) -> None:
    fleet(bench, 2)
    bench.write("broken.yaml", "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: x}\n")
    broken = commit(bench.config_dir, "broken")
    (bench.config_dir / "broken.yaml").unlink()
    commit(bench.config_dir, "fixed")
    plan = scoped_plan(bench, broken)
    assert scope_of(plan) == {"bot-0": ["base-invalid"], "bot-1": ["base-invalid"]}
    assert any("does not load, so every chatbot is in scope" in w for w in plan["warnings"])


def test_keys_outside_the_scope_are_not_read(bench: Bench, sandbox_factory: Any) -> None:
    server = sandbox_factory(api_keys={KEY: "standard", "other": "standard"})
    b = Bench(url=server.url, api_url=server.api_url, workdir=bench.workdir / "two")
    b.config_dir.mkdir(parents=True)
    git(b.config_dir, "init", "-q", "-b", "main")
    b.env = {"OTHER_KEY": "other"}
    b.create_bot("bot-0")
    b.create_bot("bot-1", account="other")
    b.write("bot-0.yaml", bot_doc(0))
    b.write("bot-1.yaml", bot_doc(1, extra="apiKeyEnv: OTHER_KEY"))
    assert b.run("apply", "--auto-approve", str(b.config_dir)).exit_code == 0
    base = commit(b.config_dir, "base")
    b.write("bot-1.yaml", bot_doc(1, extra="apiKeyEnv: OTHER_KEY", settings="temp: 0.9"))
    b.clear_log()
    result = b.run("plan", "--format", "json", "--changed-since", base, str(b.config_dir))
    assert result.exit_code == 0, result.output
    assert len(reads(b)) == 2  # the other account's list and bot-1's attributes only


def test_a_chatbot_holding_a_secret_is_in_scope_only_when_it_changed(bench: Bench) -> None:
    bench.env = {"PROMPT_TOKEN": "s3cr3t-token-value"}
    bench.create_bot("bot-0")
    bench.create_bot("bot-1")
    secret = "name: Bot 0\nmodel: gpt-5-mini\ninstructions: Use ${secret:PROMPT_TOKEN} well."
    bench.write("bot-0.yaml", bot_doc(0, settings=secret))
    bench.write("bot-1.yaml", bot_doc(1))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    base = commit(bench.config_dir, "base")
    bench.write("bot-1.yaml", bot_doc(1, settings="name: Bot 1\nmodel: gpt-5-mini\ntemp: 0.3"))
    commit(bench.config_dir, "bot-1")
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {"bot-1": ["changed"]}  # its sealed record matches: applied
    # A rotated secret: the same YAML at both revisions, but not what the state recorded.
    bench.env = {"PROMPT_TOKEN": "rotated-token-value"}
    plan = scoped_plan(bench, base)
    assert scope_of(plan) == {"bot-0": ["pending"], "bot-1": ["changed"]}
    assert "rotated-token-value" not in json.dumps(plan)
