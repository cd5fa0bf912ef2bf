"""The listener in process, over real sockets on loopback (uvicorn with the connection guard,
the application, the webhook), with short deadlines; and the pure rules beside it: which
``Host`` is answered, what a delivery is, the throttle, the watchdog."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from botctl.agent import hooks
from botctl.agent.guard import ConnectionGuard, Throttle
from botctl.agent.hosts import AllowedHosts
from botctl.agent.listener import make_app, make_server
from botctl.agent.log import Redactor
from botctl.agent.status import AgentStatus, Watchdog
from botctl.service.pacing import RequestStats

SECRET = "hook-secret-5150"
HEAD_TIMEOUT = 0.5
BODY_TIMEOUT = 0.5


class Served:
    """The agent's application and server on a free loopback port, in a thread of its own."""

    def __init__(self, secret: str | None = SECRET, max_connections: int = 8) -> None:
        self.status = AgentStatus("test", watchdog=60)
        self.status.role = "active"
        self.triggers: list[str] = []
        self.guard = ConnectionGuard(max_connections, HEAD_TIMEOUT, self._closed)
        app = make_app(
            self.status,
            self._trigger,
            Redactor({}, [], set()),
            webhook_secret=lambda: secret,
            branch="main",
            refresh=10,
            allowed_hosts=AllowedHosts.of(["bots.example.com"]),
            body_timeout=BODY_TIMEOUT,
        )
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.server = make_server(app, "127.0.0.1", self.port, self.guard)
        self.loop = asyncio.new_event_loop()
        serving = self.server.serve(sockets=[self.sock])
        self.thread = threading.Thread(target=self.loop.run_until_complete, args=(serving,))
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the server never started"
            time.sleep(0.01)

    def _trigger(self) -> str:
        self.triggers.append("webhook")
        return "now"

    def _closed(self, reason: str) -> None:
        self.status.metrics.connections_closed.labels(reason=reason).inc()

    def closed(self, reason: str) -> float:
        text = self.request(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")[2].decode()
        family = next(
            f
            for f in text_string_to_metric_families(text)
            if f.name == "botctl_agent_http_connections_closed"
        )
        return next(
            s.value
            for s in family.samples
            if s.labels["reason"] == reason and s.name.endswith("_total")
        )

    def connect(self, data: bytes = b"") -> socket.socket:
        conn = socket.create_connection(("127.0.0.1", self.port), timeout=30)
        if data:
            conn.sendall(data)
        return conn

    def request(self, data: bytes) -> tuple[int, dict[str, str], bytes]:
        with self.connect(data) as conn:
            return read_response(conn)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)
        self.loop.close()
        self.sock.close()


def read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One HTTP/1.1 response: status, headers (lower-cased names), body."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, f"closed before a response: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk, "closed mid-body"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def closed_by_peer(conn: socket.socket) -> bool:
    """The server closed this connection (its end read as end of file or a reset)."""
    try:
        return conn.recv(1) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def served() -> Iterator[Served]:
    found = Served()
    yield found
    found.close()


def post(headers: dict[str, str], body: bytes = b"", length: int | None = None) -> bytes:
    lines = [
        "POST /hooks/git HTTP/1.1",
        "Host: 127.0.0.1",
        f"Content-Length: {len(body) if length is None else length}",
    ]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


def signed(body: bytes, event: str = "push", **extra: str) -> dict[str, str]:
    digest = hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    return {"X-Hub-Signature-256": f"sha256={digest}", "X-GitHub-Event": event, **extra}


# --- the webhook: credentials before the body, a deadline for the body -------------------


@pytest.mark.parametrize(
    ("headers", "secret", "said"),
    [
        ({"X-Gitlab-Token": SECRET}, None, "webhooks are off"),
        ({}, SECRET, "missing X-Hub-Signature-256 / X-Gitlab-Token"),
        ({"X-Gitlab-Token": "not-it", "X-Gitlab-Event": "Push Hook"}, SECRET, "wrong"),
    ],
)
def test_a_delivery_the_headers_refuse_is_answered_401_without_waiting_for_its_body(
    headers: dict[str, str], secret: str | None, said: str
) -> None:
    served = Served(secret=secret)
    try:
        # 100 bytes announced, none sent: an answer that waited for them would be a 408.
        with served.connect(post(headers, length=100)) as conn:
            code, _, body = read_response(conn)
    finally:
        served.close()
    assert code == 401
    assert said in json.loads(body)["error"]
    assert served.triggers == []


