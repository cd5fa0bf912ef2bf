"""The agent's lifecycle with real processes: SIGTERM in the middle of an apply drains it,
records what finished and exits 0; two agents on one state never both write, and the standby
takes over when the active one is killed (SIGKILL) or paused past its lease (SIGSTOP)."""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from botctl.store.lock import read_lock
from botctl.store.state import load_state
from tests.agent.support import AgentProcess, newest
from tests.e2e_support import Bench, bot_yaml
from tests.test_signals import assert_recorded, successful_writes, wait_until_answered

KEY = "test-key"


@pytest.fixture
def slow_bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(latency_ms=120)
    return Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory()
    return Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)


def start(bench: Bench, *argv: str) -> AgentProcess:
    env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url}
    state = ["--state", str(bench.state_path)]
    return AgentProcess([str(bench.config_dir), *state, *argv], env, bench.workdir)


def test_sigterm_mid_apply_drains_records_and_exits_0(slow_bench: Bench) -> None:
    bench = slow_bench
    attributes = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(6))
    for n in range(4):
        bench.create_bot(f"bot-{n}")
        bench.write(
            f"b{n}.yaml", bot_yaml(f"b{n}", f"bot-{n}", settings="temp: 0.3", attributes=attributes)
        )
    agent = start(bench, "--auto-apply", "--parallelism", "1", "--drain-timeout", "10")
    try:
        deadline = time.monotonic() + 30
        while not any(e.get("event") == "apply" for e in agent.log()):
            assert time.monotonic() < deadline, agent.log_text()
            time.sleep(0.01)
        code = agent.stop(signal.SIGTERM, timeout=30)
    finally:
        agent.kill()
    assert code == 0, agent.log_text()
    messages = [e.get("message", "") for e in agent.log()]
    assert any("no operation starts from now on" in m for m in messages), agent.log_text()
    assert messages[-1] == "stopped: lease released"
    assert read_lock(bench.state_path) is None  # the lease is released
    wait_until_answered(bench)
    writes = successful_writes(bench)
    assert 0 < len(writes) < 4 * 7  # it stopped part way
    assert_recorded(bench, writes)  # every write the service applied is in the state
    # A re-run does only what is left: nothing is created twice.
    rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert rerun.exit_code == 0, rerun.output
    creates = Counter(
        (w["path"], w["body"]["name"]) for w in successful_writes(bench) if "custom" in w["path"]
    )
    assert len(creates) == 24
    assert set(creates.values()) == {1}


def applied_after(number: int) -> Callable[[dict[str, Any]], bool]:
    """A cycle after ``number`` applied a revision (a cycle's result stays the newest only
    until the next: with --interval 0.2s, a fraction of a second)."""
    return lambda d: any(c["result"] == "applied" and c["number"] > number for c in d["cycles"])


def cycles_pass(*agents: AgentProcess, count: int = 2) -> None:
    """Each agent finishes ``count`` more cycles: what any of them would have written by
    then is in the request log (an observed wait, not a guessed sleep)."""
    for agent in agents:
        target = newest(agent.status()) + count

        def passed(doc: dict[str, Any], target: int = target) -> bool:
            return newest(doc) >= target

        agent.wait_for(passed, what=f"{count} cycles")


def settings_writes(bench: Bench) -> list[dict[str, Any]]:
    return [w for w in successful_writes(bench) if w["path"].endswith("/update-chatbot-settings")]


