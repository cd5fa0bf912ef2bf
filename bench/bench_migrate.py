"""Benchmark (not a test): contacts migrated per second by a rename (`renamedFrom`), against
the sandbox in its own process over loopback HTTP, at 20 ms of added latency, in two regimes.

    uv run python bench/bench_migrate.py                   # 12,000 contacts, both regimes
    uv run python bench/bench_migrate.py --contacts 3000   # a quick run

A rename of an attribute that N contacts carry a value for needs, at the least: the contact
list read twice (the copy pass and the verifying read: 2 x ceil(N / 1000) pages), N contact
updates, one create and one archive. For each regime it prints the wall time of the apply,
the requests botctl sent, contacts migrated per second, and the lower bound: those requests
spread over the client's concurrency (2 x --parallelism contact updates in flight) at the
latency, or over the service's rate limit per key, whichever is slower.

- latency-bound: no rate limit;
- rate-bound: the sandbox limits the contact and attribute operations to --server-rate per
  second per key (429 beyond), and botctl paces itself just under it (--client-rate).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from botctl.cli.console import run_async
from botctl.pipeline.reconciler import apply_unattended
from botctl.pipeline.workspace import Workspace
from botctl.service.options import ServiceOptions
from botctl.service.pacing import RequestStats
from sandbox_server import sandbox_server

KEY = "bench-key"
CONFIG = """apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: crm
spec:
  chatbotId: crm
  customAttributes:
    - {name: tier, type: text, label: Tier, renamedFrom: plan}
"""


def sandbox_process(
    work: Path, latency_ms: int, rate: float
) -> contextlib.AbstractContextManager[str]:
    return sandbox_server(work, latency_ms, ["--rate-limit", str(rate), "--api-key", KEY])


def run_regime(name: str, args: argparse.Namespace, server_rate: float, client_rate: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with sandbox_process(work, args.latency_ms, server_rate) as url:
            generate = {"count": args.contacts, "custom_attributes": {"plan": "pro-{i}"}}
            bot = {"id": "crm", "attributes": [{"name": "plan", "type": "text"}]}
            httpx.post(f"{url}/_sandbox/chatbots", json=bot, timeout=60).raise_for_status()
            httpx.patch(
                f"{url}/_sandbox/chatbots/crm", json={"generate_contacts": generate}, timeout=300
            ).raise_for_status()
            (work / "config").mkdir()
            (work / "config" / "crm.yaml").write_text(CONFIG, encoding="utf-8")
            stats = RequestStats()
            ws = Workspace(
                paths=[work / "config"],
                environ={"BOTCTL_API_KEY": KEY},
                state_path=work / "state.json",
                service=ServiceOptions(
                    api_url=f"{url}/api/v1", rate_limit=client_rate, stats=stats
                ),
                parallelism=args.parallelism,
            )
            started = time.perf_counter()
            outcome = run_async(apply_unattended(ws))
            seconds = time.perf_counter() - started
            assert outcome is not None
            assert outcome.report.ok, outcome.report
            state = httpx.get(f"{url}/_sandbox/state", timeout=300).json()
            contacts = state["chatbots"][0]["contacts"]
            moved = sum(1 for c in contacts if c["custom_attributes"].get("tier"))
            assert moved == args.contacts, moved
            floor = bare_updates(f"{url}/api/v1", contacts, max(4, 2 * args.parallelism))
    pages = math.ceil(args.contacts / 1000)
    # Counting in the plan (1 pass), the copy pass, the verifying read; the chatbot list and
    # attribute list reads (twice: plan and read-back); the create, the updates, the archive.
    reads, writes = 3 * pages + 4, args.contacts + 2
    in_flight = max(4, 2 * args.parallelism)
    latency = args.latency_ms / 1000
    by_latency = writes * latency / in_flight + reads * latency
    limited = 3 * pages + 2 + writes  # the rate-limited operations: contacts and attributes
    by_rate = limited / server_rate if server_rate else 0.0
    bound = max(by_latency, by_rate)
    sent = sum(stats.requests.values())
    print(
        f"{name:14} {args.contacts:,} contacts in {seconds:6.2f} s = "
        f"{args.contacts / seconds:7.1f} contacts/s; requests {sent:,} "
        f"(min {reads + writes:,}, {stats.retries} retries); lower bound {bound:6.2f} s "
        f"({args.contacts / bound:7.1f}/s); x bound {seconds / bound:.2f}; a bare client's "
        f"{args.contacts:,} updates alone: {floor:.2f} s ({args.contacts / floor:.1f}/s)"
    )


def bare_updates(api_url: str, contacts: list[dict[str, Any]], in_flight: int) -> float:
    """The floor here: a bare httpx client sending only the contact updates (the same bodies)
    at the same concurrency against the same sandbox process."""

    async def run() -> float:
        headers = {"Authorization": f"Bearer {KEY}"}
        gate = asyncio.Semaphore(in_flight)
        async with httpx.AsyncClient(base_url=api_url, headers=headers, timeout=60) as client:

            async def one(contact: dict[str, Any]) -> None:
                body = {"data": {"custom_attributes": contact["custom_attributes"]}}
                async with gate:
                    path = f"/chatbots/crm/contacts/{contact['external_id']}"
                    while (await client.patch(path, json=body)).status_code == 429:
                        await asyncio.sleep(0.05)

            started = time.perf_counter()
            await asyncio.gather(*(one(c) for c in contacts))
            return time.perf_counter() - started

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--contacts", type=int, default=12_000)
    parser.add_argument("--latency-ms", type=int, default=20)
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--server-rate", type=float, default=100.0)
    parser.add_argument("--client-rate", type=float, default=98.0)
    args = parser.parse_args()
    run_regime("latency-bound", args, 0.0, 0.0)
    run_regime("rate-bound", args, args.server_rate, args.client_rate)


if __name__ == "__main__":
    main()
