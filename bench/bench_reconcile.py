"""Benchmark (not a test): plan, first apply and no-op re-apply of many chatbots against the
sandbox over loopback HTTP, with added latency and a rate limit.

    uv run python bench/bench_reconcile.py                 # 500 chatbots x 20 attributes
    uv run python bench/bench_reconcile.py --bots 50       # a quick run

For each phase it prints wall time and requests sent, and compares them with
(a) the lower bound: the fewest requests the phase needs (one chatbot list per key, one
    attribute list per chatbot; one settings write per changed chatbot, one write per changed
    attribute), spread over the allowed parallelism, latency and per-key rate; and
(b) a naive sequential client doing the same requests one at a time (timed on a sample).
It also times the pure planning step for the whole configuration (CPU only).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from botctl.cli.console import run_async
from botctl.models import Live, LiveBot, State
from botctl.pipeline.flows import make_plan
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace, load
from botctl.reconcile.diff import compute_plan
from botctl.resources.settings import ChatbotSettings
from botctl.service.options import ServiceOptions
from botctl.service.pacing import RequestStats
from sandbox_server import sandbox_server


@dataclass
class Phase:
    name: str
    seconds: float  # the median when the phase ran more than once
    reads: int
    writes: int
    min_reads: int
    min_writes: int
    fastest: float | None = None
    slowest: float | None = None


def write_config(
    root: Path, bots: int, attributes: int, keys: int, *, greeting: bool = False
) -> None:
    """``bots`` documents of ``attributes`` attributes each, spread over ``keys`` API keys;
    ``greeting`` adds a list setting (initialMessages) to each."""
    root.mkdir(parents=True, exist_ok=True)
    extra = "    initialMessages: [Hello, How can I help?]\n" if greeting else ""
    for i in range(bots):
        attrs = "\n".join(
            f"    - {{name: attr_{j:02d}, type: text, label: Attribute {j}}}"
            for j in range(attributes)
        )
        (root / f"bot-{i:04d}.yaml").write_text(
            f"""apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: bot-{i:04d}
spec:
  chatbotId: bench-{i:04d}
  apiKeyEnv: BENCH_KEY_{i % keys}
  settings:
    name: Bench bot {i}
    model: gpt-5-mini
    temp: 0.3
    visibility: public
{extra}  customAttributes:
{attrs}
""",
            encoding="utf-8",
        )


class RequestCounter:
    """Counts the requests botctl sends (retries included), from its clients' own statistics."""

    def __init__(self) -> None:
        self.stats = RequestStats()

    def take(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for method, n in self.stats.requests.items():
            counts["read" if method == "GET" else "write"] += n
        if os.environ.get("BENCH_CPU"):
            print(
                f"  waited for the pacer {self.stats.pace_wait:.2f} s in all, "
                f"{self.stats.retries} retries"
            )
        self.stats.requests.clear()
        self.stats.pace_wait = 0.0
        self.stats.retries = 0
        return counts


def sandbox_process(
    work: Path, args: argparse.Namespace, keys: list[str]
) -> contextlib.AbstractContextManager[str]:
    options = ["--rate-limit", str(args.server_rate)]
    for key in keys:
        options += ["--api-key", key]
    return sandbox_server(work, args.latency_ms, options)


def lower_bound(
    requests: int, per_key: int, parallelism: int, latency: float, rate: float
) -> float:
    by_parallelism = requests * latency / parallelism
    by_rate = per_key / rate if rate else 0.0
    return max(by_parallelism, by_rate)


def naive_seconds(api_url: str, key: str, sample: int) -> float:
    """Mean time of one request made the naive way: sequential, a new connection each time.

    One client with no keep-alive rather than ``httpx.get`` per request: that would also
    build a TLS context (~30 ms) per request, which is not the cost being compared."""
    no_reuse = httpx.Limits(max_keepalive_connections=0)
    with httpx.Client(limits=no_reuse, headers={"Authorization": f"Bearer {key}"}) as client:
        client.get(f"{api_url}/get-chatbots")
        started = time.perf_counter()
        for _ in range(sample):
            client.get(f"{api_url}/get-chatbots").raise_for_status()
        return (time.perf_counter() - started) / sample


def idle_round_trip(api_url: str, key: str, chatbot_id: str, samples: int = 50) -> float:
    """Median time of one attribute read at a time on a kept-alive connection: what a
    request costs on this machine when nothing else is in flight (added latency, both
    ends' HTTP stacks, the event loops' timer granularity)."""
    with httpx.Client(base_url=api_url, headers={"Authorization": f"Bearer {key}"}) as client:
        path = f"/chatbots/{chatbot_id}/custom-attributes"
        client.get(path).raise_for_status()
        times = []
        for _ in range(samples):
            started = time.perf_counter()
            client.get(path).raise_for_status()
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    cpu = time.process_time()
    result = run()
    if os.environ.get("BENCH_CPU"):
        elapsed = time.perf_counter() - started
        print(f"  botctl CPU {time.process_time() - cpu:.2f} s of {elapsed:.2f} s wall")
    return result, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=500)
    parser.add_argument("--attributes", type=int, default=20)
    parser.add_argument("--keys", type=int, default=4, help="accounts (API keys)")
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--server-rate", type=float, default=250, help="sandbox limit, req/s/key")
    parser.add_argument("--client-rate", type=float, default=240, help="botctl pace, req/s/key")
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument(
        "--repeat", type=int, default=5, help="runs of each read-only phase (median reported)"
    )
    args = parser.parse_args()

    keys = [f"bench-key-{k}" for k in range(args.keys)]
    environ = {f"BENCH_KEY_{k}": key for k, key in enumerate(keys)}
    with tempfile.TemporaryDirectory(prefix="botctl-bench-") as tmp:
        work = Path(tmp)
        write_config(work / "bots", args.bots, args.attributes, args.keys)
        with sandbox_process(work, args, keys) as url:
            with httpx.Client(base_url=url) as admin:
                for i in range(args.bots):
                    admin.post(
                        "/_sandbox/chatbots",
                        json={"id": f"bench-{i:04d}", "account": keys[i % args.keys]},
                    ).raise_for_status()
            counter = RequestCounter()
            ws = Workspace(
                paths=[work / "bots"],
                environ=environ,
                state_path=work / "state.json",
                service=ServiceOptions(
                    api_url=f"{url}/api/v1", rate_limit=args.client_rate, stats=counter.stats
                ),
                parallelism=args.parallelism,
            )
            phases = run_phases(ws, counter, args)
            per_request = naive_seconds(f"{url}/api/v1", keys[0], 50)
            idle_rtt = idle_round_trip(f"{url}/api/v1", keys[0], "bench-0000")
    report(phases, args, per_request, idle_rtt)
    planning_cpu(ws_desired_size=(args.bots, args.attributes), work=None)


