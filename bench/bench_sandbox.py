"""Is the sandbox ever the bottleneck? Concurrent clients against added latency.

    uv run python bench/bench_sandbox.py [--clients 8] [--requests 50] [--latency-ms 20]

Each client (own thread, own keep-alive connection) alternates a settings write and the
chatbot read. With no queueing every request takes about the added latency, and throughput
approaches clients / latency. Prints p50/p95/max latency and throughput against that ideal.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx

from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.server import run_in_thread


def client_run(api_url: str, requests: int, out: list[float], start: threading.Barrier) -> None:
    headers = {"Authorization": "Bearer bench"}
    with httpx.Client(base_url=api_url, headers=headers, timeout=10) as client:
        client.get("/get-chatbots")  # warm the connection outside the measurement
        start.wait()
        for i in range(requests):
            began = time.perf_counter()
            if i % 2:
                response = client.get("/get-chatbots")
            else:
                body = {"chatbotId": "bench", "name": f"n{i}", "temp": 0.5}
                response = client.post("/update-chatbot-settings", json=body)
            out.append(time.perf_counter() - began)
            assert response.status_code in (200, 202), response.text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=50, help="per client")
    parser.add_argument("--latency-ms", type=int, default=20)
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        config = SandboxConfig(
            db=str(Path(tmp) / "bench.db"),
            api_keys={"bench": "standard"},
            latency_ms=args.latency_ms,
        )
        with run_in_thread(config) as running:
            httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "bench"})
            latencies: list[float] = []
            barrier = threading.Barrier(args.clients + 1)
            threads = [
                threading.Thread(
                    target=client_run, args=(running.api_url, args.requests, latencies, barrier)
                )
                for _ in range(args.clients)
            ]
            for thread in threads:
                thread.start()
            barrier.wait()
            began = time.perf_counter()
            for thread in threads:
                thread.join()
            elapsed = time.perf_counter() - began

    total = args.clients * args.requests
    ms = sorted(x * 1000 for x in latencies)
    p95 = ms[int(0.95 * (len(ms) - 1))]
    ideal = args.clients / (args.latency_ms / 1000) if args.latency_ms else float("inf")
    print(f"{args.clients} clients x {args.requests} requests, added latency {args.latency_ms} ms")
    print(f"latency  p50 {statistics.median(ms):.1f} ms  p95 {p95:.1f} ms  max {ms[-1]:.1f} ms")
    print(
        f"throughput {total / elapsed:.0f} req/s  (ideal {ideal:.0f} req/s, "
        f"{100 * total / elapsed / ideal:.0f}% of ideal)"
    )
    overhead = statistics.median(ms) - args.latency_ms
    print(f"median overhead beyond the added latency: {overhead:.1f} ms")


if __name__ == "__main__":
    main()
