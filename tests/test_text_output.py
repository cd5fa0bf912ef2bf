"""Text output in a terminal or any CI log (the real CLI against services over loopback HTTP):
whatever text the service holds (names, labels, instructions, chatbot names and ids, error
messages), no line carries a terminal escape sequence or forms a command a CI runner would
act on. JSON stays exact. The runner is modelled independently (tests/github_runner.py)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import hostile_support
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.github_runner import executed

# What a dashboard user (or a compromised service) could type: terminal escapes (ESC and the
# C1 CSI), a clear-screen, workflow commands on a line of their own (after LF, CR, U+2028 or
# in a multi-line text's context line), Azure's and the legacy runner prefixes.
EVIL = (
    "Evil\x1b[2J\x1b]0;title\x07\x9b31m\n::set-output name=leak::1\r::add-mask::k"
    "\u2028::error::x ##vso[task.setvariable variable=A]1 ##[debug]legacy \u202eLIAF\u2066x"
)
EVIL_LINES = "Hello\n::warning::from a context line\nBye\n"
# Characters a terminal acts on: C0 but tab and newline, DEL, C1; and the bidirectional
# controls, which reorder what is shown (a FAIL read as PASS).
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def assert_inert(output: str) -> None:
    assert executed(output) == [], executed(output)
    assert CONTROLS.search(output) is None, repr(CONTROLS.search(output))


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.create_bot(
        "bot-1",
        settings={"name": EVIL, "instructions": EVIL_LINES},
        attributes=[{"name": "tier", "type": "text", "label": EVIL}],
    )
    b.create_bot("evil::id", settings={"name": EVIL})  # in no document: listed by drift
    b.admin(
        "PATCH", "/chatbots/bot-1", {"off_contract_attributes": [{"name": EVIL, "type": "text"}]}
    )
    return b


def test_plan_apply_and_drift_text_carry_nothing_a_terminal_or_runner_acts_on(
    bench: Bench,
) -> None:
    bench.write(
        "bot.yaml",
        bot_yaml(
            settings="name: Calm\ninstructions: |\n  Hello\n  ::warning::from a context line\n"
            "  Goodbye",
            attributes="- {name: tier, type: text, label: Tier}",
        ),
    )
    plan = bench.run("plan", str(bench.config_dir))
    assert plan.exit_code == 0, plan.output
    assert "::set-output" in plan.stdout  # the text is there, shown, not obeyed
    assert "\\u202eLIAF" in plan.stdout
    assert_inert(plan.output)
    markdown = bench.run("plan", "--format", "markdown", str(bench.config_dir))
    assert "\\u202eLIAF" in markdown.stdout
    assert CONTROLS.search(markdown.stdout) is None, markdown.stdout
    drift = bench.run("drift", str(bench.config_dir))
    assert drift.exit_code == 2, drift.output
    assert "evil%3A:id" not in drift.stdout  # an id mid-line is no command: shown as is
    assert_inert(drift.output)
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    assert_inert(applied.output)


def test_json_stays_exact(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(settings="name: Calm"))
    plan = bench.plan_json(str(bench.config_dir))
    (name,) = [c for c in plan["changes"] if c["key"] == "name"]
    assert name["before"] == EVIL
    assert [u["name"] for u in plan["unmanageable"]] == [EVIL]


@pytest.fixture
def hostile() -> Iterator[hostile_support.HostileServer]:
    with hostile_support.hostile_server() as server:
        yield server


@pytest.mark.parametrize("command", ["plan", "drift", "export"])
def test_errors_quoting_the_service_are_inert(
    hostile: hostile_support.HostileServer,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    command: str,
) -> None:
    monkeypatch.setitem(
        hostile_support.BEHAVIOURS,
        "evil",
        hostile_support.shaped({"message": EVIL}, "400 Bad Request"),
    )
    bench = Bench(url=hostile.root, api_url=hostile.api_url("evil", "list"), workdir=tmp_path)
    bench.write("bot.yaml", bot_yaml(settings="name: Calm"))
    args = ["export", "--all"] if command == "export" else [command, str(bench.config_dir)]
    result = bench.run(*args, env={"BOTCTL_API_KEY": KEY})
    assert result.exit_code == 1, result.output
    assert "set-output" in result.stderr  # the service's words, shown
    assert_inert(result.output)
