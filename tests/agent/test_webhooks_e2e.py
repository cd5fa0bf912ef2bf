"""The webhook against the real agent: a replayed delivery drives one cycle, triggers
coalesce into at most one pending cycle, a failing agent is not driven faster than its
backoff, and the watchdog fails /healthz when the loop stands still."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import time
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.agent.support import (
    AgentProcess,
    auto_applying,
    github_headers,
    gitlab_headers,
    idle,
    newest,
    one_bot,
    push_body,
)
from tests.e2e_support import Bench, bot_yaml

HOOK = "hook-secret-8080"


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    return one_bot(sandbox_factory, tmp_path)


def start(bench: Bench, *argv: str) -> AgentProcess:
    secret = ["--webhook-secret-env", "HOOK_SECRET"]
    return auto_applying(bench, *argv, *secret, env={"HOOK_SECRET": HOOK})


def webhooks(agent: AgentProcess) -> dict[str, float]:
    families = text_string_to_metric_families(agent.get("/metrics").text)
    family = next(f for f in families if f.name == "botctl_agent_webhooks")
    return {s.labels["result"]: s.value for s in family.samples if s.name.endswith("_total")}


def test_a_captured_delivery_posted_200_times_drives_one_cycle(bench: Bench) -> None:
    agent = start(bench, "--interval", "1h")
    try:
        cycles = newest(agent.wait_for(lambda d: d["appliedRevision"] and idle(d), what="sync"))
        bench.clear_log()
        body = push_body("c0ffee")
        headers = {**github_headers(body, HOOK), "X-GitHub-Delivery": "delivery-1"}
        answers = [agent.hook(body, headers) for _ in range(100)]
        # The signature covers the body only: a new delivery id does not make it new.
        answers += [
            agent.hook(body, {**headers, "X-GitHub-Delivery": f"forged-{n}"}) for n in range(100)
        ]
        assert answers[0].status_code == 202
        assert {(a.status_code, a.json()["status"]) for a in answers[1:]} == {(200, "duplicate")}
        doc = agent.wait_for(lambda d: idle(d) and newest(d) == cycles + 1, what="one cycle")
        assert doc["cycles"][0]["trigger"] == "webhook"
        assert webhooks(agent)["duplicate"] == 199
        reads = len(bench.requests())
        # GitLab's deliveries carry an id of their own.
        gitlab = {**gitlab_headers(HOOK), "X-Gitlab-Event-UUID": "uuid-1"}
        assert agent.hook(push_body("beef"), gitlab).status_code == 202
        assert agent.hook(push_body("beef"), gitlab).json()["status"] == "duplicate"
        doc = agent.wait_for(lambda d: idle(d) and newest(d) == cycles + 2, what="one more")
        assert len(bench.requests()) <= 2 * reads  # one cycle's reads, not a hundred
    finally:
        agent.stop(signal.SIGTERM)


def test_pushes_during_a_cycle_coalesce_into_one_more_cycle(bench: Bench) -> None:
    agent = start(bench, "--interval", "1h")
    try:
        cycles = newest(agent.wait_for(lambda d: d["appliedRevision"] and idle(d), what="sync"))
        # The next cycle applies a new revision, whose read takes 5 s: the pushes below
        # arrive while it runs.
        bench.admin("POST", "/faults", {"method": "GET", "path": "*", "latency_ms": 5000})
        bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.3"))
        body = push_body("first")
        assert agent.hook(body, github_headers(body, HOOK)).json()["cycle"] == "now"
        agent.wait_for(lambda d: d["cycleInProgress"] == cycles + 1, what="the cycle running")
        for n in range(10):
            body = push_body(f"push-{n}")
            answer = agent.hook(body, github_headers(body, HOOK)).json()
            assert answer == {"status": "triggered", "cycle": "after the cycle in progress"}
        doc = agent.status()
        assert (doc["cycleInProgress"], doc["pendingCycle"]) == (cycles + 1, "webhook")
        doc = agent.wait_for(lambda d: idle(d) and newest(d) == cycles + 2, 60, "one more cycle")
        assert [c["trigger"] for c in doc["cycles"][:2]] == ["webhook", "webhook"]
        assert webhooks(agent)["triggered"] == 11
    finally:
        agent.stop(signal.SIGTERM)


def test_a_failing_agent_holds_pushes_until_its_backoff_ends(bench: Bench) -> None:
    agent = start(bench, "--interval", "0.2s", "--backoff-max", "1h")
    try:
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="sync")
        failing = {"method": "GET", "path": "*", "status": 500, "count": 10**6}
        bench.admin("POST", "/faults", failing)
        # The third failure backs off 8 s: room for the pushes below on a loaded machine.
        doc = agent.wait_for(lambda d: d["consecutiveFailures"] >= 3, 60, "failures")
        failed = newest(doc)
        for n in range(20):
            body = push_body(f"push-{n}")
            answer = agent.hook(body, github_headers(body, HOOK)).json()
            assert answer["cycle"] == f"when the backoff ends ({doc['nextCycle']})"
        doc = agent.status()
        assert (newest(doc), doc["cycleInProgress"], doc["pendingCycle"]) == (
            failed,
            None,
            "webhook",
        ), "a push started a cycle during the backoff"
        due = doc["nextCycle"]
        doc = agent.wait_for(lambda d: newest(d) == failed + 1, 60, "the held cycle")
        held = doc["cycles"][0]
        assert (held["trigger"], held["result"]) == ("webhook", "failed")
        assert held["started"] >= due
    finally:
        agent.stop(signal.SIGTERM)


def test_the_watchdog_fails_healthz_while_the_loop_stands_still_and_recovers(
    bench: Bench,
) -> None:
    agent = start(bench, "--interval", "0.2s", "--watchdog", "2s", "--request-timeout", "120")
    try:
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="sync")
        assert agent.get("/healthz").json() == {"status": "alive"}
        # One read that takes 12 s: no request sent or answered meanwhile.
        bench.admin("POST", "/faults", {"method": "GET", "path": "*", "latency_ms": 12000})
        stalled = agent.poll("/healthz", lambda r: r.status_code == 503, what="stalled")
        doc = stalled.json()
        assert doc["status"] == "stalled"
        assert doc["quietSeconds"] >= 2  # over 2 s, rounded to a tenth
        assert doc["watchdogSeconds"] == 2
        assert doc["cycleInProgress"] is not None
        agent.poll("/healthz", lambda r: r.status_code == 200, 60, "alive again")
    finally:
        agent.stop(signal.SIGTERM)


def test_a_standby_is_ready_and_sends_pushes_to_the_holder(bench: Bench) -> None:
    first = start(bench, "--interval", "0.2s", "--lease", "2s")
    second = None
    try:
        first.wait_for(lambda d: d["role"] == "active", what="active")
        second = start(bench, "--interval", "0.2s", "--lease", "2s")
        second.wait_for(lambda d: d["role"] == "standby", what="standby")
        assert second.get("/readyz").json() == {
            "ready": True,
            "role": "standby",
            "serviceAnswering": False,
        }
        body = push_body("c1")
        answer = second.hook(body, github_headers(body, HOOK))
        assert answer.status_code == 503  # a proxy retrying on 503 reaches the holder
        assert f"pid {first.proc.pid}" in answer.json()["leaseHolder"]
        assert first.hook(body, github_headers(body, HOOK)).status_code == 202
    finally:
        first.stop(signal.SIGTERM)
        if second is not None:
            second.stop(signal.SIGTERM)


def test_the_listener_refuses_a_rebound_name_and_answers_an_allowed_one(bench: Bench) -> None:
    agent = start(bench, "--interval", "1h", "--allowed-host", "botctl.internal")
    try:
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="sync")
        refused = agent.get("/status", headers={"Host": "attacker.example"})
        assert refused.status_code == 421
        assert "--allowed-host" in refused.json()["error"]
        assert json.loads(agent.get("/status", headers={"Host": "botctl.internal"}).text)
        assert agent.get("/status", headers={"Host": "localhost:9464"}).status_code == 200
    finally:
        agent.stop(signal.SIGTERM)


def test_malformed_requests_are_refused_and_logged_once_as_json(bench: Bench) -> None:
    agent = start(bench, "--interval", "1h")
    try:
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="sync")
        for _ in range(50):
            with socket.create_connection(("127.0.0.1", agent.port), timeout=30) as conn:
                conn.sendall(b"NOT HTTP AT ALL\r\n\r\n")
                assert conn.recv(100).startswith(b"HTTP/1.1 400 ")
        assert agent.get("/healthz").status_code == 200
    finally:
        agent.stop(signal.SIGTERM)
    said = [e for e in agent.log() if "Invalid HTTP request" in e.get("message", "")]
    assert [(e["level"], e["event"]) for e in said] == [("warn", "listener")]  # once a minute
    assert all(line.startswith("{") for line in agent.lines), agent.log_text()


def test_systemd_hears_ready_and_a_watchdog_that_stops_while_the_loop_stands_still(
    bench: Bench, tmp_path: Path
) -> None:
    """The sd_notify protocol against a socket of the test's: READY=1 once listening,
    WATCHDOG=1 every half of WATCHDOG_USEC while the loop moves, none while it stalls,
    STOPPING=1 on SIGTERM."""
    path = tmp_path / "notify.sock"
    heard = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    heard.bind(str(path))
    heard.settimeout(30)
    systemd = {"NOTIFY_SOCKET": str(path), "WATCHDOG_USEC": "400000"}  # a ping every 0.2 s
    agent = auto_applying(
        bench, "--interval", "0.2s", "--watchdog", "2s", "--request-timeout", "120", env=systemd
    )

    def drain() -> list[str]:
        heard.setblocking(False)
        found = []
        with contextlib.suppress(BlockingIOError):
            while True:
                found.append(heard.recv(4096).decode())
        heard.settimeout(30)
        return found

    try:
        assert heard.recv(4096) == b"READY=1"
        agent.wait_for(lambda d: d["appliedRevision"] is not None, what="sync")
        assert heard.recv(4096) == b"WATCHDOG=1"
        bench.admin("POST", "/faults", {"method": "GET", "path": "*", "latency_ms": 15000})
        agent.poll("/healthz", lambda r: r.status_code == 503, what="stalled")
        drain()  # those sent before the stall was seen
        # Stalled for over a second (five periods of pings): not one more.
        stalled = agent.poll(
            "/healthz",
            lambda r: r.status_code == 503 and r.json()["quietSeconds"] > 3.5,
            what="a longer stall",
        )
        assert stalled.status_code == 503
        assert "WATCHDOG=1" not in drain()[1:]  # one may have left as the stall began
        agent.poll("/healthz", lambda r: r.status_code == 200, 60, "alive again")
        assert heard.recv(4096) == b"WATCHDOG=1"
        agent.proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + 30
        while "STOPPING=1" not in drain():
            assert time.monotonic() < deadline, "no STOPPING=1"
            time.sleep(0.05)
    finally:
        agent.stop(signal.SIGTERM)
        heard.close()