def run_phases(ws: Workspace, counter: RequestCounter, args: argparse.Namespace) -> list[Phase]:
    """Plan and the no-op re-apply change nothing, so they run ``--repeat`` times and report
    the median: on a shared 2-core VM one run of a 2 s phase varies by 10-20 %."""
    reads_min = args.keys + args.bots
    writes_first = args.bots * (1 + args.attributes)

    def apply_once() -> Any:
        return run_async(apply_unattended(ws))

    def no_op_apply() -> None:
        assert apply_once() is None, "re-apply was not a no-op"

    def read_only(name: str, run: Callable[[], Any]) -> Phase:
        times, counts = [], []
        for _ in range(args.repeat):
            _, seconds = timed(run)
            times.append(seconds)
            counts.append(counter.take())
        assert all(c == counts[0] for c in counts), f"{name}: request counts differ between runs"
        return Phase(
            name,
            statistics.median(times),
            counts[0]["read"],
            counts[0]["write"],
            reads_min,
            0,
            min(times),
            max(times),
        )

    phases = [read_only("plan", lambda: run_async(make_plan(ws)))]
    outcome, seconds = timed(apply_once)
    if outcome is None or not outcome.report.ok:
        raise SystemExit("first apply failed")
    n = counter.take()
    # Reads: the plan's, plus reading back the chatbots written to (verification).
    phases.append(Phase("first apply", seconds, n["read"], n["write"], 2 * reads_min, writes_first))
    phases.append(read_only("no-op re-apply", no_op_apply))
    return phases


def report(
    phases: list[Phase], args: argparse.Namespace, per_request: float, idle_rtt: float
) -> None:
    latency = args.latency_ms / 1000
    print(
        f"{args.bots} chatbots x {args.attributes} attributes, {args.keys} keys, latency "
        f"{args.latency_ms} ms, sandbox limit {args.server_rate:g} req/s/key, botctl pace "
        f"{args.client_rate:g} req/s/key, parallelism {args.parallelism}; cores {os.cpu_count()}"
    )
    print(
        f"read-only phases: median of {args.repeat} runs (fastest-slowest); one request on an "
        f"idle sandbox takes {idle_rtt * 1000:.1f} ms"
    )
    print()
    print(
        "| phase | wall s | reads (min) | writes (min) | lower bound s | x bound "
        "| x bound at idle round trip | naive s | x naive |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for p in phases:
        total = p.reads + p.writes
        minimum = p.min_reads + p.min_writes

        def bound(per_request_latency: float, minimum: int = minimum) -> float:
            return lower_bound(
                minimum,
                minimum / args.keys,
                args.parallelism,
                per_request_latency,
                args.server_rate,  # the rate the service allows; botctl's own pace is its cost
            )

        naive = total * per_request
        spread = f" ({p.fastest:.2f}-{p.slowest:.2f})" if p.fastest is not None else ""
        print(
            f"| {p.name} | {p.seconds:.2f}{spread} | {p.reads} ({p.min_reads}) | {p.writes} "
            f"({p.min_writes}) | {bound(latency):.2f} | {p.seconds / bound(latency):.2f} | "
            f"{p.seconds / bound(idle_rtt):.2f} | {naive:.1f} | {p.seconds / naive:.3f} |"
        )


def planning_cpu(ws_desired_size: tuple[int, int], work: Path | None) -> None:
    bots, attributes = ws_desired_size
    with tempfile.TemporaryDirectory(prefix="botctl-bench-cpu-") as tmp:
        write_config(Path(tmp), bots, attributes, 1)
        ws = Workspace(paths=[Path(tmp)], environ={}, state_path=Path(tmp) / "s.json")
        desired, load_s = timed(lambda: load(ws))
        live = Live(
            bots={
                b.chatbot_id: LiveBot(
                    chatbot_id=b.chatbot_id,
                    settings=ChatbotSettings(name="x"),
                    attributes={a.name: a for a in b.attributes},
                )
                for b in desired.bots
            }
        )
        plan, plan_s = timed(lambda: compute_plan(desired, live, State()))
    print()
    print(
        f"Planning CPU: {bots * attributes} attributes, {len(list(plan.changes()))} changes: "
        f"compute_plan {plan_s:.3f} s (loading and validating the YAML: {load_s:.3f} s)"
    )


if __name__ == "__main__":
    main()
