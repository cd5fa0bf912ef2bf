"""Benchmark (not a test): the agent's cost at idle and on a push, under the service's real
limit (issue #25).

    uv run python bench/bench_watch.py                  # 500 chatbots x 20 attributes
    uv run python bench/bench_watch.py --bots 100 --idle 60 --pushes 3   # quick

The sandbox runs in its own process with 20 ms added latency and the real limit emulated:
10 requests/s per key (the service's 100 per 10 s), its window announced (``X-RateLimit-*``).
Every chatbot already holds its 20 attributes. ``botctl agent`` runs from a git source (a
bare repository) with ``--auto-apply`` and the defaults: ``--interval 60s``, ``--watch-budget
20``. Once its first sync is done:

1. idle: for ``--idle`` seconds nothing changes; the requests the sandbox receives (its log)
   per minute, as a share of the key's limit, and the agent's CPU (its own and its git's,
   from /proc) beside the wall time; its resident memory;
2. pushes: ``--pushes`` commits each changing one chatbot's settings, each followed by the
   signed webhook; the time from the webhook to the sandbox receiving the write, and the
   requests it received in between (the reads before the write).

``--agent-rate-limit 10`` states the limit to the agent instead of letting it learn it from
the announced window.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).parents[1]))
from tests.agent.support import AgentProcess, GitRemote

from bench_agent import SECRET, cpu_seconds, signed
from sandbox_server import sandbox_server

KEY = "bench-watch-key"
ATTRIBUTES = [
    {"name": f"attr_{n:02d}", "type": "text", "label": f"Attribute {n}"} for n in range(20)
]


def document(n: int, name: str) -> str:
    attributes = "\n".join(
        f"    - {{name: {a['name']}, type: text, label: {a['label']}}}" for a in ATTRIBUTES
    )
    return (
        "apiVersion: botctl/v1\nkind: Chatbot\n"
        f"metadata:\n  name: bot-{n:04d}\nspec:\n  chatbotId: bot-{n:04d}\n"
        f"  settings:\n    name: {name}\n  customAttributes:\n{attributes}\n"
    )


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


class Sandbox:
    def __init__(self, url: str) -> None:
        self.admin = httpx.Client(base_url=f"{url}/_sandbox", timeout=60)

    def log(self) -> list[dict[str, Any]]:
        return list(self.admin.get("/requests").json()["requests"])

    def clear(self) -> None:
        self.admin.delete("/requests").raise_for_status()


def seed(sandbox: Sandbox, bots: int) -> None:
    for n in range(bots):
        body = {
            "id": f"bot-{n:04d}",
            "account": KEY,
            "settings": {"name": f"Bot {n}"},
            "attributes": ATTRIBUTES,
        }
        sandbox.admin.post("/chatbots", json=body).raise_for_status()


def idle(agent: AgentProcess, sandbox: Sandbox, seconds: float) -> None:
    sandbox.clear()
    cpu0, wall0 = cpu_seconds(agent.proc.pid), time.monotonic()
    time.sleep(seconds)
    cpu, wall = cpu_seconds(agent.proc.pid) - cpu0, time.monotonic() - wall0
    log = sandbox.log()
    minute = len(log) / wall * 60
    refused = sum(1 for r in log if r["status"] == 429)
    watch = agent.status()["watch"]
    key = watch["keys"][0]
    print(
        f"idle {wall:.0f} s: {len(log)} requests ({minute:.1f} a minute, "
        f"{minute / 600:.1%} of the key's 600 a minute), {refused} answered 429; "
        f"CPU {cpu:.2f} s ({cpu / wall:.2%} of a core); RSS {rss_mib(agent.proc.pid):.0f} MiB"
    )
    print(
        f"  watch: limit {key['limitPerSecond']}/s ({key['limitFrom']}), budget "
        f"{key['budgetPerSecond']}/s, slices of {key['sliceSize']} every {key['sliceSeconds']} s,"
        f" the fleet covered every {watch['coverSeconds']} s; oldest read "
        f"{watch['oldestReadSeconds']} s ago"
    )


def push(
    agent: AgentProcess, sandbox: Sandbox, remote: GitRemote, n: int, i: int
) -> tuple[float, int]:
    """Seconds from the webhook to the write, and the requests the sandbox got in between."""
    commit = remote.push({f"bots/bot-{n:04d}.yaml": document(n, f"Pushed {i}")}, f"push {i}")
    body = json.dumps({"ref": "refs/heads/main", "after": commit}).encode()
    sent = time.monotonic()
    assert agent.hook(body, signed(body)).status_code == 202
    # What the sandbox received until now is the watch's (a slice the push preempted).
    mark = max((r["seq"] for r in sandbox.log()), default=0)
    target = f"bot-{n:04d}"
    while True:
        log = [r for r in sandbox.log() if r["seq"] > mark]
        write = next(
            (
                r
                for r in log
                if r["method"] == "POST" and (r["body"] or {}).get("chatbotId") == target
            ),
            None,
        )
        if write is not None:
            latency = time.monotonic() - sent
            # The pass done (its read-back too) before the next push is made.
            agent.wait_for(lambda d: d["appliedRevision"] == commit, 120, "applied")
            return latency, sum(1 for r in log if r["seq"] < write["seq"])
        assert time.monotonic() - sent < 300, "no write"
        time.sleep(0.01)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=500)
    parser.add_argument("--idle", type=float, default=180.0, help="seconds")
    parser.add_argument("--pushes", type=int, default=5)
    parser.add_argument("--rate", type=float, default=10.0)
    parser.add_argument(
        "--agent-rate-limit",
        type=float,
        default=None,
        help="give the agent --rate-limit (the limit stated, not learned from the window)",
    )
    args = parser.parse_args()
    options = ["--api-key", f"{KEY}:unlimited", "--rate-limit", str(args.rate)]
    with tempfile.TemporaryDirectory() as tmp, sandbox_server(Path(tmp), 20, options) as url:
        work = Path(tmp)
        sandbox = Sandbox(url)
        seed(sandbox, args.bots)
        remote = GitRemote(work / "git")
        first = remote.push(
            {f"bots/bot-{n:04d}.yaml": document(n, f"Bot {n}") for n in range(args.bots)}
        )
        env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": f"{url}/api/v1", "HOOK": SECRET}
        env = {**env, "PYTHONDONTWRITEBYTECODE": ""}
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        argv = [
            remote.source("bots"),
            *("--state", str(work / "state.json"), "--cache-dir", str(work / "cache")),
            *("--auto-apply", "--webhook-secret-env", "HOOK"),
        ]
        if args.agent_rate_limit is not None:
            argv += ["--rate-limit", str(args.agent_rate_limit)]
        agent = AgentProcess(argv, env, work)
        try:
            started = time.monotonic()
            agent.wait_for(lambda d: d["appliedRevision"] == first, 1200, "first sync")
            print(
                f"{args.bots} chatbots x {len(ATTRIBUTES)} attributes, {args.rate:g} requests/s "
                f"per key: first sync {time.monotonic() - started:.1f} s"
            )
            idle(agent, sandbox, args.idle)
            results = [
                push(agent, sandbox, remote, (7 + 97 * i) % args.bots, i)
                for i in range(args.pushes)
            ]
        finally:
            agent.stop(signal.SIGTERM)
    latencies = [seconds for seconds, _ in results]
    print(
        f"push -> write, one chatbot of {args.bots}: median {statistics.median(latencies):.2f} s "
        f"of {len(latencies)} ({min(latencies):.2f}-{max(latencies):.2f}); requests before "
        f"the write: {sorted({reads for _, reads in results})}"
    )


if __name__ == "__main__":
    main()
