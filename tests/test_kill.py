"""An apply killed at any instant (SIGKILL) leaves a valid state file, and a re-run converges
without creating any attribute twice."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from botctl.store.state import load_state
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml

ATTRS = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(6))


def creates(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in log if r["method"] == "POST" and r["path"].endswith("custom-attributes")]


def wait_until_quiet(bench: Bench) -> list[dict[str, Any]]:
    """The request log once the sandbox answered every request in it (bounded)."""
    deadline = time.monotonic() + 60
    while True:
        log = bench.requests()
        if all(r["status"] is not None for r in log):
            return log
        assert time.monotonic() < deadline, "the sandbox never answered"
        time.sleep(0.05)


HOLD_MS = 2000  # the create the kill lands during: in flight this long


def held(log: list[dict[str, Any]], chatbot_id: str) -> dict[str, Any] | None:
    """The create of ``chatbot_id`` the sandbox holds (the fault below), once it arrived."""
    return next(
        (
            r
            for r in creates(log)
            if f"/chatbots/{chatbot_id}/" in r["path"] and r["fault"] == "before"
        ),
        None,
    )


@pytest.mark.parametrize("chatbot", ["bot-0", "bot-2", "bot-3"])
def test_sigkill_mid_apply_then_rerun_converges(
    sandbox_factory: Any, tmp_path: Path, chatbot: str
) -> None:
    """The kill lands where the request log says: while the sandbox holds the first create of
    ``chatbot`` (the first, a middle, the last chatbot of the apply: two at a time)."""
    server = sandbox_factory(latency_ms=25)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for i in range(4):
        bench.create_bot(f"bot-{i}")
        bench.write(f"b{i}.yaml", bot_yaml(f"b{i}", f"bot-{i}", attributes=ATTRS))
    path = f"/api/v1/chatbots/{chatbot}/custom-attributes"
    bench.admin("POST", "/faults", {"method": "POST", "path": path, "latency_ms": HOLD_MS})
    args = ["apply", "--auto-approve", "--parallelism", "2"]
    args += ["--state", str(bench.state_path), str(bench.config_dir)]
    proc = launch.start(
        *args,
        env={"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": server.api_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while held(bench.requests(), chatbot) is None:
        assert proc.poll() is None, "the apply ended before the create was held"
        assert time.monotonic() < deadline, "the held create never arrived"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # Where the kill landed: mid-apply, the held create still unanswered; some creates sent,
    # not all (the chatbot held waits for it; two at a time, so at least one never started).
    at_kill = bench.requests()
    hold = held(at_kill, chatbot)
    assert hold is not None
    assert hold["status"] is None
    assert 0 < len(creates(at_kill)) < 4 * 6
    # A request the dead run sent may still be on its way through the service (the held
    # create): a user's re-run comes later. Wait until the service is quiet.
    settled = len(wait_until_quiet(bench))

    load_state(bench.state_path)  # valid (or absent): never half-written
    # The dead run's lock is taken over by the re-run (its holder no longer runs).
    rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert rerun.exit_code == 0, rerun.output
    assert "its holder no longer runs" in rerun.output
    log = bench.requests()
    # The re-run never sends a create for an attribute that exists (the service would refuse
    # it), and no attribute is created twice.
    assert all(r["status"] == 200 for r in creates(log[settled:])), "a create was repeated"
    made = [(r["path"], r["body"]["name"]) for r in creates(log) if r["status"] == 200]
    assert len(made) == len(set(made)), "an attribute was created twice"
    assert bench.plan_json(str(bench.config_dir))["changes"] == []
    for i in range(4):
        assert len(bench.bot_state(f"bot-{i}")["attributes"]) == 6
