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
    """The request log once it has stopped growing (two reads 0.2 s apart agree)."""
    log = bench.requests()
    while True:
        time.sleep(0.2)
        again = bench.requests()
        if len(again) == len(log):
            return again
        log = again


@pytest.mark.parametrize("kill_after", [0.25, 0.6, 1.0])
def test_sigkill_mid_apply_then_rerun_converges(
    sandbox_factory: Any, tmp_path: Path, kill_after: float
) -> None:
    server = sandbox_factory(latency_ms=25)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for i in range(4):
        bench.create_bot(f"bot-{i}")
        bench.write(f"b{i}.yaml", bot_yaml(f"b{i}", f"bot-{i}", attributes=ATTRS))
    args = ["apply", "--auto-approve", "--parallelism", "2"]
    args += ["--state", str(bench.state_path), str(bench.config_dir)]
    proc = launch.start(
        *args,
        env={"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": server.api_url},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(kill_after)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    # A request the dead run sent may still be on its way through the service (25 ms of
    # latency here): a user's re-run comes later. Wait until the service is quiet.
    settled = len(wait_until_quiet(bench))

    load_state(bench.state_path)  # valid (or absent): never half-written
    # The dead run's lock is broken explicitly, as a user would.
    assert bench.run("unlock", "--state", str(bench.state_path)).exit_code == 0
    rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert rerun.exit_code == 0, rerun.output
    log = bench.requests()
    # The re-run never sends a create for an attribute that exists (the service would refuse
    # it), and no attribute is created twice.
    assert all(r["status"] == 200 for r in creates(log[settled:])), "a create was repeated"
    made = [(r["path"], r["body"]["name"]) for r in creates(log) if r["status"] == 200]
    assert len(made) == len(set(made)), "an attribute was created twice"
    assert bench.plan_json(str(bench.config_dir))["changes"] == []
    for i in range(4):
        assert len(bench.bot_state(f"bot-{i}")["attributes"]) == 6
