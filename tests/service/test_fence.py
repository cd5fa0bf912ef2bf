"""The client's fence (the agent's lease): asked before every request and every retry, and once
more on the open connection right before the first byte is written; when it refuses, nothing
reaches the service and its error is the request's."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from botctl.errors import BotctlError
from botctl.service.client import ServiceClient
from tests.service.test_client import FakeTime, Script, make, reply


class Refused(BotctlError):
    pass


class Fence:
    """Passes its first ``passes`` checks, then refuses every one; counts them."""

    def __init__(self, passes: int) -> None:
        self.passes = passes
        self.asked = 0

    def __call__(self) -> None:
        self.asked += 1
        if self.asked > self.passes:
            raise Refused(f"not sent: fenced at check {self.asked}")


def update(client: ServiceClient) -> None:
    async def go() -> None:
        async with client:
            await client.update_settings("bot-1", {"temp": 0.3})

    asyncio.run(go())


def test_a_fence_that_refuses_keeps_the_request_from_being_sent() -> None:
    script = Script(reply(200))
    fence = Fence(passes=0)
    with pytest.raises(Refused, match="fenced at check 1"):
        update(make(script, fence=fence))
    assert script.requests == []


def test_each_retry_is_fenced_anew() -> None:
    script = Script(reply(503), reply(200))
    fence = Fence(passes=1)  # the first attempt goes out; its retry finds the fence shut
    time = FakeTime()
    with pytest.raises(Refused, match="fenced at check 2"):
        update(make(script, time, fence=fence))
    assert len(script.requests) == 1
    assert len(time.sleeps) == 1  # it backed off, then asked the fence before the retry


def test_an_open_fence_lets_every_attempt_through() -> None:
    script = Script(reply(503), reply(503), reply(200))
    fence = Fence(passes=1000)
    update(make(script, fence=fence))
    assert len(script.requests) == 3
    assert fence.asked == 3  # an in-memory transport has no socket: once per attempt


@pytest.mark.parametrize("passes", [1, 2])
def test_over_http_the_fence_is_asked_again_right_before_the_request_is_written(
    sandbox: Any, passes: int
) -> None:
    """Over a real connection the fence is asked twice per attempt: before the attempt, and
    on the connection once it is open (connecting may take a while). Shut at the second
    check, nothing reaches the service."""
    admin = f"{sandbox.url}/_sandbox"
    httpx.post(f"{admin}/chatbots", json={"id": "bot-1", "account": "test-key"}, timeout=10)
    fence = Fence(passes=passes)
    client = ServiceClient(sandbox.api_url, "test-key", fence=fence)
    if passes == 1:
        with pytest.raises(Refused, match="fenced at check 2"):
            update(client)
    else:
        update(client)
    log = httpx.get(f"{admin}/requests", timeout=10).json()["requests"]
    assert len(log) == passes - 1
    assert fence.asked == 2
