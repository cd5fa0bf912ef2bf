"""A fleet under the service's rate limit, end to end: the real CLI against the sandbox with
its per-key limit (10 requests/s on the attribute operations), over HTTP on 127.0.0.1. A
sample of the "done when" fleet (500 x 20 is bench/bench_scope.py's): no request fails, a
handful of 429s at most, and the run says how many and how long it waited. Speed is the
benchmark's to measure, never asserted here."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import KEY, Bench, bot_yaml

BOTS = 30
ATTRIBUTES = [{"name": f"attr_{n:02d}", "type": "text", "label": f"A{n}"} for n in range(20)]


def fleet(sandbox_factory: Any, tmp_path: Path, *, headers: bool) -> Bench:
    server = sandbox_factory(rate_limit=10, rate_limit_headers=headers)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    declared = "\n".join(
        f"- name: {a['name']}\n  type: text\n  label: {a['label']}" for a in ATTRIBUTES
    )
    for i in range(BOTS):
        bench.create_bot(f"bot-{i}", attributes=ATTRIBUTES)
        bench.write(
            f"bot-{i}.yaml",
            bot_yaml(name=f"bot-{i}", chatbot_id=f"bot-{i}", settings="", attributes=declared),
        )
    return bench


def refused(bench: Bench) -> int:
    return sum(1 for r in bench.requests() if r["status"] == 429)


@pytest.mark.parametrize("headers", [True, False], ids=["window-announced", "429s-only"])
def test_a_full_plan_stays_under_the_limit_and_says_what_it_waited(
    sandbox_factory: Any, tmp_path: Path, headers: bool
) -> None:
    bench = fleet(sandbox_factory, tmp_path, headers=headers)
    result = bench.run("plan", "--format", "json", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    log = bench.requests()
    assert sum(1 for r in log if r["status"] == 200) == BOTS + 1  # every read answered
    assert all(r["status"] in (200, 429) for r in log)
    count = refused(bench)
    if headers:
        # Spread over the announced window; an answer that arrives late (a loaded machine)
        # may leave one request to bounce off it.
        assert count <= 3
    else:
        # The first refusal finds the 8 workers in flight; then the pace learned is shared.
        assert count <= 10
    said = re.search(r"Requests: (\d+) sent, (\d+) failed, (\d+) answered 429", result.stderr)
    assert said is not None, result.stderr
    assert said.groups() == (str(len(log)), "0", str(count))
    assert "waited on the rate limit: " in result.stderr
    assert "s ($BOTCTL_API_KEY)" in result.stderr


def test_an_exhausted_window_is_told_as_it_is_waited(sandbox_factory: Any, tmp_path: Path) -> None:
    bench = fleet(sandbox_factory, tmp_path, headers=True)
    fault = {"path": "/api/v1/chatbots/bot-3/custom-attributes", "status": 429, "retry_after": 2}
    bench.admin("POST", "/faults", fault)
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert re.search(r"waiting 2\.\d s on the rate limit of \$BOTCTL_API_KEY", result.stderr)


def test_no_limit_met_says_nothing(sandbox: Any, tmp_path: Path) -> None:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot("bot-0")
    bench.write("bot-0.yaml", bot_yaml(name="bot-0", chatbot_id="bot-0"))
    result = bench.run("plan", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "Requests:" not in result.stderr
    assert "rate limit" not in result.stderr
    assert KEY  # the sandbox's default account
