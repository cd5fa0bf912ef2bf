"""Benchmark (not a test): ``botctl agent`` against the sandbox (its own process, 20 ms added
latency) with a git source in a bare repository.

    uv run python bench/bench_agent.py                  # 200 chatbots, 9 pushes, 30 idle cycles
    uv run python bench/bench_agent.py --bots 50 --pushes 3 --idle-cycles 10   # quick

1. Push-to-applied latency of a one-chatbot change: commit, push, POST the signed webhook,
   and time until ``/status`` says the new commit is applied (the interval is an hour, so
   only the webhook can have triggered it). Median and range over ``--pushes``.
2. Idle cost: cycles with nothing to do (``--interval 1s``): the agent process's CPU seconds
   per cycle (from /proc, its own and its children's, so git counts) and the requests each
   sends (the sandbox's log); CPU per hour at the default 60 s interval follows.
3. Takeover: two agents (``--lease 10s``, ``--interval 1s``); the active one is SIGKILLed, and
   the time until the standby reports itself active is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import hmac
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))
from tests.agent.support import AgentProcess, GitRemote

from sandbox_server import sandbox_server

KEY = "bench-key"
SECRET = "bench-hook-secret"


def sandbox_process(work: Path, latency_ms: int) -> contextlib.AbstractContextManager[str]:
    return sandbox_server(work, latency_ms, ["--api-key", f"{KEY}:unlimited"])


def bot(n: int, temp: float) -> str:
    return (
        "apiVersion: botctl/v1\nkind: Chatbot\n"
        f"metadata:\n  name: bot-{n:03d}\nspec:\n  chatbotId: bot-{n:03d}\n"
        f"  settings:\n    name: Bot {n}\n    model: gpt-4o-mini\n    temp: {temp}\n"
        "  customAttributes:\n    - {name: tier, type: text, label: Tier}\n"
    )


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    utime, stime, cutime, cstime = (int(fields[i]) for i in (11, 12, 13, 14))
    return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")


def applied(commit: str) -> Callable[[dict[str, Any]], bool]:
    return lambda doc: bool(doc["appliedRevision"] == commit)


def signed(body: bytes) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": "push"}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bots", type=int, default=200)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--pushes", type=int, default=9)
    parser.add_argument("--idle-cycles", type=int, default=30)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp, sandbox_process(Path(tmp), args.latency_ms) as url:
        work = Path(tmp)
        admin = httpx.Client(base_url=f"{url}/_sandbox", timeout=30)
        for n in range(args.bots):
            admin.post("/chatbots", json={"id": f"bot-{n:03d}", "account": KEY}).raise_for_status()
        remote = GitRemote(work / "git")
        first = remote.push({f"bots/bot-{n:03d}.yaml": bot(n, 0.2) for n in range(args.bots)})
        env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": f"{url}/api/v1", "HOOK": SECRET}
        hook = ["--webhook-secret-env", "HOOK"]
        common = ["--state", str(work / "state.json"), "--cache-dir", str(work / "cache")]

        # 1. Push-to-applied.
        agent = AgentProcess(
            [remote.source("bots"), *common, "--auto-apply", "--interval", "1h", *hook],
            env,
            work,
        )
        try:
            started = time.monotonic()
            agent.wait_for(lambda d: d["appliedRevision"] == first, 600, "first sync")
            print(f"first sync of {args.bots} chatbots: {time.monotonic() - started:.2f} s")
            latencies = []
            body = b'{"ref": "refs/heads/main"}'
            for i in range(args.pushes):
                n = i % args.bots
                commit = remote.push({f"bots/bot-{n:03d}.yaml": bot(n, 0.3 + i / 100)})
                pushed = time.monotonic()
                assert agent.hook(body, signed(body)).status_code == 202
                agent.wait_for(applied(commit), 120, "applied")
                latencies.append(time.monotonic() - pushed)
        finally:
            agent.stop(signal.SIGTERM)  # releases the lease for the next run
        print(
            f"push-to-applied, one chatbot of {args.bots} ({args.latency_ms} ms latency): "
            f"median {statistics.median(latencies):.2f} s of {len(latencies)} "
            f"({min(latencies):.2f}-{max(latencies):.2f})"
        )

        # 2. Idle cost.
        agent = AgentProcess([remote.source("bots"), *common, "--interval", "1s"], env, work)
        try:
            agent.wait_for(lambda d: len(d["cycles"]) >= 2, 600, "settled")
            admin.delete("/requests").raise_for_status()
            cycles0 = len(agent.status()["cycles"])
            done0 = int(agent.status()["cycles"][0]["number"])
            cpu0 = cpu_seconds(agent.proc.pid)
            agent.wait_for(
                lambda d: int(d["cycles"][0]["number"]) >= done0 + args.idle_cycles,
                args.idle_cycles * 30,
                "idle cycles",
            )
            done = int(agent.status()["cycles"][0]["number"]) - done0
            cpu = cpu_seconds(agent.proc.pid) - cpu0
            requests = len(admin.get("/requests").json()["requests"])
            results = {c["result"] for c in agent.status()["cycles"]}
        finally:
            agent.kill()
        assert cycles0 > 0

        # 3. Takeover after SIGKILL.
        ha = [*common, "--interval", "1s", "--lease", "10s"]
        active = AgentProcess([remote.source("bots"), *ha], env, work)
        standby = None
        try:
            active.wait_for(lambda d: d["role"] == "active", 600, "active")
            standby = AgentProcess([remote.source("bots"), *ha], env, work)
            standby.wait_for(lambda d: d["role"] == "standby", 600, "standby")
            active.proc.kill()
            killed = time.monotonic()
            standby.wait_for(lambda d: d["role"] == "active", 600, "takeover")
            takeover = time.monotonic() - killed
        finally:
            active.kill()
            if standby is not None:
                standby.stop(signal.SIGTERM)
        print(f"takeover after SIGKILL of the active agent (lease 10 s): {takeover:.1f} s")
        per_cycle = cpu / done
        print(
            f"idle ({args.bots} chatbots, results {sorted(results)}): {per_cycle * 1000:.0f} ms "
            f"CPU per cycle, {requests / done:.0f} requests per cycle; at the default 60 s "
            f"interval {per_cycle * 60:.1f} s CPU per hour ({per_cycle * 60 / 36:.2f}% of a core)"
        )


if __name__ == "__main__":
    main()
