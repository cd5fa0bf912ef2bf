"""Benchmark (not a test): how long `botctl --help`, `botctl plan --help`, `botctl validate FILE`
and `botctl plan --no-reads FILE` take, start to end, and what they import.

    uv run python bench/bench_startup.py            # 15 runs each, median and spread
    uv run python bench/bench_startup.py --runs 40
    uv run python bench/bench_startup.py --against /tmp/before/src   # and another tree's

With ``--against SRC`` (a botctl source tree, such as ``git archive main src`` unpacked), each
command is run alternately with this tree and that one, so that a machine whose load moves
affects both alike.

Byte-compiles botctl and its dependencies first and runs with bytecode allowed (some
environments set PYTHONDONTWRITEBYTECODE, which would recompile every module on every start:
not what an installed tool does). Then prints, from `python -X importtime`, the slowest
imports of `validate` and of the plan, and whether what they must not load was loaded
(``tests/test_architecture.py`` pins the same lists). The plan sends nothing (`--no-reads`)
and keeps its state in a temporary directory.
"""

from __future__ import annotations

import argparse
import compileall
import os
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"  # the example fleet: 3 chatbots, a set, a Defaults


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["NO_COLOR"] = "1"
    env.update({"BOTCTL_API_KEY": "k", "SUPPORT_BOT_KEY": "k", "SALES_BOT_KEY": "k"})
    return env


def timed(argv: list[str], runs: int, trees: list[str | None]) -> list[list[float]]:
    """Each run of ``argv`` with each tree in turn (None: this one), times by tree."""
    times: list[list[float]] = [[] for _ in trees]
    for _ in range(runs):
        for i, tree in enumerate(trees):
            env = environment()
            if tree is not None:
                env["PYTHONPATH"] = tree
            started = time.perf_counter()
            subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, check=True)
            times[i].append(time.perf_counter() - started)
    return times


def spread(times: list[float]) -> str:
    return f"median {statistics.median(times):.3f} s ({min(times):.3f}-{max(times):.3f} s)"


def slowest_imports(argv: list[str], count: int) -> tuple[list[tuple[int, str]], set[str]]:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=environment(),
        capture_output=True,
        text=True,
    )
    rows = []
    top_level = set()
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.split("|")
        rows.append((int(cumulative), name))
        top_level.add(name.strip().split(".")[0])
    # importtime indents nested imports: one space after the bar marks an outermost one.
    outermost = [(us, name) for us, name in rows if not name.startswith("  ")]
    return sorted(outermost, reverse=True)[:count], top_level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--against", metavar="SRC", help="another botctl source tree to time")
    args = parser.parse_args()
    trees: list[str | None] = [None] if args.against is None else [None, args.against]
    paths = [ROOT / "src", Path(sysconfig.get_paths()["purelib"])]
    paths += [Path(args.against)] if args.against else []
    for path in paths:
        compileall.compile_dir(path, quiet=1, workers=0)
    botctl = [sys.executable, "-m", "botctl"]
    with tempfile.TemporaryDirectory(prefix="botctl-bench-startup-") as tmp:
        plan = ["plan", "--no-reads", str(EXAMPLES), "--state", f"{tmp}/state.json"]
        plan += ["--api-url", "http://127.0.0.1:9/api/v1"]
        commands = {
            "botctl --help": ["--help"],
            "botctl plan --help": ["plan", "--help"],
            "botctl validate examples": ["validate", str(EXAMPLES)],
            "botctl plan --no-reads examples": plan,
        }
        print(f"{args.runs} runs each; load average {os.getloadavg()[0]:.1f} at the start")
        for label, argv in commands.items():
            times = timed([*botctl, *argv], args.runs, trees)
            line = f"{label}: {spread(times[0])}"
            if args.against:
                line += f"; {args.against}: {spread(times[1])}"
            print(line)
        for label in ("botctl validate examples", "botctl plan --no-reads examples"):
            rows, loaded = slowest_imports(["-m", "botctl", *commands[label]], 8)
            print(f"\nslowest top-level imports of {label} (python -X importtime, cumulative):")
            for microseconds, name in rows:
                print(f"  {microseconds / 1000:6.1f} ms  {name.strip()}")
            unwanted = {"deepdiff", "pygments", "rich", "uvicorn"}
            if "validate" in label:
                unwanted |= {"httpx", "httpcore", "anyio", "asyncio"}
            found = sorted(loaded & unwanted)
            print(f"loaded of {', '.join(sorted(unwanted))}: {', '.join(found) or 'none'}")


if __name__ == "__main__":
    main()