def test_a_signed_body_that_never_arrives_is_answered_408_after_the_body_deadline(
    served: Served,
) -> None:
    with served.connect(post(signed(b"{}"), b'{"ref"', length=100)) as conn:
        code, _, body = read_response(conn)
    assert code == 408
    assert "did not arrive within 0.5 s" in json.loads(body)["error"]
    assert served.triggers == []


def test_a_body_announced_over_the_cap_is_refused_before_it_is_read(served: Served) -> None:
    with served.connect(post(signed(b"{}"), length=2 << 20)) as conn:
        code, _, _ = read_response(conn)
    assert code == 413


def test_a_replayed_signed_push_triggers_once_whatever_its_delivery_id(served: Served) -> None:
    body = json.dumps({"ref": "refs/heads/main", "after": "c1"}).encode()
    answers = [
        served.request(post(signed(body, **{"X-GitHub-Delivery": f"id-{n % 3}"}), body))
        for n in range(10)
    ]
    assert [code for code, _, _ in answers] == [202] + [200] * 9
    assert {json.loads(b)["status"] for _, _, b in answers[1:]} == {"duplicate"}
    assert served.triggers == ["webhook"]
    # A GitLab delivery (the token is the credential: nothing is signed) by its id.
    gitlab = {"X-Gitlab-Token": SECRET, "X-Gitlab-Event": "Push Hook", "X-Gitlab-Event-UUID": "u"}
    first = served.request(post(gitlab, b'{"ref": "refs/heads/main", "after": "c2"}'))
    again = served.request(post(gitlab, b'{"ref": "refs/heads/main", "after": "c3"}'))
    assert (first[0], again[0], json.loads(again[2])["status"]) == (202, 200, "duplicate")
    assert served.triggers == ["webhook", "webhook"]


def test_a_standby_answers_503_and_forgets_the_delivery(served: Served) -> None:
    served.status.role = "standby"
    served.status.lease_holder = "host-a (pid 7)"
    body = json.dumps({"ref": "refs/heads/main", "after": "c1"}).encode()
    code, headers, answer = served.request(post(signed(body), body))
    assert (code, headers["retry-after"]) == (503, "5")
    assert json.loads(answer)["leaseHolder"] == "host-a (pid 7)"
    ping = served.request(post(signed(body, "ping"), body))
    assert (ping[0], json.loads(ping[2])) == (200, {"status": "pong"})
    served.status.role = "active"  # it took the lease over: the same delivery is news
    assert served.request(post(signed(body), body))[0] == 202
    assert served.triggers == ["webhook"]


# --- the connection guard -----------------------------------------------------------------


def test_a_half_sent_request_head_is_closed_after_the_head_deadline(served: Served) -> None:
    with served.connect(b"GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\n") as conn:
        assert closed_by_peer(conn)
    # One byte at a time is no way around it: the deadline is for the whole head.
    with served.connect(b"G") as conn:
        conn.settimeout(0.1)
        sent = 1
        while True:
            try:
                if conn.recv(1) == b"":
                    break
            except TimeoutError:
                pass
            except ConnectionResetError:
                break
            conn.sendall(b"E" if sent < 3 else b"x")
            sent += 1
            assert sent < 300, "never closed"
    assert served.closed("timeout") >= 2


