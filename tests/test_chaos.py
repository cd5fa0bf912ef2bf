"""Chaos: agents on one state, a slow service, and pauses (SIGSTOP, later SIGCONT) at random
instants while new revisions keep arriving. Whatever the pauses do to the lease, no value of an
older revision reaches the service after a newer one did (read from the sandbox's request log,
in arrival order), and at the end the service holds the last revision and the state says so.

    BOTCTL_LONG_TESTS=1 uv run pytest tests/test_chaos.py -s    # 50 pauses, three agents
    BOTCTL_CHAOS_PAUSES=200 BOTCTL_CHAOS_SEED=7 uv run pytest tests/test_chaos.py -s

After a new revision, a pause lands right after a settings write reached the service (an apply
in flight), or while a write the service refused (503, Retry-After) waits for its retry, or
after a random delay; a new revision may arrive during it. Most pauses stop the holder of the
lease, some a standby; each lasts up to twice the lease, so the holder loses it about half the
time. The first is sure to be one a holder without a fence turns into a stale write: before a
retry, past the lease, a newer revision applied meanwhile by the standby. The seed is printed
and named in every failure; `BOTCTL_CHAOS_PAUSES` sets the number of pauses
(``tests/samples.py``).
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import pytest

from botctl.store.lock import read_lock
from tests.agent.support import AgentProcess
from tests.e2e_support import Bench
from tests.ha_support import (
    Write,
    agents_running,
    quiet,
    service_revisions,
    settings_writes,
    stale_writes,
    start_agent,
    state_revisions,
    until,
    write_revision,
)
from tests.samples import long_run, sample_size

PAUSES = sample_size("BOTCTL_CHAOS_PAUSES", 6, 50)
AGENTS = 3 if long_run() else 2
BOTS = 4
LEASE = 2.0
FLAGS = ("--interval", "0.3s", "--lease", f"{LEASE:g}s", "--parallelism", "2")
RETRY_FAULT = {
    "method": "POST",
    "path": "*/update-chatbot-settings",
    "status": 503,
    # The client waits this long before its retry: a pause lands in it, however slowly a
    # loaded machine lets the test see the refusal.
    "retry_after": 5,
}


Aim = Literal["write", "retry", "random"]


@dataclass
class Pause:
    agent: int
    aim: Aim  # right after a write arrived, while a refused write waits to be retried, any
    holder: bool  # it held the lease when paused
    landed: bool  # the instant it aimed at: a write in flight, or a retry not yet sent
    seconds: float


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(latency_ms=300)  # a write is in flight for 300 ms
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for n in range(BOTS):
        bench.create_bot(f"bot-{n}")
    return bench


def holder_pid(bench: Bench) -> int | None:
    lock = read_lock(bench.state_path)
    return lock.pid if lock is not None else None


def refused(bench: Bench) -> list[Write]:
    return [w for w in settings_writes(bench) if w.status == 503]


def wait_for_instant(bench: Bench, aim: Aim, rng: random.Random, patience: float) -> None:
    """Until the instant ``aim`` names (a random delay for "random"); at most ``patience``
    seconds for a write that does not come."""
    if aim == "random":
        time.sleep(rng.uniform(0, 1.5))
        return
    if aim == "retry":  # the next settings write is refused, asking for a retry in 5 s
        bench.admin("POST", "/faults", {**RETRY_FAULT, "count": 1})
    seen = len(refused(bench) if aim == "retry" else settings_writes(bench))
    deadline = time.monotonic() + patience
    while time.monotonic() < deadline:
        found = refused(bench) if aim == "retry" else settings_writes(bench)
        if len(found) > seen:
            return
        time.sleep(0.005)


def landed(bench: Bench, aim: Aim) -> bool:
    writes = settings_writes(bench)
    if aim == "write":
        return any(w.status is None for w in writes)
    if aim == "retry":  # the refused write's retry has not been sent yet
        last = refused(bench)[-1:]
        return bool(last) and last[0].seq == max(
            w.seq for w in writes if w.chatbot_id == last[0].chatbot_id
        )
    return True


def pause_one(
    bench: Bench,
    agents: list[AgentProcess],
    rng: random.Random,
    aim: Aim,
    seconds: float,
    meanwhile: Callable[[], None] = lambda: None,
    patience: float = 5,
) -> Pause:
    """One pause: wait for the instant, choose the agent (mostly the holder), stop it for
    ``seconds`` (``meanwhile`` is done in them: a new revision), resume it."""
    wait_for_instant(bench, aim, rng, patience)
    pids = [a.proc.pid for a in agents]
    holder = holder_pid(bench)
    aimed_at_holder = aim != "random" or rng.random() < 0.8
    index = pids.index(holder) if holder in pids and aimed_at_holder else rng.randrange(len(pids))
    agents[index].proc.send_signal(signal.SIGSTOP)
    where = landed(bench, aim)
    started = time.monotonic()
    meanwhile()
    time.sleep(max(0.0, seconds - (time.monotonic() - started)))
    agents[index].proc.send_signal(signal.SIGCONT)
    bench.admin("DELETE", "/faults")  # a retry fault no write met
    return Pause(index, aim, pids[index] == holder, where, seconds)


def test_pauses_at_random_instants_never_let_an_older_revision_overwrite_a_newer(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    seed = int(os.environ.get("BOTCTL_CHAOS_SEED") or random.SystemRandom().randrange(10**6))
    rng = random.Random(seed)
    with capsys.disabled():
        print(f"\nchaos: seed {seed}, {PAUSES} pauses, {AGENTS} agents")
    revision = 1
    write_revision(bench, BOTS, revision)
    pauses: list[Pause] = []
    with agents_running() as agents:
        agents.extend(start_agent(bench, *FLAGS) for _ in range(AGENTS))
        until(lambda: any(w.revision == 1 for w in settings_writes(bench)), "a first apply")

        def next_revision() -> None:
            nonlocal revision
            revision += 1
            write_revision(bench, BOTS, revision)

        for number in range(PAUSES):
            # The first pause is sure to land where a holder without a fence writes stale:
            # while a refused write waits for its retry, past the lease, and a newer revision
            # arrives meanwhile (which the standby applies).
            new = number == 0 or rng.random() < 0.5
            if new:
                next_revision()
            if number == 0:
                pause = pause_one(
                    bench, agents, rng, "retry", 2 * LEASE, next_revision, patience=60
                )
            else:
                # A write (or a refused one) to aim at comes only with a new revision.
                aim: Aim = rng.choice(["write", "retry", "random"]) if new else "random"
                seconds = rng.uniform(0.05, 2 * LEASE)
                during = next_revision if rng.random() < 0.3 else (lambda: None)
                pause = pause_one(bench, agents, rng, aim, seconds, during)
            pauses.append(pause)
        final = {f"bot-{n}": f"v{revision}" for n in range(BOTS)}
        until(lambda: service_revisions(bench, BOTS) == final, f"v{revision} applied", 120)
        until(lambda: state_revisions(bench, BOTS) == final, f"v{revision} recorded", 60)
        log = quiet(bench)
    context = f"seed {seed}; pauses {pauses}"
    assert log[0]["seq"] == 1, "the sandbox's log lost its start: raise its limit"
    writes = settings_writes(bench)
    assert stale_writes(writes) == [], context
    assert service_revisions(bench, BOTS) == final, context
    assert state_revisions(bench, BOTS) == final, context
    # Where the first pause landed: on the holder, its refused write not retried yet.
    assert pauses[0].holder, context
    assert pauses[0].landed, context
    with capsys.disabled():
        print(
            f"chaos: {len(writes)} settings writes, up to v{revision}; "
            f"{sum(p.holder for p in pauses)} pauses of the holder, "
            f"{sum(p.landed and p.aim == 'write' for p in pauses)} with a write in flight, "
            f"{sum(p.landed and p.aim == 'retry' for p in pauses)} before a retry, "
            f"{sum(p.seconds > LEASE for p in pauses)} past the lease"
        )
