"""`--format github` and `--comment-out` end to end: the real CLI against the sandbox over
HTTP, its output read by an independent model of the CI runner. Text from the service and
from the YAML (names, labels, keys) must never form a workflow command of its own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from botctl.render import COMMENT_LIMIT, DRIFT_MARKER, PLAN_MARKER
from tests.e2e_support import Bench, bot_yaml
from tests.github_runner import executed, names

# What a dashboard user (or a compromised service) could type into a name or a label.
EVIL_NAME = "Evil\n::set-output name=leak::1\r::add-mask::k ##vso[task.setvariable variable=A]1"
EVIL_LABEL = "::stop-commands::x\n::error file=x::forged %0A \x1b[2K ##[debug]legacy"
ALLOWED = {"group", "stop-commands", "endgroup", "error", "warning", "notice"}


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.create_bot(
        "bot-1",
        settings={"name": EVIL_NAME},
        attributes=[
            {"name": "plan_tier", "type": "text", "label": EVIL_LABEL},
            {"name": "stray", "type": "text", "label": EVIL_LABEL},
        ],
    )
    return b


ATTRS = '- {name: plan_tier, type: text, label: "Tier \\r::error::from the YAML"}'


def only_our_commands(output: str) -> list[str]:
    found = names(output)
    assert set(found) <= ALLOWED, found
    # Every group closes, and each stop-commands block ended where botctl ended it.
    assert found.count("group") == found.count("endgroup")
    return found


def test_plan_with_hostile_service_text_runs_no_command_of_its_own(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    result = bench.run("plan", "--format", "github", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    found = only_our_commands(result.stdout)
    assert found[:2] == ["group", "stop-commands"]
    assert found[-1] == "notice"
    (summary,) = [c for c in executed(result.stdout) if c.name == "notice"]
    assert summary.data.startswith("Plan: 0 to create, 4 to update")
    # The plan itself is in the log, folded and inert, hostile text and all.
    assert "::set-output name=leak::1" in result.stdout


def test_drift_annotates_each_change_made_outside_botctl(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    assert bench.run("apply", "--auto-approve", str(bench.config_dir)).exit_code == 0
    bench.admin(
        "PATCH",
        "/chatbots/bot-1",
        {
            "settings": {"name": EVIL_NAME},
            "attributes": [{"name": "plan_tier", "label": EVIL_LABEL}],
        },
    )
    comment = bench.workdir / "out" / "drift.md"
    result = bench.run(
        "drift", "--format", "github", "--comment-out", str(comment), str(bench.config_dir)
    )
    assert result.exit_code == 2, result.output
    only_our_commands(result.stdout)
    warnings = [c for c in executed(result.stdout) if c.name == "warning"]
    assert [w.properties["title"] for w in warnings] == [
        "botctl: changed outside botctl",
        "botctl: changed outside botctl",
        "botctl drift",
    ]
    # One annotation per change, holding the hostile text whole, made visible.
    assert "::set-output name=leak::1" in warnings[1].data
    assert "::error file=x::forged %0A \\u001b[2K ##%5Bdebug]legacy" in warnings[0].data
    assert warnings[2].data.startswith("Drift detected: 2 changed outside botctl")
    text = comment.read_text(encoding="utf-8")
    assert text.startswith(f"{DRIFT_MARKER}\n### botctl drift\n")
    assert len(text) <= COMMENT_LIMIT


def test_validation_errors_are_annotated_on_their_file_line_and_column(bench: Bench) -> None:
    path = bench.write(
        "support.yaml",
        bot_yaml(settings='name: ok\n"::set-output name=x::1": 1\ntemp: 3'),
    )
    result = bench.run("validate", "--format", "github", str(bench.config_dir))
    assert result.exit_code == 1
    commands = executed(result.stdout)
    assert [c.name for c in commands] == ["error", "error", "error"]
    key, temp, count = commands
    assert key.properties == {
        "file": str(path),
        "line": "9",
        "col": "5",
        "title": "botctl validate",
    }
    assert key.data.startswith("unknown key '::set-output name=x::1'")
    assert (temp.properties["line"], temp.data) == ("10", "temp: must be at most 1, got 3")
    assert count.data == "2 error(s) in the configuration; nothing was sent."
    assert result.stderr == ""  # nothing in plain text that a runner might read


def test_plan_and_drift_annotate_invalid_configuration_the_same_way(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(settings="temp: 3"))
    for command in ("plan", "drift"):
        result = bench.run(command, "--format", "github", str(bench.config_dir))
        assert result.exit_code == 1
        first = executed(result.stdout)[0]
        assert (first.name, first.properties["line"]) == ("error", "8")
    assert bench.requests() == []  # bad input never reaches the network


def test_valid_configuration_with_warnings(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes="- {name: renewal-date, type: date}"))
    result = bench.run("validate", "--format", "github", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    warning, notice = executed(result.stdout)
    assert warning.name == "warning"
    assert warning.properties["file"].endswith("support.yaml")
    assert notice.data == "Configuration valid: 1 chatbot(s)."


def test_a_service_failure_is_one_error_annotation(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml())
    result = bench.run(
        "plan",
        "--format",
        "github",
        "--api-url",
        "http://127.0.0.1:9/api/v1",
        str(bench.config_dir),
    )
    assert result.exit_code == 1
    (error,) = executed(result.stdout)
    assert error.name == "error"
    assert error.properties["title"] == "botctl plan"


def test_comment_out_writes_the_marked_plan(bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    comment = bench.workdir / "plan.md"
    result = bench.run(
        "plan", "--format", "json", "--comment-out", str(comment), str(bench.config_dir)
    )
    assert result.exit_code == 0, result.output
    text = comment.read_text(encoding="utf-8")
    assert text.startswith(f"{PLAN_MARKER}\n### botctl plan\n\n**Plan: 0 to create, 4 to update")
    assert "<details><summary>Changes (4)</summary>" in text
    refused = bench.run("plan", "--comment-out", str(bench.workdir), str(bench.config_dir))
    assert refused.exit_code == 1
    assert "is a directory" in refused.output