def test_two_agents_one_writer_and_the_standby_takes_over(bench: Bench) -> None:
    for n in range(3):
        bench.create_bot(f"bot-{n}")
        bench.write(f"b{n}.yaml", bot_yaml(f"b{n}", f"bot-{n}", settings="temp: 0.3"))
    flags = ("--auto-apply", "--interval", "0.2s", "--lease", "2s")
    first = start(bench, *flags)
    agents = [first]
    try:
        first.wait_for(lambda d: d["role"] == "active" and d["appliedRevision"], what="active")
        second = start(bench, *flags)
        agents.append(second)
        doc = second.wait_for(lambda d: d["role"] == "standby", what="standby")
        assert f"pid {first.proc.pid}" in doc["leaseHolder"]
        # A healthy standby is ready (a Deployment's rollout completes); it does not reconcile.
        ready = second.get("/readyz")
        assert ready.status_code == 200
        assert ready.json()["role"] == "standby"
        cycles_pass(first, second)  # both running: still one write per chatbot
        assert len(settings_writes(bench)) == 3

        # A change: applied once, by the holder.
        seen = newest(first.status())
        bench.write("b0.yaml", bot_yaml("b0", "bot-0", settings="temp: 0.4"))
        first.wait_for(applied_after(seen), what="applied")
        cycles_pass(first, second)
        assert len(settings_writes(bench)) == 4

        # SIGKILL the holder: the standby takes over once the lease lapses.
        first.proc.kill()
        first.proc.wait(10)
        second.wait_for(lambda d: d["role"] == "active", 30, "takeover")
        holder = read_lock(bench.state_path)
        assert holder is not None
        assert holder.pid == second.proc.pid
        seen = newest(second.status())
        bench.write("b1.yaml", bot_yaml("b1", "bot-1", settings="temp: 0.5"))
        second.wait_for(applied_after(seen), what="applied by 2")
        assert len(settings_writes(bench)) == 5

        # Pause the new holder past its lease: a third agent takes over; once resumed, the
        # paused one finds its lease gone and writes nothing.
        second.proc.send_signal(signal.SIGSTOP)
        third = start(bench, *flags)
        agents.append(third)
        third.wait_for(lambda d: d["role"] == "active", 30, "third takes over")
        seen = newest(third.status())
        bench.write("b2.yaml", bot_yaml("b2", "bot-2", settings="temp: 0.6"))
        third.wait_for(applied_after(seen), what="applied by 3")
        second.proc.send_signal(signal.SIGCONT)
        second.wait_for(lambda d: d["role"] == "standby", 30, "the paused one stands by")
        cycles_pass(second, third)
        writes = settings_writes(bench)
        assert len(writes) == 6, writes
        bodies = Counter(str(sorted(w["body"].items())) for w in writes)
        assert set(bodies.values()) == {1}  # every write sent once
    finally:
        for agent in agents:
            agent.kill()


def slow_create(bench: Bench, drain_timeout: str) -> AgentProcess:
    """An agent whose apply sends its settings, then the first attribute's create, which the
    service answers after 20 s."""
    bench.create_bot("bot-1")
    attributes = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(3))
    bench.write("b.yaml", bot_yaml("b", "bot-1", settings="temp: 0.3", attributes=attributes))
    slow = {"method": "POST", "path": "*/custom-attributes", "latency_ms": 20000, "count": 100}
    bench.admin("POST", "/faults", slow)
    return start(bench, "--auto-apply", "--parallelism", "1", "--drain-timeout", drain_timeout)


def wait_for_create_in_flight(bench: Bench, agent: AgentProcess) -> None:
    """Until the service has received the create and not answered it (its request log)."""
    deadline = time.monotonic() + 30
    while not any(
        r["path"].endswith("/custom-attributes") and r["status"] is None for r in bench.requests()
    ):
        assert time.monotonic() < deadline, agent.log_text()
        time.sleep(0.02)


def test_a_request_slower_than_the_drain_timeout_is_abandoned_and_the_agent_exits_0(
    bench: Bench,
) -> None:
    agent = slow_create(bench, "1")
    try:
        wait_for_create_in_flight(bench, agent)
        code = agent.stop(signal.SIGTERM, timeout=15)
    finally:
        agent.kill()
    assert code == 0, agent.log_text()
    messages = [e.get("message", "") for e in agent.log()]
    assert any("waiting up to 1 s for the 1 in flight" in m for m in messages), messages
    assert any("abandoning the 1 operation(s) in flight" in m for m in messages), messages
    assert messages[-1] == "stopped: lease released"
    assert read_lock(bench.state_path) is None
    # The settings write finished before: it is recorded; the abandoned create is not.
    state = load_state(bench.state_path)
    assert state.bots["bot-1"].settings.json_fields == {"temp": 0.3}
    assert state.bots["bot-1"].attributes == {}


def test_a_second_signal_abandons_the_operations_in_flight_at_once(bench: Bench) -> None:
    """The first SIGTERM drains (up to --drain-timeout, here far longer than the test
    waits); the second abandons what is in flight and the agent exits 0 at once."""
    agent = slow_create(bench, "600")
    try:
        wait_for_create_in_flight(bench, agent)
        agent.proc.send_signal(signal.SIGTERM)
        agent.wait_log(lambda e: "waiting up to 600 s" in e.get("message", ""), what="the drain")
        code = agent.stop(signal.SIGTERM, timeout=30)  # well within the 600 s drain
    finally:
        agent.kill()
    assert code == 0, agent.log_text()
    messages = [e.get("message", "") for e in agent.log()]
    assert any("abandoning the 1 operation(s) in flight" in m for m in messages), messages
    assert messages[-1] == "stopped: lease released"
    assert read_lock(bench.state_path) is None
    state = load_state(bench.state_path)
    assert state.bots["bot-1"].attributes == {}  # the abandoned create is not recorded
