"""The sandbox as the benchmarks run it: `botctl sandbox serve` in a process of its own, as
users run it, so that it never shares botctl's GIL."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path


@contextlib.contextmanager
def sandbox_server(work: Path, latency_ms: int, options: Sequence[str]) -> Iterator[str]:
    """Its base URL while it runs, on a free loopback port, its database in ``work``;
    ``options``: more of `serve`'s options (``--api-key``, ``--rate-limit``)."""
    command = [sys.executable, "-m", "botctl.sandbox.cli", "serve", "--port", "0"]
    command += ["--db", str(work / "sandbox.db"), "--latency-ms", str(latency_ms), *options]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().split()[2]  # "serving at URL ..."
    finally:
        proc.terminate()
        proc.wait(timeout=10)
