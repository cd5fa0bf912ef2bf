"""The one way tests start botctl as a process of its own: as a user or a CI job runs it, so
that signals, exit codes, a terminal, memory limits and hangs are real.

Every child gets the test environment (``TEST_ENV``): no colour, and the retry policy's
backoff base near zero (``BOTCTL_RETRY_BASE_DELAY``), so a run that retries costs no real
seconds; the backoff's arithmetic is tested with a fake clock (``tests/service``). The same
environment is set for in-process runs by ``tests/conftest.py``.

- ``start``: a ``Popen`` to talk to (signals, a terminal, reading output as it comes);
- ``run``: run to the end, output captured, a timeout that fails the test instead of hanging
  the suite;
- ``run_measured``: as ``run``, plus the child's own peak memory (through a launcher of its
  own: see ``_LAUNCHER``), optionally under an address-space limit.
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from botctl.defaults import RETRY_BASE_DELAY_ENV

TEST_RETRY_BASE_DELAY = "0.001"  # seconds; still jittered and doubled, as in a real run
TEST_ENV = {"NO_COLOR": "1", RETRY_BASE_DELAY_ENV: TEST_RETRY_BASE_DELAY}
GIB = 1 << 30


def environment(extra: Mapping[str, str] | None = None, *, inherit: bool = True) -> dict[str, str]:
    """The child's environment: this process's (or only PATH when ``inherit`` is False), the
    test environment, then ``extra``."""
    base = dict(os.environ) if inherit else {"PATH": os.environ.get("PATH", "")}
    if "XDG_STATE_HOME" in os.environ:  # botctl's memory of states: the session's, never ours
        base.setdefault("XDG_STATE_HOME", os.environ["XDG_STATE_HOME"])
    return {**base, **TEST_ENV, **(extra or {})}


def entry_point() -> Path:
    """The ``botctl`` script installed beside this interpreter (what a shell runs)."""
    return Path(sys.executable).parent / "botctl"


def argv(*args: str, module: str = "botctl", script: bool = False) -> list[str]:
    """``python -m MODULE ARGS``, or the installed script with ``script``."""
    if script:
        return [str(entry_point()), *args]
    return [sys.executable, "-m", module, *args]


def address_space_limit(limit: int) -> Callable[[], None]:
    """A ``preexec_fn``: the child may not map more than ``limit`` bytes (a regression must
    fail the test, not take the machine)."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def start(
    *args: str,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    module: str = "botctl",
    **popen: Any,
) -> subprocess.Popen[Any]:
    """botctl started; ``popen`` as for ``subprocess.Popen`` (streams, ``text``, ``cwd``)."""
    return subprocess.Popen(
        argv(*args, module=module), env=environment(env, inherit=inherit_env), **popen
    )


def run(
    *args: str,
    env: Mapping[str, str] | None = None,
    inherit_env: bool = True,
    timeout: float = 120.0,
    module: str = "botctl",
    script: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[str]:
    """botctl (or its ``module``) run to the end, its output captured as text."""
    return subprocess.run(
        argv(*args, module=module, script=script),
        env=environment(env, inherit=inherit_env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        **options,
    )


@dataclass(frozen=True)
class Run:
    args: tuple[str, ...]
    code: int
    stdout: str
    stderr: str
    max_rss_mb: float  # the child's peak resident memory

    @property
    def output(self) -> str:
        return self.stdout + self.stderr


# The measured child is started by a small launcher of its own (this file's ``_LAUNCHER``),
# never forked from the test process: Linux keeps a process's peak RSS (``ru_maxrss``) across
# ``execve``, so a child forked from a test worker that once held 500 MB reports 500 MB
# whatever it used itself. Forked from the launcher, the child starts from the launcher's
# few megabytes; the launcher waits for it (``wait4``), writes its peak, and ends as it ended.
_LAUNCHER = """
import os, resource, signal, sys
report, limit, *command = sys.argv[1:]
if int(limit):
    resource.setrlimit(resource.RLIMIT_AS, (int(limit), int(limit)))
pid = os.fork()
if pid == 0:
    os.execv(command[0], command)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as out:
    out.write(str(usage.ru_maxrss))
if os.WIFSIGNALED(status):  # ended as the child did (SIGKILL's handler cannot be set)
    if os.WTERMSIG(status) != signal.SIGKILL:
        signal.signal(os.WTERMSIG(status), signal.SIG_DFL)
    os.kill(os.getpid(), os.WTERMSIG(status))
sys.exit(os.waitstatus_to_exitcode(status))
"""


def run_measured(
    args: list[str],
    *,
    env: Mapping[str, str],
    cwd: Path,
    timeout: float = 180.0,
    address_space: int | None = None,
    module: str = "botctl",
) -> Run:
    """botctl run to the end with only PATH and ``env`` of this environment; its own peak RSS
    (see ``_LAUNCHER``), under ``address_space`` bytes if given. Output goes through files in
    ``cwd`` (a pipe could fill and block it); past ``timeout`` the launcher's process group is
    killed."""
    ident = threading.get_ident()
    out, err, peak = (cwd / f".{name}-{ident}" for name in ("stdout", "stderr", "peak"))
    launcher = [sys.executable, "-c", _LAUNCHER, str(peak), str(address_space or 0)]
    with out.open("wb") as stdout, err.open("wb") as stderr:
        child = subprocess.Popen(
            [*launcher, *argv(*args, module=module)],
            env=environment(env, inherit=False),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # the launcher and botctl, killed together on a timeout
        )
        guard = threading.Timer(timeout, os.killpg, (child.pid, signal.SIGKILL))
        guard.start()
        try:
            code = child.wait()
        finally:
            guard.cancel()
    try:
        return Run(
            tuple(args),
            code,
            out.read_text(errors="replace"),
            err.read_text(errors="replace"),
            int(peak.read_text() or 0) / 1024 if peak.exists() else float("nan"),  # KiB
        )
    finally:
        for path in (out, err, peak):
            path.unlink(missing_ok=True)
