"""Benchmark (not a test): how close to the lower bound can any Python client get here?

    uv run python bench/bench_floor.py                 # 500 attribute reads, as in a plan
    uv run python bench/bench_floor.py --kind create   # 500 attribute creates, as in an apply

Runs the sandbox in its own process exactly as bench_reconcile.py does (20 ms added latency),
then sends only attribute-list reads (or attribute creates) with a bare ``httpx.AsyncClient``
at the same concurrency (8), with no botctl code in the way. Prints its wall time against the
same lower bound, and the round trip of one request on an idle sandbox. Whatever ratio the
bare client gets is the floor for botctl's reads (or writes) on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from bench_reconcile import idle_round_trip, lower_bound, sandbox_process

KEY = "floor-key"
BOTS = 50


async def bare_requests(api_url: str, count: int, parallelism: int, kind: str, run: int) -> float:
    """``count`` attribute reads, or attribute creates (new names each run), 8 at a time."""
    limits = httpx.Limits(max_connections=parallelism, max_keepalive_connections=parallelism)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=api_url, headers=headers, limits=limits) as client:
        gate = asyncio.Semaphore(parallelism)

        async def send(i: int) -> None:
            path = f"/chatbots/floor-{i % BOTS}/custom-attributes"
            async with gate:
                if kind == "create":
                    body = {"name": f"r{run}_{i}", "type": "text", "label": f"A {i}"}
                    response = await client.post(path, json=body)
                else:
                    response = await client.get(path)
                response.raise_for_status()

        # Open the connections first (reads, so that creates stay `count` per run).
        await asyncio.gather(
            *(client.get(f"/chatbots/floor-{i}/custom-attributes") for i in range(parallelism))
        )
        started = time.perf_counter()
        await asyncio.gather(*(send(i) for i in range(count)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument(
        "--kind",
        choices=["read", "create"],
        default="read",
        help="attribute-list reads (as in a plan) or attribute creates (as in an apply)",
    )
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sandbox_args = argparse.Namespace(latency_ms=args.latency_ms, server_rate=0)

    with (
        tempfile.TemporaryDirectory(prefix="botctl-floor-") as tmp,
        sandbox_process(Path(tmp), sandbox_args, [KEY]) as url,
    ):
        with httpx.Client(base_url=url) as admin:
            for i in range(BOTS):
                body = {"id": f"floor-{i}", "account": KEY}
                admin.post("/_sandbox/chatbots", json=body).raise_for_status()
        api_url = f"{url}/api/v1"
        rtt = idle_round_trip(api_url, KEY, "floor-0")
        runs = [
            asyncio.run(bare_requests(api_url, args.requests, args.parallelism, args.kind, run))
            for run in range(args.runs)
        ]
    latency = args.latency_ms / 1000
    bound = lower_bound(args.requests, args.requests, args.parallelism, latency, 0)
    print(
        f"bare httpx, {args.requests} attribute {args.kind}s, {args.parallelism} in flight, "
        f"{args.latency_ms} ms added latency"
    )
    print(f"idle round trip of one request: {rtt * 1000:.1f} ms")
    print(f"lower bound {bound:.2f} s")
    for seconds in runs:
        print(f"  run: {seconds:.2f} s = {seconds / bound:.2f} x bound")


if __name__ == "__main__":
    main()
