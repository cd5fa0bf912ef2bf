"""Benchmark (not a test): the CPU the pure planning step costs on a large configuration.

    uv run python bench/bench_plan_cpu.py                   # 500 chatbots x 20 attributes
    uv run python bench/bench_plan_cpu.py --bots 50 --runs 3

The scenario of the redesign's target: every attribute relabelled and every chatbot's
settings changed (a list setting among them, so item-level detail is computed too), all
verified against a live view. Prints the CPU time of ``compute_plan`` (median of --runs, with
the cycle collector paused as the pipeline does) and, for scale, of loading the same
configuration from YAML.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from botctl.models import Desired, Live, LiveBot, State
from botctl.pipeline.workspace import Workspace, collector_paused, load
from botctl.reconcile.diff import compute_plan
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import ChatbotSettings

sys.path.insert(0, str(Path(__file__).parent))
from bench_reconcile import write_config


def dashboard_view(desired: Desired) -> Live:
    """What the service holds: other labels, another name and greeting on every chatbot."""
    return Live(
        bots={
            bot.chatbot_id: LiveBot(
                chatbot_id=bot.chatbot_id,
                settings=ChatbotSettings(
                    name="Renamed in the dashboard",
                    model=bot.settings.model,
                    temp=bot.settings.temp,
                    initialMessages=("Hello", "Old greeting"),
                ),
                attributes={
                    a.name: CustomAttribute(name=a.name, type=a.type, label=f"Old {a.label}")
                    for a in bot.attributes
                },
            )
            for bot in desired.bots
        }
    )


def cpu(work: object) -> float:
    started = time.process_time()
    work()  # type: ignore[operator]
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=500)
    parser.add_argument("--attributes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="botctl-bench-cpu-") as tmp:
        write_config(Path(tmp), args.bots, args.attributes, 1, greeting=True)
        ws = Workspace(paths=[Path(tmp)], environ={})
        loads = [cpu(lambda: load(ws)) for _ in range(args.runs)]
        desired = load(ws)
    live = dashboard_view(desired)
    timings = []
    for _ in range(args.runs):
        with collector_paused():
            timings.append(cpu(lambda: compute_plan(desired, live, State())))
    plan = compute_plan(desired, live, State())
    changes = list(plan.changes())
    detailed = sum(1 for _, change in changes if change.detail)
    print(
        f"{args.bots} chatbots x {args.attributes} attributes: {len(changes)} changes "
        f"({detailed} with item-level detail) in {len(plan.operations)} requests"
    )
    print(
        f"compute_plan CPU: median {statistics.median(timings):.3f} s "
        f"({min(timings):.3f}-{max(timings):.3f} s over {args.runs} runs)"
    )
    print(f"loading and validating the YAML, for scale: median {statistics.median(loads):.3f} s")


if __name__ == "__main__":
    main()
