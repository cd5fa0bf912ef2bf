"""Agents on one state against a slow sandbox, for the tests of the lease's fence and the
chaos test: the configuration as revisions of one value (``instructions: v<N>``), the agents as
processes (``tests.agent.support.AgentProcess``), and what the sandbox's request log says about
the order in which revisions reached the service."""

from __future__ import annotations

import contextlib
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from botctl.store.state import load_state
from tests.agent.support import AgentProcess, agent_env
from tests.e2e_support import Bench, bot_yaml

SETTINGS_PATH = "/update-chatbot-settings"


def write_revision(bench: Bench, bots: int, revision: int) -> None:
    """The configuration at revision ``revision``: every chatbot's instructions say so."""
    for n in range(bots):
        settings = f"name: Bot {n}\ninstructions: v{revision}"
        bench.write(f"b{n}.yaml", bot_yaml(f"b{n}", f"bot-{n}", settings=settings))


def start_agent(bench: Bench, *flags: str) -> AgentProcess:
    """An agent applying the bench's configuration, with a cache of its own (agents that
    shared one would remove each other's revisions)."""
    cache = tempfile.mkdtemp(prefix="agent-cache-", dir=bench.workdir)
    argv = [str(bench.config_dir), "--state", str(bench.state_path), "--auto-apply"]
    argv += ["--cache-dir", cache, *flags]
    return AgentProcess(argv, agent_env(bench.api_url), bench.workdir)


@contextlib.contextmanager
def agents_running() -> Iterator[list[AgentProcess]]:
    """A list to put started agents in; each is resumed (if paused) and killed at the end."""
    started: list[AgentProcess] = []
    try:
        yield started
    finally:
        for agent in started:
            agent.proc.send_signal(signal.SIGCONT)
            agent.kill()


def holder_and_standby(
    bench: Bench, started: list[AgentProcess], *flags: str
) -> tuple[AgentProcess, AgentProcess]:
    """A first agent that applied the configuration as it is, then a second standing by."""
    first = start_agent(bench, *flags)
    started.append(first)
    first.wait_for(lambda d: bool(d["appliedRevision"]), 60, "the first revision applied")
    second = start_agent(bench, *flags)
    started.append(second)
    second.wait_for(lambda d: d["role"] == "standby", 60, "the second standing by")
    return first, second


@dataclass(frozen=True)
class Write:
    seq: int  # arrival order at the service
    chatbot_id: str
    revision: int
    status: int | None  # None: not answered yet


def settings_writes(bench: Bench) -> list[Write]:
    """Every settings update the service received, in arrival order."""
    found = []
    for entry in bench.requests():
        if entry["method"] != "POST" or not entry["path"].endswith(SETTINGS_PATH):
            continue
        body = entry["body"]
        found.append(
            Write(entry["seq"], body["chatbotId"], int(body["instructions"][1:]), entry["status"])
        )
    return found


def stale_writes(writes: list[Write]) -> list[tuple[Write, Write]]:
    """Each write of a revision older than one that reached the service before it (per
    chatbot or not: a revision is applied to the whole fleet), with that newer write."""
    stale = []
    newest: Write | None = None
    for write in sorted(writes, key=lambda w: w.seq):
        if newest is not None and write.revision < newest.revision:
            stale.append((write, newest))
        if newest is None or write.revision > newest.revision:
            newest = write
    return stale


def until(check: Callable[[], Any], what: str, timeout: float = 60) -> Any:
    """Poll ``check`` until it returns something true (bounded); that value."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def quiet(bench: Bench) -> list[dict[str, Any]]:
    """The request log once every request it holds was answered."""
    return until(  # type: ignore[no-any-return]
        lambda: (log := bench.requests()) and all(r["status"] is not None for r in log) and log,
        "the sandbox to answer every request",
    )


def service_revisions(bench: Bench, bots: int) -> dict[str, str | None]:
    return {
        f"bot-{n}": bench.bot_state(f"bot-{n}")["settings"].get("instructions") for n in range(bots)
    }


def state_revisions(bench: Bench, bots: int) -> dict[str, str | None]:
    state = load_state(bench.state_path)
    return {
        f"bot-{n}": state.bots[f"bot-{n}"].settings.json_fields.get("instructions")
        for n in range(bots)
    }
