"""Benchmark (not a test): how close to the lower bound can any Python client get here?

    uv run python bench/bench_floor.py               # 500 attribute reads, as in a plan
    uv run python bench/bench_floor.py --reads 2000

Runs the sandbox in its own process exactly as bench_reconcile.py does (20 ms added latency),
then sends only attribute-list reads with a bare ``httpx.AsyncClient`` at the same concurrency
(8), with no botctl code in the way. Prints its wall time against the same lower bound, and
the round trip of one request on an idle sandbox. Whatever ratio the bare client gets is the
floor for botctl's read phases on this machine.
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


async def bare_reads(api_url: str, reads: int, parallelism: int) -> float:
    limits = httpx.Limits(max_connections=parallelism, max_keepalive_connections=parallelism)
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(base_url=api_url, headers=headers, limits=limits) as client:
        gate = asyncio.Semaphore(parallelism)

        async def read(i: int) -> None:
            async with gate:
                response = await client.get(f"/chatbots/floor-{i % BOTS}/custom-attributes")
                response.raise_for_status()

        await asyncio.gather(*(read(i) for i in range(parallelism)))  # open the connections
        started = time.perf_counter()
        await asyncio.gather(*(read(i) for i in range(reads)))
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=500)
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
            asyncio.run(bare_reads(api_url, args.reads, args.parallelism)) for _ in range(args.runs)
        ]
    latency = args.latency_ms / 1000
    bound = lower_bound(args.reads, args.reads, args.parallelism, latency, 0)
    print(
        f"bare httpx, {args.reads} attribute reads, {args.parallelism} in flight, "
        f"{args.latency_ms} ms added latency"
    )
    print(f"idle round trip of one request: {rtt * 1000:.1f} ms")
    print(f"lower bound {bound:.2f} s")
    for seconds in runs:
        print(f"  run: {seconds:.2f} s = {seconds / bound:.2f} x bound")


if __name__ == "__main__":
    main()
