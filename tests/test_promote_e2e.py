"""`botctl promote` end to end: the real CLI against the sandbox over loopback HTTP. It refuses,
sending nothing, what was never staged: an empty stage, a stage promoted onto itself, a
production chatbot with no (or no single) staging counterpart."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.e2e_support import Bench

POLICY = "Follow the refund policy: refunds take 5 days."

DEFAULTS = f"""
apiVersion: botctl/v1
kind: Defaults
metadata: {{name: support}}
spec:
  selector: {{matchLabels: {{app: support}}}}
  settings:
    instructions: {json.dumps(POLICY)}
---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {{name: refund-answer}}
spec:
  selector: {{matchExpressions: [{{key: stage, operator: Exists}}]}}
  conversation:
    - {{role: user, content: How long does a refund take?, expect: {{contains: 5 days}}}}
"""


def chatbot(name: str, chatbot_id: str, **labels: str) -> str:
    shown = ", ".join(f"{k}: {v}" for k, v in labels.items())
    return (
        f"---\napiVersion: botctl/v1\nkind: Chatbot\n"
        f"metadata: {{name: {name}, labels: {{{shown}}}}}\n"
        f"spec: {{chatbotId: {chatbot_id}, settings: {{name: {name}}}}}\n"
    )


SUPPORT = chatbot("support-staging", "bot-s", app="support", stage="staging") + chatbot(
    "support", "bot-p", app="support", stage="production"
)
SALES = chatbot("sales", "bot-sales", app="sales", stage="production")


@pytest.fixture
def bench(sandbox: Any, tmp_path: Any) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    for chatbot_id in ("bot-s", "bot-s2", "bot-p", "bot-sales"):
        bench.create_bot(chatbot_id, settings={"name": "New"})
        bench.admin(
            "PUT",
            f"/chatbots/{chatbot_id}/replies",
            {"replies": [{"pattern": "refund", "answer": "Refunds take 5 days."}]},
        )
    return bench


def stage(bench: Bench, *bots: str) -> None:
    """The configuration (``bots``' documents), its staging chatbots applied and tested."""
    bench.write("bots.yaml", DEFAULTS + "".join(bots))
    staged = bench.run(
        "apply", "-l", "stage=staging", "--test", "--auto-approve", str(bench.config_dir)
    )
    assert staged.exit_code == 0, staged.output
    bench.clear_log()


def promote(bench: Bench, source: str, target: str, *more: str) -> Any:
    return bench.run(
        "promote",
        str(bench.config_dir),
        "--from",
        source,
        "--to",
        target,
        "--auto-approve",
        "--state",
        str(bench.state_path),
        *more,
    )


def refused(bench: Bench, result: Any) -> str:
    """The refusal's output, once sure it is one: exit 1, nothing sent but reads."""
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "Nothing was applied." in result.output
    assert bench.writes() == []
    for chatbot_id in ("bot-p", "bot-sales"):
        assert bench.bot_state(chatbot_id)["settings"]["name"] == "New"
    return str(result.output)


def test_a_misspelt_from_stage_is_refused(bench: Bench) -> None:
    stage(bench, SUPPORT)
    output = refused(bench, promote(bench, "stage=stagign", "stage=production"))
    assert "--from stage=stagign matches no chatbot" in output
    assert "values of 'stage': production, staging" in output
    assert "did you mean stage=staging?" in output


def test_a_from_key_no_chatbot_has_is_refused(bench: Bench) -> None:
    stage(bench, SUPPORT)
    output = refused(bench, promote(bench, "env=staging", "stage=production"))
    assert "--from env=staging matches no chatbot" in output
    assert "no chatbot has the label 'env'" in output


def test_an_empty_to_stage_is_refused(bench: Bench) -> None:
    stage(bench, SUPPORT)
    output = refused(bench, promote(bench, "stage=staging", "stage=prod"))
    assert "--to stage=prod matches no chatbot: nothing to promote" in output
    assert "values of 'stage': production, staging" in output


def test_a_stage_promoted_onto_itself_is_refused(bench: Bench) -> None:
    stage(bench, SUPPORT)
    output = refused(bench, promote(bench, "stage in (staging,production)", "stage=production"))
    assert "support (bot-p) is selected by both --from and --to" in output


def test_selectors_that_do_not_tell_stages_apart_are_refused(bench: Bench) -> None:
    stage(bench, SUPPORT, SALES)
    output = refused(bench, promote(bench, "stage=staging", "app=sales"))
    assert "no label key tells the stages apart" in output
    assert "selected by both" not in output


def test_a_production_chatbot_never_staged_is_refused(bench: Bench) -> None:
    stage(bench, SUPPORT, SALES)
    output = refused(bench, promote(bench, "stage=staging", "stage=production"))
    assert (
        "sales (bot-sales): no chatbot of --from stage=staging has its labels apart from "
        "'stage' (app=sales): nothing of it was tested" in output
    )
    assert "--exclude sales" in output
    assert "support (bot-p)" not in output  # paired, and its counterpart passed


def test_every_problem_is_reported_at_once(bench: Bench) -> None:
    bench.write("bots.yaml", DEFAULTS + SUPPORT + SALES)  # staging never applied
    output = refused(bench, promote(bench, "stage=staging", "stage=production"))
    assert "sales (bot-sales): no chatbot of --from stage=staging" in output
    assert "support-staging (bot-s): no `apply --test` is recorded for it" in output


def test_two_counterparts_are_refused(bench: Bench) -> None:
    twin = chatbot("support-staging-2", "bot-s2", app="support", stage="staging")
    stage(bench, SUPPORT, twin)
    output = refused(bench, promote(bench, "stage=staging", "stage=production"))
    assert (
        "support (bot-p): 2 chatbots of --from stage=staging have its labels apart from "
        "'stage' (app=support): support-staging, support-staging-2; promote needs exactly one"
    ) in output


def test_exclude_leaves_an_unstaged_chatbot_out(bench: Bench) -> None:
    stage(bench, SUPPORT, SALES)
    result = promote(bench, "stage=staging", "stage=production", "--exclude", "sales")
    assert result.exit_code == 0, result.output
    assert "support <- support-staging" in result.output
    assert bench.bot_state("bot-p")["settings"]["instructions"] == POLICY
    assert bench.bot_state("bot-sales")["settings"]["name"] == "New"  # left out
    assert bench.writes()
    assert all("bot-sales" not in json.dumps(w) for w in bench.writes())


def test_target_narrows_the_stage_promoted_to(bench: Bench) -> None:
    stage(bench, SUPPORT, SALES)
    result = promote(bench, "stage=staging", "stage=production", "--target", "support")
    assert result.exit_code == 0, result.output
    assert bench.bot_state("bot-p")["settings"]["instructions"] == POLICY
    assert bench.writes()
    assert all("bot-sales" not in json.dumps(w) for w in bench.writes())


def test_a_shared_filter_keeps_apps_apart(bench: Bench) -> None:
    """``app`` named alike on both sides is not a stage key: each app pairs with its own."""
    sales_staging = chatbot("sales-staging", "bot-s2", app="sales", stage="staging")
    stage(bench, SUPPORT, SALES, sales_staging)
    both = "app in (support,sales),stage="
    result = promote(bench, both + "staging", both + "production")
    assert result.exit_code == 0, result.output
    assert "support <- support-staging" in result.output
    assert "sales <- sales-staging" in result.output
    assert bench.bot_state("bot-sales")["settings"]["name"] == "sales"


def test_part_of_a_stage_is_promoted_with_a_requirement_on_both_sides(bench: Bench) -> None:
    """Every chatbot of --from must pass, --exclude notwithstanding; the same requirement on
    both selectors narrows both stages (and is no stage key)."""
    bench.admin(
        "PUT", "/chatbots/bot-s2/replies", {"replies": [{"pattern": "refund", "answer": "No."}]}
    )
    sales_staging = chatbot("sales-staging", "bot-s2", app="sales", stage="staging")
    bench.write("bots.yaml", DEFAULTS + SUPPORT + SALES + sales_staging)
    config = str(bench.config_dir)
    staged = bench.run("apply", "-l", "stage=staging", "--test", "--auto-approve", config)
    assert staged.exit_code == 3, staged.output
    bench.clear_log()

    whole = refused(bench, promote(bench, "stage=staging", "stage=production"))
    assert "sales-staging (bot-s2): its tests failed at revision sha256:" in whole
    assert "support-staging" not in whole
    excluded = promote(bench, "stage=staging", "stage=production", "--exclude", "sales")
    assert "sales-staging (bot-s2): its tests failed" in refused(bench, excluded)

    part = promote(bench, "app=support,stage=staging", "app=support,stage=production")
    assert part.exit_code == 0, part.output
    assert "app=support,stage=production: support <- support-staging" in part.output
    assert bench.bot_state("bot-p")["settings"]["instructions"] == POLICY
    assert bench.bot_state("bot-sales")["settings"]["name"] == "New"


def test_help_says_how_stages_pair(bench: Bench) -> None:
    shown = bench.run("promote", "--help")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    assert "the one chatbot of --from whose labels are the same apart from the stage keys" in text
    assert "Promote only the chatbots of --to whose metadata.name matches" in text
    assert "leave it out with --exclude NAME" in text


def test_a_test_failed_while_promote_waited_for_the_lock_holds_it(bench: Bench) -> None:
    """promote checks readiness, then its apply waits for the state's lock (another run, CI or
    the agent, holds it); that run records meanwhile that staging's test failed. Once the lock
    is free, promote checks again on the state as it holds it: not ready any more, nothing
    sent to production, exit 1."""
    import subprocess

    from botctl.store.lock import StateLock
    from tests import launch
    from tests.e2e_support import KEY

    stage(bench, SUPPORT)
    env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url}
    argv = ["promote", str(bench.config_dir), "--from", "stage=staging", "--to"]
    argv += ["stage=production", "--auto-approve", "--state", str(bench.state_path)]
    with StateLock(bench.state_path, command="a test holding the lock"):
        child = launch.start(
            *argv,
            "--lock-timeout",
            "60",
            env=env,
            stdout=subprocess.PIPE,  # a few lines: the pipe never fills
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stderr is not None
        said = ""
        while "run this revision and passed its tests" not in said:  # the first check passed
            line = child.stderr.readline()
            assert line, said  # promote ended before its apply waited for the lock
            said += line
        document = json.loads(bench.state_path.read_text())
        document["rollout"]["bot-s"]["tests_passed"] = False  # the other run's record
        bench.state_path.write_text(json.dumps(document))
    out, rest = child.communicate(timeout=60)
    said += out + rest
    assert child.returncode == 1, said
    assert "not ready to promote any more" in said
    assert "support-staging (bot-s): its tests failed at revision sha256:" in said
    assert "Nothing was applied." in said
    assert "Traceback" not in said
    assert bench.writes() == []
    assert bench.bot_state("bot-p")["settings"]["name"] == "New"
