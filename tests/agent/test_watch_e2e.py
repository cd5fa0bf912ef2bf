"""The agent's cost follows the change (issue #25), end to end: a real agent process, a git
source, the sandbox under a rate limit announcing its window (the service's real limit, 100
requests per 10 s, is 10/s), its request log read.

- a push changing one chatbot of the fleet, arriving while the drift watch reads a slice,
  preempts the slice (which writes nothing) and sends at most 3 requests before its write;
- the watch covers the fleet in the slices its period announces, each slice within the
  budget, and with --self-heal heals what a slice found from that slice's own read.

The fleet's size is a sample knob: ``BOTCTL_WATCH_FLEET`` (default 24; 500 in the long run).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import AgentProcess, GitRemote, github_headers, push_body
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.samples import WATCH_FLEET

HOOK = "hook-secret-watch"
ATTRIBUTES = [{"name": f"a{i}", "type": "text", "label": f"A{i}"} for i in range(3)]
DECLARED = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(3))
TARGET = "push-1"  # the chatbot the push changes; the others are w-NNN


def document(chatbot_id: str, name: str) -> str:
    return bot_yaml(chatbot_id, chatbot_id, settings=f"name: {name}", attributes=DECLARED)


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(rate_limit=10)  # announcing its window
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for chatbot_id in fleet():
        bench.create_bot(chatbot_id, attributes=ATTRIBUTES, settings={"name": chatbot_id})
    return bench


def fleet() -> list[str]:
    return [TARGET, *(f"w-{n:03d}" for n in range(WATCH_FLEET - 1))]


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    remote.push({f"bots/{c}.yaml": document(c, c) for c in fleet()}, "the fleet")
    return remote


@pytest.fixture
def agent(
    bench: Bench, remote: GitRemote, request: pytest.FixtureRequest
) -> Iterator[AgentProcess]:
    env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url, "HOOK_SECRET": HOOK}
    argv = [
        remote.source("bots"),
        *("--state", str(bench.workdir / "state.json")),
        *("--cache-dir", str(bench.workdir / "cache")),
        *("--webhook-secret-env", "HOOK_SECRET"),
        "--auto-apply",
        *("--interval", "1s", "--watch-budget", "50", "--watch-slice", "1s"),
        *request.param,
    ]
    process = AgentProcess(argv, env, bench.workdir)
    try:
        process.wait_for(
            lambda d: d["appliedRevision"] is not None and synced(d), 300, "the first sync"
        )
        yield process
    finally:
        assert process.stop(signal.SIGTERM) == 0, process.log_text()


def synced(doc: dict[str, Any]) -> bool:
    return len(doc["chatbots"]) == WATCH_FLEET and all(
        b["status"] == "Synced" for b in doc["chatbots"]
    )


def in_flight(bench: Bench) -> list[dict[str, Any]]:
    """The slow attribute reads the sandbox received and has not answered."""
    return [r for r in bench.requests() if r["status"] is None and "/chatbots/w-" in r["path"]]


def until(check: Any, agent: AgentProcess, what: str, timeout: float = 60) -> Any:
    """Poll ``check`` (bounded: a loaded machine is slower), never sleep a guessed time."""
    import time

    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{agent.log_text()}"
        time.sleep(0.02)
    return found


@pytest.mark.parametrize("agent", [()], indirect=True)
def test_a_push_preempts_the_watch_and_reads_only_the_chatbot_it_changes(
    bench: Bench, remote: GitRemote, agent: AgentProcess
) -> None:
    # From now on the watch's reads of the fleet hang 30 s: a slice is caught in flight.
    slow = {"method": "GET", "path": "*/chatbots/w-*/custom-attributes", "latency_ms": 30000}
    bench.admin("POST", "/faults", {**slow, "count": 10_000})
    until(lambda: in_flight(bench), agent, "a watch slice in flight")
    before = agent.status()
    # No --rate-limit: the key's limit was learned from the window the sandbox announces.
    assert before["watch"]["keys"][0]["limitFrom"] == "announced"
    reading = before["cycleInProgress"]
    assert reading is not None

    commit = remote.push({f"bots/{TARGET}.yaml": document(TARGET, "Pushed")}, "one chatbot")
    body = push_body(commit)
    answer = agent.hook(body, github_headers(body, HOOK))
    assert answer.json() == {"status": "triggered", "cycle": "now"}
    mark = max(r["seq"] for r in bench.requests())

    doc = agent.wait_for(lambda d: d["appliedRevision"] == commit, 60, "the push applied")
    cycles = {c["number"]: c for c in doc["cycles"]}
    assert cycles[reading]["result"] == "preempted"
    pushed = next(c for c in doc["cycles"] if c["revision"] == commit and c["applied"])
    assert (pushed["trigger"], pushed["result"], pushed["read"]) == ("webhook", "applied", 1)

    # Only the pushed chatbot's reads before its one write; nothing for the rest.
    log = [r for r in bench.requests() if r["seq"] > mark]
    write = next(r for r in log if r["method"] == "POST")
    assert write["body"] == {"chatbotId": TARGET, "name": "Pushed"}
    before_write = [r for r in log if r["seq"] < write["seq"]]
    assert len(before_write) <= 3, before_write
    assert all(r["method"] == "GET" for r in before_write)
    assert not any("/chatbots/w-" in r["path"] for r in before_write)
    # The preempted slice wrote nothing: the push's write is the only one since the sync.
    assert [r for r in bench.requests() if r["method"] != "GET"][-1] == write
    statuses = {b["chatbotId"]: b for b in doc["chatbots"]}
    assert statuses[TARGET]["revision"] == commit
    assert statuses[TARGET]["status"] == "Synced"


def read_at(bot: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(bot["lastRead"])


@pytest.mark.parametrize("agent", [("--self-heal", "--rate-limit", "10")], indirect=True)
def test_the_watch_covers_the_fleet_within_its_budget_and_heals_from_its_own_read(
    bench: Bench, agent: AgentProcess
) -> None:
    doc = agent.status()
    watch = doc["watch"]
    key = watch["keys"][0]
    # 50 % of 10/s: 5 requests a slice each second, the list read and 4 chatbots.
    assert (key["limitFrom"], key["budgetPerSecond"], key["sliceSize"]) == ("rate-limit", 5, 4)
    rounds = -(-WATCH_FLEET // 4)
    assert watch["coverSeconds"] == pytest.approx(rounds * key["sliceSeconds"], abs=0.2)

    # Every chatbot read again within one round of slices: counted, not timed (the wait's
    # bound only keeps a broken watch from hanging the suite: two rounds and a margin, so
    # that the long run's 500 chatbots, 125 s a round, fit too).
    patience = 2 * watch["coverSeconds"] + 60
    start = max(read_at(b) for b in doc["chatbots"])
    first = max(c["number"] for c in doc["cycles"])
    doc = agent.wait_for(
        lambda d: all(read_at(b) > start for b in d["chatbots"]), patience, "the fleet read again"
    )
    slices = [c for c in doc["cycles"] if c["number"] > first and c["read"]]
    assert len(slices) <= rounds + 1  # the slice in progress at the start, and one round
    assert all(c["requests"] <= 1 + key["sliceSize"] for c in slices), slices
    assert not [r for r in bench.requests() if r["status"] == 429]

    # A dashboard edit: the slice that reads it heals it from its own read.
    bench.admin("PATCH", f"/chatbots/w-{WATCH_FLEET - 2:03d}", {"settings": {"name": "edited"}})
    doc = agent.wait_for(
        lambda d: any(c["result"] == "healed" for c in d["cycles"]), patience, "healed"
    )
    healed = next(c for c in doc["cycles"] if c["result"] == "healed")
    # Its slice's reads, one write, the read-back of the chatbot written (list, attributes).
    assert healed["requests"] <= healed["read"] + 1 + 1 + 2, healed
    assert healed["applied"] == 1
    name = bench.bot_state(f"w-{WATCH_FLEET - 2:03d}")["settings"]["name"]
    assert name == f"w-{WATCH_FLEET - 2:03d}"
