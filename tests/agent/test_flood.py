"""Floods of half-sent requests against the real agent, its open-file limit set for the child
process: it lives, its cycles go on, ``/healthz`` answers; out of file descriptors, its cycle
fails without taking the process down and the accept error is logged once, not thousands of
times."""

from __future__ import annotations

import resource
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agent.support import AgentProcess, auto_applying, last_cycle, newest, one_bot
from tests.e2e_support import Bench

HALF_SENT = b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: slow"


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    return one_bot(sandbox_factory, tmp_path)


def open_files(soft: int, hard: int | None = None) -> Callable[[], None]:
    """A ``preexec_fn``: the child's limit on open files (the hard one kept unless given)."""

    def apply() -> None:
        keep = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, keep if hard is None else hard))

    return apply


def start(bench: Bench, limits: Callable[[], None], *argv: str) -> AgentProcess:
    return auto_applying(bench, "--interval", "0.2s", *argv, preexec_fn=limits)


@contextmanager
def half_sent(port: int, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections, each with a request head that never ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < count + 512:  # this process holds them all
        if hard != resource.RLIM_INFINITY and hard < count + 512:
            pytest.fail(f"the test needs {count + 512} open files; the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (count + 512, hard))
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            conn = socket.create_connection(("127.0.0.1", port), timeout=30)
            held.append(conn)
            conn.sendall(HALF_SENT)
        yield held
    finally:
        for conn in held:
            conn.close()


def closed(agent: AgentProcess) -> dict[str, float]:
    families = text_string_to_metric_families(agent.get("/metrics").text)
    family = next(f for f in families if f.name == "botctl_agent_http_connections_closed")
    return {s.labels["reason"]: s.value for s in family.samples if s.name.endswith("_total")}


def test_2000_half_sent_connections_under_a_soft_limit_of_1024(bench: Bench) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    agent = start(bench, open_files(1024))
    try:
        doc = agent.wait_for(lambda d: d["appliedRevision"] is not None, what="first sync")
        raised = agent.wait_log(lambda e: e.get("event") == "limits", what="the limit")
        if hard > 1024:
            assert raised["message"] == f"open files: soft limit raised from 1024 to {hard}"
        with half_sent(agent.port, 2000):
            # All 2,000 are open on this side: the agent holds at most --max-connections of
            # them, and still answers new requests.
            assert agent.get("/healthz").json() == {"status": "alive"}
            seen = newest(agent.status())
            agent.wait_for(lambda d: newest(d) >= seen + 3, 60, "three more cycles")
            assert closed(agent)["evicted"] >= 2000 - 64
        doc = agent.wait_for(lambda d: newest(d) >= seen + 6, 60, "cycles after the flood")
        assert last_cycle(doc) == "synced"
        assert agent.proc.poll() is None
        assert agent.get("/readyz").status_code == 200
    finally:
        code = agent.stop(signal.SIGTERM)
    assert code == 0, agent.log_text()


def test_out_of_file_descriptors_the_agent_fails_its_cycles_lives_and_recovers(
    bench: Bench,
) -> None:
    """A hard limit of 256 and a cap above it (--max-connections 1000): the half-sent
    connections take every descriptor. The cycle fails (it cannot open a socket or a file),
    its error path (which once listed a directory to describe the failure, failed again
    and ended the process with a traceback) reports it, and the loop goes on; accept's
    error, repeated every second, is logged once."""
    agent = start(bench, open_files(256, 256), "--max-connections", "1000")
    try:
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="first sync")
        limit = agent.wait_log(lambda e: e.get("event") == "limits", what="the limit")
        assert limit["message"] == "open files: limit 256"
        with half_sent(agent.port, 600):
            agent.wait_log(
                lambda e: "out of system resource" in e.get("message", ""), 60, "accept failing"
            )
            failed = agent.wait_log(
                lambda e: (
                    e.get("event") == "cycle"
                    and e.get("level") == "error"
                    and "Too many open files" in e.get("message", "")
                ),
                60,
                "a cycle failing for want of descriptors",
            )
            assert agent.proc.poll() is None
        agent.poll("/healthz", lambda r: r.status_code == 200, 60, "the listener back")
        number = int(failed["message"].split()[1])
        doc = agent.wait_for(
            lambda d: newest(d) > number and last_cycle(d) == "synced", 120, "recovery"
        )
        assert doc["consecutiveFailures"] == 0
    finally:
        code = agent.stop(signal.SIGTERM)
    assert code == 0, agent.log_text()
    accept_errors = [e for e in agent.log() if "out of system resource" in e.get("message", "")]
    assert len(accept_errors) <= 2, accept_errors  # once per minute
    assert "Traceback" not in agent.log_text()
    assert all(line.startswith("{") for line in agent.lines), agent.log_text()
