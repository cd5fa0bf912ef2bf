"""A document whose chatbotId the service does not list: one clear error first, never a "No
changes" line, the same in every format; plan, apply and drift through the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.sandbox.server import RunningSandbox
from tests.e2e_support import Bench, bot_yaml

ERROR = "error: ghost: chatbot nope-1 does not exist in the account of $BOTCTL_API_KEY"


@pytest.fixture
def bench(sandbox: RunningSandbox, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.write("ghost.yaml", bot_yaml(name="ghost", chatbot_id="nope-1"))
    return bench


def _with_a_listed_bot(bench: Bench) -> None:
    bench.create_bot("bot-1", settings={"name": "Old"})
    bench.write("support.yaml", bot_yaml(settings="name: Support Bot"))


@pytest.mark.parametrize("fmt", ["text", "markdown", "json", "github"])
def test_plan_of_only_a_missing_chatbot_says_so_first_and_never_no_changes(
    bench: Bench, fmt: str
) -> None:
    result = bench.run("plan", "--format", fmt, str(bench.config_dir))
    assert result.exit_code == 1
    assert "No changes" not in result.output
    assert "matches the configuration" not in result.output
    if fmt == "github":
        # The error as an annotation, before the folded report.
        first = result.stdout.splitlines()[0]
        assert first.startswith("::error title=botctl plan::ghost: chatbot nope-1 does not")
        assert result.stdout.count("does not exist in the account") == 1
        return
    # The error is the first thing said (stderr before stdout), and said once.
    assert result.output.lstrip().startswith(ERROR), result.output
    assert result.output.count("does not exist in the account") == 1
    if fmt == "json":
        document = json.loads(result.stdout)
        assert document["missing"] == [{"chatbotId": "nope-1", "bot": "ghost"}]
        assert document["summary"]["missing"] == 1
    else:
        assert "1 chatbot(s) missing from the service" in result.stdout
        assert "missing: `ghost` (`nope-1`)" in result.stdout.replace("**", "") or (
            "missing: ghost (nope-1)" in result.stdout
        )


def test_plan_with_others_plans_them_after_the_error(bench: Bench) -> None:
    _with_a_listed_bot(bench)
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 1
    assert result.output.lstrip().startswith(ERROR)
    assert '~ settings name: "Old" -> "Support Bot"' in result.stdout
    assert result.output.count("does not exist in the account") == 1


def test_apply_refuses_with_the_error_alone(bench: Bench) -> None:
    _with_a_listed_bot(bench)
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert result.output.lstrip().startswith(ERROR)
    assert "nothing was applied (--skip-missing applies the others)" in result.stderr
    assert "No changes" not in result.output
    assert result.output.count("does not exist in the account") == 1
    assert bench.writes() == []


def test_apply_of_only_a_missing_chatbot_never_says_no_changes(bench: Bench) -> None:
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1
    assert result.output.lstrip().startswith(ERROR)
    assert "No changes" not in result.output


def test_apply_skip_missing_applies_the_others_and_still_fails(bench: Bench) -> None:
    _with_a_listed_bot(bench)
    result = bench.run("apply", "--auto-approve", "--skip-missing", str(bench.config_dir))
    assert result.exit_code == 1
    assert result.output.lstrip().startswith(ERROR)
    assert result.output.count("does not exist in the account") == 1
    assert "Apply complete: 1 applied" in result.stdout
    assert "1 chatbot(s) missing from the service" in result.stderr.splitlines()[-1]
    assert bench.bot_state("bot-1")["settings"]["name"] == "Support Bot"
    # Only the missing one left: the next apply says nothing of "No changes" either.
    again = bench.run("apply", "--auto-approve", "--skip-missing", str(bench.config_dir))
    assert again.exit_code == 1
    assert "No changes" not in again.output
    assert "Nothing to send to the chatbots the service lists." in again.stdout


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_drift_reports_it_as_missing_never_in_sync(bench: Bench, fmt: str) -> None:
    result = bench.run("drift", "--format", fmt, str(bench.config_dir))
    assert result.exit_code == 2
    assert "No drift" not in result.output
    assert "in sync" not in result.output.lower()
    if fmt == "json":
        document = json.loads(result.stdout)
        assert document["drift"] is True
        assert document["missing"] == [{"chatbotId": "nope-1", "bot": "ghost"}]
    else:
        assert "nope-1" in result.stdout


def test_refresh_says_it_first_and_refreshes_the_others(bench: Bench) -> None:
    _with_a_listed_bot(bench)
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"name": "Support Bot"}})
    result = bench.run("refresh", "--state", str(bench.state_path), str(bench.config_dir))
    assert result.exit_code == 1
    assert result.output.lstrip().startswith(ERROR)
    assert "Fix its chatbotId or remove its document; the others were refreshed." in (result.stderr)
    assert result.output.count("does not exist in the account") == 1
    assert "1 setting value(s) and 0 attribute(s) verified as configured" in result.stdout