def test_past_the_cap_the_oldest_idle_connection_makes_room_and_the_probe_answers(
    served: Served,
) -> None:
    half_sent = [served.connect(b"GET /healthz HTTP/1.1\r\n") for _ in range(30)]
    try:
        code, _, body = served.request(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert (code, json.loads(body)) == (200, {"status": "alive"})
        assert closed_by_peer(half_sent[0])  # the oldest went first
        assert len(served.guard.open) <= served.guard.max_connections
        assert served.closed("evicted") >= 30 - served.guard.max_connections
    finally:
        for conn in half_sent:
            conn.close()


def test_connections_serving_a_request_are_never_evicted(served: Served) -> None:
    # Each has sent a whole head and part of its body: the application is reading it.
    busy = [served.connect(post(signed(b"{}"), b"{", length=2)) for _ in range(8)]
    try:
        deadline = time.monotonic() + 30
        while sum(c.serving for c in list(served.guard.open)) < 8:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with served.connect(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as late:
            assert closed_by_peer(late)  # refused: no room, and nobody to evict
        codes = [read_response(c)[0] for c in busy]  # each ends by its own deadline
        assert codes == [408] * 8
    finally:
        for conn in busy:
            conn.close()
    assert served.closed("refused") == 1


# --- Host: DNS rebinding --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "code"),
    [
        ("127.0.0.1:9464", 200),
        ("[::1]:9464", 200),
        ("10.2.3.4", 200),
        ("localhost:9464", 200),
        ("bots.example.com", 200),
        ("BOTS.Example.com.:443", 200),
        ("attacker.example", 421),
        ("bots.example.com.attacker.example", 421),
        ("", 421),
    ],
)
def test_the_listener_answers_only_for_the_hosts_it_knows(
    served: Served, host: str, code: int
) -> None:
    status, _, body = served.request(f"GET /status HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    assert status == code
    if code == 421:
        assert "--allowed-host" in json.loads(body)["error"]


def test_allowed_host_patterns() -> None:
    allowed = AllowedHosts.of(["*.bots.example.com", "hooks.example.org"])
    assert allowed.allows("a.bots.example.com")
    assert allowed.allows("a.b.bots.example.com:8080")
    assert not allowed.allows("bots.example.com")
    assert not allowed.allows("evilbots.example.com")
    assert allowed.allows("hooks.example.org")
    assert not allowed.allows(None)
    assert AllowedHosts.of(["*"]).allows("anything.at.all")


# --- what a delivery is --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "kind"),
    [
        ({"x-github-event": "push"}, "push"),
        ({"x-github-event": "ping"}, "ping"),
        ({"x-github-event": "issues"}, "other"),
        ({"x-github-event": "star"}, "other"),
        ({"x-gitlab-event": "Push Hook"}, "push"),
        ({"x-gitlab-event": "Tag Push Hook"}, "other"),
        ({"x-gitlab-event": "Merge Request Hook"}, "other"),
        ({}, "other"),
    ],
)
def test_only_a_push_is_a_push(headers: dict[str, str], kind: str) -> None:
    assert hooks.event(headers)[0] == kind


def test_delivery_keys_and_their_bounded_memory() -> None:
    signature = hooks.Credential("signature", "sha256=x")
    token = hooks.Credential("token", SECRET)
    keys = hooks.delivery_keys({"x-github-delivery": "d1"}, b"{}", signature)
    assert keys == ("id:d1", "sha256:" + hashlib.sha256(b"{}").hexdigest())
    assert hooks.delivery_keys({}, b"{}", token) == ()  # nothing to know it by
    seen = hooks.Deliveries(capacity=3)
    for n in range(5):
        seen.remember([f"k{n}"])
    assert not seen.seen(["k0"])
    assert not seen.seen(["k1"])
    assert seen.seen(["k2", "other"])


# --- the throttle and the watchdog (a fake clock) ------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_repeated_error_is_written_once_per_interval_with_a_count() -> None:
    clock = Clock()
    lines: list[str] = []
    throttle = Throttle(lines.append, interval=60, clock=clock)
    handle = throttle.loop_errors()
    loop: Any = None
    error = {"message": "socket.accept() out of system resource", "exception": OSError(24, "x")}
    for _ in range(45_000):
        handle(loop, error)
        clock.now += 0.001
    assert len(lines) == 1
    assert lines[0].startswith("socket.accept() out of system resource: OSError")
    clock.now += 60
    handle(loop, error)
    assert len(lines) == 2
    assert "(44999 more like it in the 105 s before, not logged)" in lines[1]
    throttle("another", "another kind")  # each kind has its own interval
    assert lines[-1] == "another kind"


def test_a_throttle_whose_writer_fails_does_not_raise() -> None:
    def broken(line: str) -> None:
        raise OSError(24, "Too many open files")

    Throttle(broken)("kind", "message")


def test_the_watchdog_counts_from_the_due_time_and_any_request_is_a_sign_of_life() -> None:
    clock = Clock()
    dog = Watchdog(limit=300, clock=clock)
    clock.now += 299
    assert dog.stalled_for() is None
    clock.now += 2
    assert dog.stalled_for() == pytest.approx(301)
    dog.beat()  # a cycle started
    stats = RequestStats()
    dog.follow(stats)
    clock.now += 250
    stats.requests["GET"] += 1  # a request sent
    assert dog.stalled_for() is None
    clock.now += 250
    assert dog.stalled_for() is None  # 250 s since that request
    stats.responses["list chatbots", "200"] += 1
    assert dog.stalled_for() is None  # noticed when asked (the probes ask every few seconds)
    clock.now += 299
    assert dog.stalled_for() is None
    clock.now += 2
    assert dog.stalled_for() is not None
    dog.beat()
    dog.due_in(3600)  # a backoff of an hour is no stall
    clock.now += 3600 + 299
    assert dog.stalled_for() is None
