"""Benchmark (not a test): `botctl plan` of a large fleet against a bare loopback server, so the
figures are botctl's own cost: wall time, CPU time (user + system) and peak memory (max RSS).

    uv run python bench/bench_plan_large.py                          # 5,000 chatbots x 20
    uv run python bench/bench_plan_large.py --bots 1000 --runs 3
    uv run python bench/bench_plan_large.py --bots 1000 --profile /tmp/plan.prof

The server (``bench/bare_server.py``, a process of its own) answers the chatbot list and every
attribute list from answers made at start: no latency, no emulator. The state is recorded
first by `botctl refresh` (every value verified, as after an apply), so the plan reads it as a
pull request's plan does; the world matches the configuration, so the plan is empty. Each run
is the real CLI in a process of its own (its start-up included); the figures are the median of
``--runs``, and the range. For scale, each round also times the reads alone, sent by a bare
keep-alive ``httpx.AsyncClient`` in a process of its own at the same concurrency
(``bench/bare_client.py``): the floor of any client built on httpx on this machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_reconcile import write_config
from botctl.defaults import DEFAULT_PARALLELISM

KEY = "bench-key"
HERE = Path(__file__).parent


@dataclass(frozen=True)
class Run:
    wall: float
    cpu: float  # user + system, of the botctl process
    max_rss_mib: float
    exit_code: int


@contextmanager
def bare_server(bots: int, attributes: int) -> Iterator[str]:
    command = [sys.executable, str(HERE / "bare_server.py"), "--bots", str(bots)]
    command += ["--attributes", str(attributes)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split()[2]
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def botctl(argv: list[str], env: dict[str, str], profile: str | None = None) -> Run:
    """One botctl process, measured by ``wait4``: its own CPU and peak memory."""
    prefix = [sys.executable]
    if profile:
        prefix += ["-m", "cProfile", "-o", profile]
    started = time.perf_counter()
    proc = subprocess.Popen(
        [*prefix, "-m", "botctl", *argv],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = proc.returncode
    if code not in (0, 2) and proc.stderr is not None:
        sys.stderr.write(proc.stderr.read().decode())
    if proc.stderr is not None:
        proc.stderr.close()
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code)


def bare(url: str, bots: int, parallelism: int) -> Run:
    """The bare client in a process of its own, measured as botctl is."""
    started = time.perf_counter()
    command = [sys.executable, str(HERE / "bare_client.py"), url, "--bots", str(bots)]
    command += ["--parallelism", str(parallelism)]
    proc = subprocess.Popen(command)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    return Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, code)


def shown(values: list[float], unit: str, digits: int = 2) -> str:
    return (
        f"{statistics.median(values):.{digits}f} {unit} "
        f"({min(values):.{digits}f}-{max(values):.{digits}f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bots", type=int, default=5000)
    parser.add_argument("--attributes", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", help="write one run's cProfile statistics here")
    parser.add_argument(
        "--parallelism", type=int, default=DEFAULT_PARALLELISM, help="of botctl and the bare client"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="botctl-bench-large-") as tmp:
        work = Path(tmp)
        write_config(work / "config", args.bots, args.attributes, 1)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"BENCH_KEY_0": KEY, "NO_COLOR": "1"}
        with bare_server(args.bots, args.attributes) as url:
            common = [str(work / "config"), "--state", str(work / "state.json")]
            common += ["--api-url", f"{url}/api/v1", "--parallelism", str(args.parallelism)]
            refreshed = botctl(["refresh", *common], env)
            assert refreshed.exit_code == 0, "refresh failed"
            if args.profile:
                botctl(["plan", *common], env, args.profile)
                print(f"profile written to {args.profile}")
                return
            runs, floors = [], []
            for _ in range(args.runs):
                runs.append(botctl(["plan", *common], env))
                floors.append(bare(url, args.bots, args.parallelism))
    assert all(run.exit_code == 0 for run in [*runs, *floors]), [r.exit_code for r in runs]
    print(
        f"botctl plan, {args.bots} chatbots x {args.attributes} attributes, bare loopback "
        f"server, state recorded, --parallelism {args.parallelism}, {args.runs} runs (median, "
        "range):"
    )
    print(f"  wall    {shown([r.wall for r in runs], 's')}")
    print(f"  CPU     {shown([r.cpu for r in runs], 's')}")
    print(f"  max RSS {shown([r.max_rss_mib for r in runs], 'MiB', 0)}")
    print(f"the same reads by a bare httpx client (parallelism {args.parallelism}):")
    print(f"  wall    {shown([r.wall for r in floors], 's')}")
    print(f"  CPU     {shown([r.cpu for r in floors], 's')}")
    print(f"  load average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
