"""Benchmark (not a test): `botctl plan` against a bare HTTP client doing the same reads.

    uv run python bench/bench_plan_vs_bare.py                 # 100 chatbots x 10 attributes
    uv run python bench/bench_plan_vs_bare.py --runs 9

The sandbox runs in its own process with 20 ms added latency. Each round times, back to back
in the same process: botctl's whole plan (load and validate the YAML, read the state, connect,
read, compute the plan) and a bare keep-alive ``httpx.AsyncClient`` sending the same reads (the
chatbot list, then every chatbot's attribute list) at the same parallelism. Rounds alternate
which goes first; the report is the median of the per-round ratios. The ratio is botctl's
overhead over the reads any client must make.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

from botctl.cli.console import run_async
from botctl.defaults import DEFAULT_PARALLELISM
from botctl.pipeline.flows import make_plan
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace
from botctl.service.options import ServiceOptions

sys.path.insert(0, str(Path(__file__).parent))
from bench_reconcile import sandbox_process, write_config

KEY = "bench-key"


async def bare_reads(api_url: str, chatbot_ids: list[str], parallelism: int) -> float:
    started = time.perf_counter()
    limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=api_url, headers=headers, limits=limits) as client:
        gate = asyncio.Semaphore(parallelism)
        (await client.get("/get-chatbots")).raise_for_status()

        async def read(chatbot_id: str) -> None:
            async with gate:
                (await client.get(f"/chatbots/{chatbot_id}/custom-attributes")).raise_for_status()

        await asyncio.gather(*(read(c) for c in chatbot_ids))
    return time.perf_counter() - started


def botctl_plan(ws: Workspace) -> float:
    started = time.perf_counter()
    plan = run_async(make_plan(ws))
    elapsed = time.perf_counter() - started
    assert plan.empty, "the benchmark's world should already match its configuration"
    return elapsed


def seed(url: str, bots: int, attributes: int) -> list[str]:
    ids = [f"bench-{i:04d}" for i in range(bots)]
    with httpx.Client(base_url=f"{url}/_sandbox", timeout=30) as admin:
        for i, chatbot_id in enumerate(ids):
            body = {
                "id": chatbot_id,
                "account": KEY,
                "settings": {
                    "name": f"Bench bot {i}",
                    "model": "gpt-5-mini",
                    "visibility": "public",
                    "temp": 0.3,
                },
                "attributes": [
                    {"name": f"attr_{j:02d}", "type": "text", "label": f"Attribute {j}"}
                    for j in range(attributes)
                ],
            }
            admin.post("/chatbots", json=body).raise_for_status()
    return ids


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=100)
    parser.add_argument("--attributes", type=int, default=10)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    sandbox_args = argparse.Namespace(latency_ms=args.latency_ms, server_rate=0)
    with (
        tempfile.TemporaryDirectory(prefix="botctl-bench-bare-") as tmp,
        sandbox_process(Path(tmp), sandbox_args, [KEY]) as url,
    ):
        work = Path(tmp)
        ids = seed(url, args.bots, args.attributes)
        write_config(work / "config", args.bots, args.attributes, 1)
        ws = Workspace(
            paths=[work / "config"],
            environ={"BENCH_KEY_0": KEY},
            state_path=work / "state.json",
            service=ServiceOptions(api_url=f"{url}/api/v1"),
        )
        api_url = f"{url}/api/v1"
        run_async(apply_unattended(ws))  # the steady state of a pull request's plan
        botctl_plan(ws)  # warm both paths once (imports, the sandbox's caches)
        asyncio.run(bare_reads(api_url, ids, DEFAULT_PARALLELISM))
        ratios, plans, bares = [], [], []
        for run in range(args.runs):
            if run % 2:
                bare = asyncio.run(bare_reads(api_url, ids, DEFAULT_PARALLELISM))
                plan = botctl_plan(ws)
            else:
                plan = botctl_plan(ws)
                bare = asyncio.run(bare_reads(api_url, ids, DEFAULT_PARALLELISM))
            plans.append(plan)
            bares.append(bare)
            ratios.append(plan / bare)
    print(
        f"{args.bots} chatbots x {args.attributes} attributes, {args.latency_ms} ms added "
        f"latency, parallelism {DEFAULT_PARALLELISM}, {args.runs} rounds"
    )
    print(f"botctl plan: median {statistics.median(plans):.3f} s")
    print(f"bare client, same reads: median {statistics.median(bares):.3f} s")
    print(f"ratio: median {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f})")


if __name__ == "__main__":
    main()
