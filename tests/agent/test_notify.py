"""Notifications: retried with backoff, never blocking the loop, the oldest dropped when a
receiver falls behind, nothing secret sent. A real receiver on loopback."""

from __future__ import annotations

import asyncio

from botctl.agent.log import Log, Redactor
from botctl.agent.notify import Notifier
from botctl.agent.status import Metrics
from tests.agent.support import Receiver


def notifier(urls: tuple[str, ...], redact: Redactor, lines: list[str]) -> Notifier:
    return Notifier(
        urls,
        frozenset({"failed", "drift"}),
        redact,
        Log("json", lines.append, redact),
        Metrics(),
        attempts=4,
        base_delay=0.05,
        timeout=2,
    )


def counted(n: Notifier, result: str) -> float:
    value = n.metrics.registry.get_sample_value(
        "botctl_agent_notifications_total", {"result": result}
    )
    return value or 0.0


def test_retried_until_delivered_and_only_the_chosen_events_masked() -> None:
    receiver = Receiver(fail_first=2)
    redact = Redactor({"KEY": "sk-notify-secret-1"}, ["KEY"], {"s3cr3t-value"})
    lines: list[str] = []

    async def run() -> Notifier:
        n = notifier((receiver.url,), redact, lines)
        n.start()
        n.notify("failed", "sync failed: sk-notify-secret-1", error="s3cr3t-value leaked?")
        n.notify("healed", "not chosen")
        await n.close(timeout=10)
        return n

    try:
        n = asyncio.run(run())
    finally:
        receiver.close()
    assert receiver.attempts == 3  # two 500s, then delivered
    (body,) = receiver.bodies
    assert body["event"]["type"] == "failed"
    assert body["text"] == "sync failed: (secret)"
    raw = receiver.raw[0].decode()
    assert "sk-notify-secret-1" not in raw
    assert "s3cr3t-value" not in raw
    assert counted(n, "sent") == 1


def test_a_dead_receiver_never_blocks_and_is_given_up_on() -> None:
    redact = Redactor({}, [], set())
    lines: list[str] = []

    async def run() -> tuple[Notifier, int]:
        # A Slack webhook's path is its credential: never shown.
        n = notifier(("http://127.0.0.1:9/services/T0/B0/hook-credential-77",), redact, lines)
        n.start()
        for i in range(150):  # more than the queue holds
            n.notify("drift", f"drift {i}")
        # notify() only queues: nothing was tried on the caller's time (no await yet).
        tried = int(counted(n, "failed") + counted(n, "sent"))
        await n.close(timeout=3)
        return n, tried

    n, tried = asyncio.run(run())
    assert tried == 0
    assert counted(n, "dropped") == 50
    assert counted(n, "failed") >= 1
    assert any("notification to http://127.0.0.1:9 not delivered" in line for line in lines)
    assert not any("hook-credential-77" in line for line in lines)


def test_chat_markup_from_a_revision_or_the_service_pings_no_one() -> None:
    receiver = Receiver()
    redact = Redactor({}, [], set())

    async def run() -> None:
        n = notifier((receiver.url,), redact, [])
        n.start()
        n.notify("failed", "model '<!channel> <https://evil.example/login|Click here>' & <@U1>")
        await n.close(timeout=10)

    try:
        asyncio.run(run())
    finally:
        receiver.close()
    (body,) = receiver.bodies
    assert body["text"] == (
        "model '&lt;!channel&gt; &lt;https://evil.example/login|Click here&gt;' &amp; &lt;@U1&gt;"
    )
