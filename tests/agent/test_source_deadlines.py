"""#24, in the agent's source: a remote that accepts and never answers. The fetch has a
deadline (``--fetch-timeout``): its git process group is killed, the cycle fails naming the
fetch and the time, and backs off; SIGTERM ends the agent whatever git is doing, and no git
process outlives it."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests import launch
from tests.agent.support import AgentProcess
from tests.e2e_support import Bench
from tests.hostile_repository import Attacker


class HungRemote(Attacker):
    """An https git remote that accepts and never says a word (stuck before its TLS
    handshake, as a smart-HTTP endpoint that never replies)."""

    def __init__(self) -> None:
        super().__init__(hold=True)

    @property
    def accepted(self) -> int:
        return len(self.connections)

    @property
    def source(self) -> str:
        return f"git+https://127.0.0.1:{self.port}/acme/bots.git#main:bots"


@pytest.fixture
def remote() -> Any:
    found = HungRemote()
    yield found
    found.close()


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    return Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)


def start(bench: Bench, remote: HungRemote, *argv: str) -> AgentProcess:
    env = {"BOTCTL_API_URL": bench.api_url, "BOTCTL_API_KEY": "test-key"}
    common = ["--state", str(bench.workdir / "state.json"), "--cache-dir", str(bench.workdir)]
    return AgentProcess([remote.source, *common, *argv], env, bench.workdir)


def descendants(pid: int) -> dict[int, str]:
    """The live processes below ``pid`` (pid -> command name), from /proc."""
    children: dict[int, list[int]] = {}
    names: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        if fields[0] == "Z":
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
        names[int(entry.name)] = name
    found: dict[int, str] = {}
    pending = [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found[child] = names[child]
            pending.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def wait_until(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def gits(agent: AgentProcess) -> dict[int, str]:
    return {p: n for p, n in descendants(agent.proc.pid).items() if n.startswith("git")}


def test_a_hung_fetch_is_killed_at_the_fetch_timeout_and_the_cycle_backs_off(
    bench: Bench, remote: HungRemote
) -> None:
    agent = start(bench, remote, "--fetch-timeout", "2s", "--interval", "1h")
    try:
        wait_until(lambda: bool(gits(agent)), 30, "git fetching")
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] >= 1, 30, "the fetch's deadline")
        assert remote.accepted >= 1  # git did connect, and was answered nothing
        error = doc["lastError"]
        assert "git fetch did not finish within 2 s and was stopped" in error, error
        assert "--fetch-timeout 2s" in error
        assert doc["backoffSeconds"] > 0  # backs off like any failure, then tries again
        assert doc["cycles"][0]["result"] == "failed"
        # The whole group went: git, git-remote-https, whatever it started.
        wait_until(lambda: not gits(agent), 10, "no git left")
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] >= 2, 30, "the retry")
        assert "git fetch did not finish" in doc["lastError"]
    finally:
        assert agent.stop(signal.SIGTERM) == 0, agent.log_text()


def test_sigterm_ends_the_agent_while_git_hangs_and_no_git_survives_it(
    bench: Bench, remote: HungRemote
) -> None:
    agent = start(bench, remote, "--fetch-timeout", "30m", "--drain-timeout", "1")
    wait_until(lambda: bool(gits(agent)), 30, "git fetching")
    running = gits(agent)
    started = time.monotonic()
    code = agent.stop(signal.SIGTERM, timeout=30)
    took = time.monotonic() - started
    assert code == 0, agent.log_text()
    assert took < 1 + 10, took  # --drain-timeout plus the grace, on a loaded machine too
    wait_until(lambda: not any(alive(p) for p in running), 10, f"{running} to be gone")
    log = agent.log_text()
    assert "stopped: lease released" in log
    assert "Traceback" not in log


def test_a_state_on_a_hung_git_remote_fails_at_its_deadline(
    remote: HungRemote, tmp_path: Path
) -> None:
    (tmp_path / "bots").mkdir()
    state = remote.source.replace("#main:bots", "#botctl-state:state.json")
    env = {"BOTCTL_GIT_TIMEOUT": "2", "BOTCTL_API_URL": "http://127.0.0.1:9/api/v1"}
    done = launch.run("state", "show", "--state", state, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "git ls-remote did not finish within 2 s and was stopped" in done.stderr


def test_whatever_hangs_the_agent_is_gone_after_the_drain_timeout_and_the_grace(
    bench: Bench, remote: HungRemote, tmp_path: Path
) -> None:
    """The state itself on a hung remote, under a long git deadline: the lease cannot be
    taken nor released. The last resort ends the process anyway, its git groups killed."""
    state = remote.source.replace("#main:bots", "#botctl-state:state.json")
    (tmp_path / "bots").mkdir()
    env = {
        "BOTCTL_API_URL": bench.api_url,
        "BOTCTL_API_KEY": "test-key",
        "BOTCTL_GIT_TIMEOUT": "600",
    }
    argv = [str(tmp_path / "bots"), "--state", state, "--drain-timeout", "1"]
    agent = AgentProcess([*argv, "--cache-dir", str(tmp_path / "cache")], env, tmp_path)
    wait_until(lambda: bool(gits(agent)), 30, "git asking the state's remote")
    running = gits(agent)
    started = time.monotonic()
    code = agent.stop(signal.SIGTERM, timeout=60)
    took = time.monotonic() - started
    assert code == 1, agent.log_text()
    assert 1 + 10 <= took < 1 + 10 + 20, took
    assert "still running 11 s after the signal: exiting" in agent.log_text()
    wait_until(lambda: not any(alive(p) for p in running), 10, f"{running} to be gone")
