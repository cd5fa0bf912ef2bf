"""ServiceClient against httpx.MockTransport: shapes, retries, pacing, errors, secret hygiene.

Time is virtual (``FakeTime``): sleeps are recorded and advance a fake clock, so no test waits
or depends on timing.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import zlib
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from email.utils import formatdate
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from botctl.errors import (
    AmbiguousApiError,
    ApiError,
    BotctlError,
    ReadsUnavailable,
    ServiceError,
    TransportError,
)
from botctl.service.client import RetryPolicy, ServiceClient
from botctl.service.pacing import Pacer
from botctl.service.redact import Redactor, secret_forms
from botctl.service.retry import parse_reset, parse_retry_after

KEY = "sk-test-SECRET-0123456789abcdef"
BASE = "https://api.example.test/api/v1"
Step = Callable[[httpx.Request], httpx.Response]


class FakeTime:
    """Virtual monotonic and wall clocks; ``sleep`` records and advances both."""

    def __init__(self, *, advance: bool = True) -> None:
        self.now = 1000.0
        self.wall = 1_700_000_000.0
        self.sleeps: list[float] = []
        self.advance = advance

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(round(seconds, 6))
        if self.advance:
            self.now += seconds
            self.wall += seconds
        await asyncio.sleep(0)

    def clock(self) -> float:
        return self.now

    def wall_clock(self) -> float:
        return self.wall

    def policy(self, *, rand: float = 0.5, **kwargs: Any) -> RetryPolicy:
        return RetryPolicy(
            sleep=self.sleep,
            random=lambda: rand,
            clock=self.clock,
            wall_clock=self.wall_clock,
            **kwargs,
        )


class Script:
    """A mock service answering with the given steps in order (the last one repeats)."""

    def __init__(self, *steps: Step) -> None:
        self.steps = list(steps)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        step = self.steps.pop(0) if len(self.steps) > 1 else self.steps[0]
        return step(request)


def reply(status: int = 200, body: Any = None, headers: dict[str, str] | None = None) -> Step:
    def step(request: httpx.Request) -> httpx.Response:
        if isinstance(body, str):
            return httpx.Response(status, text=body, headers=headers)
        payload = {"message": "Success"} if body is None else body
        return httpx.Response(status, json=payload, headers=headers)

    return step


def fail(kind: type[httpx.TransportError], message: str = "boom") -> Step:
    def step(request: httpx.Request) -> httpx.Response:
        raise kind(message, request=request)

    return step


def make(
    script: Script, time: FakeTime | None = None, trace: list[str] | None = None, **kwargs: Any
) -> ServiceClient:
    time = time or FakeTime()
    return ServiceClient(
        BASE,
        KEY,
        key_name="SUPPORT_BOT_KEY",
        transport=httpx.MockTransport(script),
        retry=kwargs.pop("retry", time.policy()),
        trace=trace.append if trace is not None else None,
        **kwargs,
    )


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(coro)


async def call(client: ServiceClient, op: str, *args: Any) -> Any:
    async with client:
        return await getattr(client, op)(*args)


def catch(client: ServiceClient, op: str, *args: Any) -> ServiceError:
    with pytest.raises(ServiceError) as info:
        run(call(client, op, *args))
    return info.value


# -- requests and shapes -----------------------------------------------------------------------


def test_request_headers_url_quoting_and_trailing_slash() -> None:
    script = Script(reply(200, {"message": "Success", "data": {"name": "a b"}}))
    client = ServiceClient(BASE + "/", KEY, transport=httpx.MockTransport(script))
    run(call(client, "update_attribute", "bot/1 x", "a b", {"label": "L", "archived": False}))
    request = script.requests[0]
    assert request.method == "PUT"
    assert request.url.raw_path == b"/api/v1/chatbots/bot%2F1%20x/custom-attributes/a%20b"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    assert request.headers["user-agent"].startswith("botctl/")
    assert json.loads(request.content) == {"label": "L", "archived": False}


@pytest.mark.parametrize(
    "body",
    [
        {"chatbots": [{"id": "a"}, {"id": "b"}]},
        {"chatbots": {"data": [{"id": "a"}, {"id": "b"}]}},
    ],
)
def test_list_chatbots_accepts_both_shapes(body: dict[str, Any]) -> None:
    script = Script(reply(200, body))
    records = run(call(make(script), "list_chatbots"))
    assert records == [{"id": "a"}, {"id": "b"}]
    assert script.requests[0].url.path == "/api/v1/get-chatbots"


def test_list_chatbots_rejects_an_unknown_shape() -> None:
    error = catch(make(Script(reply(200, {"bots": 3}))), "list_chatbots")
    assert type(error) is ServiceError
    assert str(error) == (
        "read chatbot list failed: unexpected answer to GET /get-chatbots: "
        """expected {"chatbots": [...]}, got an object with keys 'bots'"""
    )


def test_list_attributes_returns_data() -> None:
    attrs = [{"name": "plan_tier", "type": "text"}]
    script = Script(reply(200, {"message": "Success", "data": attrs}))
    assert run(call(make(script), "list_attributes", "bot1")) == attrs
    assert script.requests[0].url.path == "/api/v1/chatbots/bot1/custom-attributes"


@pytest.mark.parametrize("status", [200, 202, 204])
def test_update_settings_sends_chatbot_id_and_fields(status: int) -> None:
    script = Script(reply(status, {"message": "Your changes are saved."}))
    run(call(make(script), "update_settings", "bot1", {"name": "N", "styles": {"theme": "dark"}}))
    request = script.requests[0]
    assert (request.method, request.url.path) == ("POST", "/api/v1/update-chatbot-settings")
    assert json.loads(request.content) == {
        "chatbotId": "bot1",
        "name": "N",
        "styles": {"theme": "dark"},
    }


def test_create_attribute_returns_data() -> None:
    data = {"name": "plan_tier", "type": "text", "label": "Plan", "archived": False}
    script = Script(reply(200, {"message": "Success", "data": data}))
    assert run(call(make(script), "create_attribute", "bot1", data)) == data
    assert script.requests[0].method == "POST"


def test_responses_are_counted_by_operation_without_what_it_names() -> None:
    """The counts feed the agent's Prometheus labels: one series per kind of operation, never
    one per attribute or contact (a rename updates every contact)."""
    script = Script(reply(200, {"message": "Success", "data": {}}))
    client = make(script)

    async def calls() -> None:
        async with client:
            for contact in ("c1", "c2", "c3"):
                await client.update_contact("bot1", contact, {"tier": "pro"})
            for name in ("plan", "tier"):
                await client.create_attribute("bot1", {"name": name, "type": "text"})
                await client.update_attribute("bot1", name, {"label": name})
            await client.request(
                "GET", "/widgets/w1", "read widget w1", "read", label="read widget"
            )
            await client.request("GET", "/things", "read things", "read")

    run(calls())
    assert dict(client.stats.responses) == {
        ("update contact", "200"): 3,
        ("create attribute", "200"): 2,
        ("update attribute", "200"): 2,
        ("read widget", "200"): 1,
        ("read things", "200"): 1,
    }


# -- retries -----------------------------------------------------------------------------------


def test_429_with_retry_after_seconds_waits_exactly_that() -> None:
    time = FakeTime()
    script = Script(reply(429, {"message": "Rate limit exceeded"}, {"Retry-After": "3"}), reply())
    client = make(script, time)
    run(call(client, "update_settings", "bot1", {"name": "N"}))
    assert len(script.requests) == 2
    assert time.sleeps == [3.0]
    assert client.stats.retries == 1


def test_429_with_retry_after_http_date() -> None:
    time = FakeTime()
    when = formatdate(time.wall + 7, usegmt=True)
    script = Script(reply(429, headers={"Retry-After": when}), reply(200, {"chatbots": []}))
    run(call(make(script, time), "list_chatbots"))
    assert time.sleeps == [pytest.approx(7.0, abs=1.0)]


def test_429_with_rate_limit_headers_waits_until_reset() -> None:
    time = FakeTime()
    reset_ms = str(int((time.wall + 4.5) * 1000))
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset_ms}
    script = Script(reply(429, headers=headers), reply(200, {"data": []}))
    run(call(make(script, time), "list_attributes", "bot1"))
    assert time.sleeps == [pytest.approx(4.5)]
    assert len(script.requests) == 2


def test_server_hint_is_capped_at_max_delay() -> None:
    time = FakeTime()
    script = Script(reply(429, headers={"Retry-After": "3600"}), reply())
    run(call(make(script, time, retry=time.policy(max_delay=10)), "update_settings", "b", {}))
    assert time.sleeps == [10.0]


def test_429_without_headers_backs_off_exponentially_with_jitter() -> None:
    time = FakeTime()
    script = Script(*[reply(429)] * 4, reply())
    run(call(make(script, time, retry=time.policy(rand=0.5)), "update_settings", "b", {}))
    # full jitter: random (0.5) x min(max_delay, 0.5 * 2**(n-1))
    assert time.sleeps == [0.25, 0.5, 1.0, 2.0]


@pytest.mark.parametrize("rand", [0.0, 0.999])
def test_backoff_stays_within_bounds(rand: float) -> None:
    policy = RetryPolicy(base_delay=0.5, max_delay=3.0, random=lambda: rand)
    for attempt in range(1, 10):
        ceiling = min(3.0, 0.5 * 2 ** (attempt - 1))
        assert 0.0 <= policy.backoff(attempt) <= ceiling


@pytest.mark.parametrize("status", [500, 502, 503, 504])
@pytest.mark.parametrize(
    ("op", "args"),
    [
        ("update_settings", ("bot1", {"name": "N"})),
        ("update_attribute", ("bot1", "tier", {"label": "T", "archived": False})),
        ("list_attributes", ("bot1",)),
    ],
)
def test_5xx_is_retried_on_idempotent_operations(status: int, op: str, args: tuple[Any]) -> None:
    script = Script(reply(status, {"message": "Internal server error"}), reply(200, {"data": []}))
    run(call(make(script), op, *args))
    assert len(script.requests) == 2


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_5xx_on_create_is_ambiguous_and_not_retried(status: int) -> None:
    script = Script(reply(status, {"message": "Internal server error"}), reply())
    error = catch(make(script), "create_attribute", "bot1", {"name": "tier", "type": "text"})
    assert isinstance(error, AmbiguousApiError)
    assert isinstance(error, ApiError)
    assert error.status == status
    assert error.outcome_unknown
    assert "create attribute tier" in str(error)
    assert len(script.requests) == 1


def test_429_on_create_is_retried_because_it_was_not_applied() -> None:
    script = Script(reply(429), reply(200, {"message": "Success", "data": {"name": "tier"}}))
    result = run(call(make(script), "create_attribute", "bot1", {"name": "tier", "type": "text"}))
    assert result == {"name": "tier"}
    assert len(script.requests) == 2


@pytest.mark.parametrize("kind", [httpx.ConnectError, httpx.ConnectTimeout])
def test_connect_error_on_create_is_retried(kind: type[httpx.TransportError]) -> None:
    script = Script(fail(kind), reply(200, {"message": "Success", "data": {"name": "tier"}}))
    run(call(make(script), "create_attribute", "bot1", {"name": "tier", "type": "text"}))
    assert len(script.requests) == 2


@pytest.mark.parametrize(
    "kind", [httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteTimeout]
)
def test_ambiguous_transport_failure_on_create_raises_at_once(
    kind: type[httpx.TransportError],
) -> None:
    script = Script(fail(kind), reply())
    error = catch(make(script), "create_attribute", "bot1", {"name": "tier", "type": "text"})
    assert isinstance(error, TransportError)
    assert error.outcome_unknown
    assert error.chatbot_id == "bot1"
    assert len(script.requests) == 1


@pytest.mark.parametrize(
    "kind", [httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ConnectError, httpx.ReadError]
)
def test_transport_failures_are_retried_on_idempotent_operations(
    kind: type[httpx.TransportError],
) -> None:
    script = Script(fail(kind), reply(200, {"chatbots": []}))
    assert run(call(make(script), "list_chatbots")) == []
    assert len(script.requests) == 2


def test_gives_up_after_max_attempts_with_the_last_status() -> None:
    time = FakeTime()
    script = Script(reply(503, {"message": "Service unavailable"}))
    client = make(script, time, retry=time.policy(max_attempts=4))
    error = catch(client, "update_settings", "bot1", {})
    assert isinstance(error, ApiError)
    assert error.status == 503
    assert "Service unavailable" in str(error)
    assert "after 4 attempt(s)" in str(error)
    assert len(script.requests) == 4
    assert len(time.sleeps) == 3
    assert client.stats.retries == 3


def test_gives_up_after_max_attempts_with_the_last_transport_error() -> None:
    script = Script(fail(httpx.ConnectError, "Connection refused"))
    error = catch(make(script), "list_chatbots")
    assert isinstance(error, TransportError)
    assert not error.outcome_unknown
    assert "not sent" in str(error)
    assert "Connection refused" in str(error)
    assert len(script.requests) == 5


def test_timeout_after_retries_is_outcome_unknown() -> None:
    error = catch(make(Script(fail(httpx.ReadTimeout))), "update_settings", "bot1", {})
    assert isinstance(error, TransportError)
    assert error.outcome_unknown


def test_non_retryable_statuses_are_not_retried() -> None:
    script = Script(reply(400, {"message": "Invalid request data"}))
    catch(make(script), "update_settings", "bot1", {"temp": 9})
    assert len(script.requests) == 1


# -- pacing ------------------------------------------------------------------------------------


def test_pacer_gives_concurrent_callers_distinct_evenly_spaced_slots() -> None:
    time = FakeTime(advance=False)  # frozen clock: every wait is measured from the same instant
    pacer = Pacer(4.0, time.clock, time.sleep)

    async def main() -> list[float]:
        return list(await asyncio.gather(*[pacer.acquire() for _ in range(5)]))

    assert sorted(run(main())) == [0.0, 0.25, 0.5, 0.75, 1.0]


def test_pacer_off_never_waits() -> None:
    time = FakeTime()
    pacer = Pacer(0.0, time.clock, time.sleep)

    async def main() -> None:
        for _ in range(20):
            assert await pacer.acquire() == 0.0

    run(main())
    assert time.sleeps == []


def test_pacer_gate_raised_during_a_wait_is_honoured() -> None:
    time = FakeTime()
    pacer = Pacer(1.0, time.clock, time.sleep)

    async def main() -> float:
        await pacer.acquire()
        waiter = asyncio.create_task(pacer.acquire())
        await asyncio.sleep(0)  # the waiter takes slot t+1 and sleeps (clock is now t+1)
        pacer.block_for(5.0)  # raised at t+1: nothing may start before t+6
        return await waiter

    assert run(main()) == pytest.approx(6.0)


def test_client_rate_limit_paces_concurrent_requests() -> None:
    time = FakeTime(advance=False)
    script = Script(reply(200, {"data": []}))
    client = make(script, time, rate_limit=2.0)

    async def main() -> None:
        async with client:
            await asyncio.gather(*[client.list_attributes(f"b{i}") for i in range(5)])

    run(main())
    assert sorted(time.sleeps) == [0.5, 1.0, 1.5, 2.0]
    assert client.stats.pace_wait == pytest.approx(5.0)
    assert client.stats.requests["GET"] == 5


def test_exhausted_window_holds_later_requests_until_reset() -> None:
    time = FakeTime()
    reset_ms = str(int((time.wall + 2) * 1000))
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": reset_ms}
    script = Script(reply(200, {"data": []}, headers), reply(200, {"data": []}))
    client = make(script, time)

    async def main() -> None:
        async with client:
            await client.list_attributes("a")
            await client.list_attributes("b")

    run(main())
    assert time.sleeps == [pytest.approx(2.0)]
    assert client.stats.pace_wait == pytest.approx(2.0)
    assert client.stats.retries == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1700000003000", 3.0), ("1700000003", 3.0), ("3", 3.0), ("1699999990000", 0.0), ("x", None)],
)
def test_parse_reset_units(value: str, expected: float | None) -> None:
    assert parse_reset(value, 1_700_000_000.0) == expected


def test_parse_retry_after_garbage_is_ignored() -> None:
    assert parse_retry_after("soon", 0.0) is None


# -- error translation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "message", "hint"),
    [
        (400, "Invalid request data", None),
        (401, "Unauthorized access", "check the API key in $SUPPORT_BOT_KEY"),
        (403, "Access denied or quota exceeded", "quota"),
        (404, "Resource not found", "chatbot not found in the account of $SUPPORT_BOT_KEY"),
        (429, "Rate limit exceeded", "rate limited 5 times"),
        (500, "Internal server error", "try again later"),
    ],
)
def test_error_statuses_become_located_api_errors(
    status: int, message: str, hint: str | None
) -> None:
    error = catch(make(Script(reply(status, {"message": message}))), "update_settings", "bot1", {})
    assert type(error) is ApiError
    assert error.status == status
    assert error.service_message == message
    assert error.chatbot_id == "bot1"
    text = str(error)
    assert text.startswith(f"chatbot bot1: update settings failed: HTTP {status}: {message}")
    if hint:
        assert hint in text


def test_attribute_not_found_hint() -> None:
    script = Script(reply(404, {"message": "Custom attribute not found"}))
    error = catch(make(script), "update_attribute", "bot1", "tier", {"archived": True})
    assert "update attribute tier failed: HTTP 404" in str(error)
    assert "attribute not found on this chatbot" in str(error)


def test_non_json_error_body_is_quoted_as_a_short_excerpt() -> None:
    html = "<html><body><p>" + "Bad gateway " * 100 + "</p></body></html>"
    script = Script(reply(418, html))
    error = catch(make(script), "update_settings", "bot1", {})
    assert isinstance(error, ApiError)
    assert error.service_message.startswith("Bad gateway Bad gateway")  # text, not markup
    assert len(error.service_message) <= 200


def test_an_html_error_page_is_quoted_by_its_title() -> None:
    page = (
        "<!DOCTYPE html>\n<html><head><title>502 Bad Gateway &amp; more</title></head>"
        "<body><h1>502</h1><pre>upstream stack trace ...</pre></body></html>"
    )
    headers = {"Content-Type": "text/html; charset=utf-8"}
    error = catch(make(Script(reply(502, page, headers))), "list_chatbots")
    assert isinstance(error, ApiError)
    assert error.service_message == "502 Bad Gateway & more"


def test_unsupported_url_scheme_is_a_transport_error_without_retry() -> None:
    client = ServiceClient("ftp://host/api/v1", KEY, retry=FakeTime().policy())
    error = catch(client, "list_chatbots")
    assert isinstance(error, TransportError)
    assert not error.outcome_unknown
    assert client.stats.requests["GET"] == 1


@pytest.mark.parametrize(
    ("op", "args", "status", "message"),
    [
        ("list_chatbots", (), 405, "Method not allowed"),
        ("list_chatbots", (), 501, "Not implemented"),
        ("list_attributes", ("bot1",), 404, "Not Found"),
        ("list_attributes", ("bot1",), 405, ""),
    ],
)
def test_reads_unavailable(op: str, args: tuple[Any], status: int, message: str) -> None:
    script = Script(reply(status, {"message": message}))
    error = catch(make(script), op, *args)
    assert isinstance(error, ReadsUnavailable)
    assert error.status == status
    assert len(script.requests) == 1


def test_chatbot_not_found_on_attribute_read_is_a_plain_api_error() -> None:
    error = catch(
        make(Script(reply(404, {"message": "Chatbot not found"}))), "list_attributes", "x"
    )
    assert type(error) is ApiError
    assert error.status == 404


def test_a_404_on_a_write_is_never_reads_unavailable() -> None:
    error = catch(
        make(Script(reply(404, {"message": "Resource not found"}))), "update_settings", "x", {}
    )
    assert type(error) is ApiError


# -- tracing and secret hygiene ----------------------------------------------------------------


def test_trace_lines_show_request_and_response_with_masked_key() -> None:
    lines: list[str] = []
    script = Script(reply(500), reply(202, {"message": "Your changes are saved."}))
    run(call(make(script, trace=lines), "update_settings", "bot1", {"name": "N"}))
    assert len(lines) == 4
    sent, answered = lines[0], lines[1]
    assert sent.startswith(f"-> POST {BASE}/update-chatbot-settings attempt 1/5")
    assert "Authorization: Bearer ***" in sent
    assert 'body={"chatbotId": "bot1", "name": "N"}' in sent
    assert answered.startswith(f"<- 500 POST {BASE}/update-chatbot-settings")
    assert "ms attempt 1/5" in answered
    assert lines[3].startswith("<- 202 POST")
    assert "Your changes are saved." in lines[3]
    assert "attempt 2/5" in lines[2]


SECRET_SCENARIOS: list[tuple[str, tuple[Any, ...], Step]] = [
    ("list_chatbots", (), reply(401, {"message": "No API key provided."})),
    ("list_chatbots", (), reply(401, {"message": f"Invalid key {KEY}"})),
    ("list_chatbots", (), reply(200, f"not json, echo Authorization: Bearer {KEY}")),
    ("update_settings", ("b", {}), reply(500, f"<pre>Bearer {KEY}</pre>")),
    ("update_settings", ("b", {}), reply(403, {"message": "Access denied or quota exceeded"})),
    ("create_attribute", ("b", {"name": "n"}), reply(502, {"error": f"upstream saw {KEY}"})),
    ("list_attributes", ("b",), reply(404, {"message": "Chatbot not found"})),
    ("list_attributes", ("b",), reply(405, {"message": f"{KEY}"})),
    ("list_attributes", ("b",), fail(httpx.ConnectError, f"refused for {KEY}")),
    ("update_attribute", ("b", "n", {}), fail(httpx.ReadTimeout, "timed out")),
    ("create_attribute", ("b", {"name": "n"}), fail(httpx.RemoteProtocolError, KEY)),
]


@pytest.mark.parametrize(("op", "args", "step"), SECRET_SCENARIOS)
def test_the_key_appears_in_no_error_trace_or_repr(
    op: str, args: tuple[Any, ...], step: Step
) -> None:
    lines: list[str] = []
    client = make(Script(step), trace=lines)
    assert KEY not in repr(client)
    error = catch(client, op, *args)
    texts = [str(error), repr(error), *map(str, error.args), *lines, repr(client)]
    texts += [str(v) for v in vars(error).values()]
    assert lines
    for text in texts:
        assert KEY not in text
    assert any("Bearer ***" in line for line in lines)


def test_outcome_unknown_lives_on_the_errors_that_have_it() -> None:
    assert not ApiError("x", 500, "m").outcome_unknown
    assert AmbiguousApiError("x", 500, "m").outcome_unknown
    assert not TransportError("x", "m", outcome_unknown=False).outcome_unknown
    assert TransportError("x", "m").outcome_unknown


def test_tls_context_is_built_once_and_never_trusts_less() -> None:
    import ssl

    from botctl.service.client import _verify_for

    shared = _verify_for("https://api.example.test/api/v1")
    assert _verify_for("https://other.example.test/api/v1") is shared
    assert shared.verify_mode == ssl.CERT_REQUIRED
    assert shared.check_hostname
    plain = _verify_for("http://127.0.0.1:8080/api/v1")
    assert plain.verify_mode == ssl.CERT_REQUIRED
    assert plain.check_hostname
    assert plain.get_ca_certs() == []  # trusts nothing: it is never meant to be used


# -- keys a header cannot carry ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        (KEY + "\n", "contains a line break"),
        ("sk-test\r\nX-Injected: 1", "contains a line break"),
        (" " + KEY, "starts or ends with whitespace"),
        (KEY + "\t", "starts or ends with whitespace"),
        ("sk test", "contains a space or a tab"),
        ("sk-\x00test", "contains a control character"),
        ("sk-tëst-€", "contains a character outside ASCII"),
    ],
)
def test_a_key_no_header_can_carry_is_refused_naming_the_variable(key: str, problem: str) -> None:
    with pytest.raises(BotctlError) as info:
        ServiceClient(BASE, key, key_name="SUPPORT_BOT_KEY")
    text = str(info.value)
    assert f"$SUPPORT_BOT_KEY {problem}" in text
    assert "nothing was sent" in text
    for part in ("sk-test", "sk test", "tëst", "SECRET"):
        assert part not in text


# -- bounded answers ---------------------------------------------------------------------------


class Drip(httpx.AsyncByteStream):
    """A streamed body: ``parts`` in order, each after ``pause`` seconds; counts what was read."""

    def __init__(self, parts: Iterable[bytes], pause: float = 0.0) -> None:
        self.parts = parts
        self.pause = pause
        self.sent = 0

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for part in self.parts:
            if self.pause:
                await asyncio.sleep(self.pause)
            self.sent += len(part)
            yield part


def streamed(stream: Drip, headers: dict[str, str] | None = None) -> Step:
    def step(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, stream=stream, headers=headers)

    return step


def zeros_gzipped(size: int) -> Iterator[bytes]:
    """A gzip stream of ``size`` zero bytes, produced as it is read (a bomb of any size)."""
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    block = bytes(1 << 20)
    for _ in range(size >> 20):
        if out := packer.compress(block):
            yield out
    yield packer.flush()


@pytest.mark.parametrize(
    ("op", "args", "doubt"),
    [
        ("list_chatbots", (), False),
        ("update_settings", ("bot1", {"name": "N"}), True),
        ("create_attribute", ("bot1", {"name": "tier"}), True),
    ],
)
def test_an_answer_over_the_cap_stops_reading_and_is_not_retried(
    op: str, args: tuple[Any, ...], doubt: bool
) -> None:
    stream = Drip(iter(lambda: b"x" * 65536, None))  # endless, no Content-Length
    script = Script(streamed(stream))
    error = catch(make(script, max_response_bytes=1 << 20), op, *args)
    assert isinstance(error, TransportError)
    assert "is larger than 1 MiB (--max-response-bytes); botctl stopped reading it" in str(error)
    assert ("the change may have been applied" in str(error)) is doubt
    assert len(script.requests) == 1
    assert stream.sent <= (1 << 20) + 65536


def test_a_declared_length_over_the_cap_is_refused_before_reading() -> None:
    stream = Drip([b"{}"])
    script = Script(streamed(stream, {"Content-Length": str(3 << 30)}))
    error = catch(make(script, max_response_bytes=1 << 20), "list_chatbots")
    assert "larger than 1 MiB" in str(error)
    assert stream.sent == 0


def test_a_gzip_bomb_is_cut_off_at_the_cap_of_decoded_bytes() -> None:
    stream = Drip(zeros_gzipped(1 << 30))  # 1 GiB of zeros in about 1 MB
    script = Script(streamed(stream, {"Content-Encoding": "gzip"}))
    error = catch(make(script, max_response_bytes=4 << 20), "list_attributes", "bot1")
    assert "read attributes failed: the answer to GET /chatbots/bot1/custom-attributes" in str(
        error
    )
    assert "larger than 4 MiB" in str(error)
    assert stream.sent < 64 << 10  # a few KiB of gzip were enough to pass 4 MiB


def test_a_gzipped_answer_within_the_cap_is_decoded() -> None:
    body = json.dumps({"chatbots": [{"id": "a"}]}).encode()
    stream = Drip([gzip.compress(body, mtime=0)[:5], gzip.compress(body, mtime=0)[5:]])
    script = Script(streamed(stream, {"Content-Encoding": "gzip"}))
    assert run(call(make(script), "list_chatbots")) == [{"id": "a"}]
    assert script.requests[0].headers["accept-encoding"] == "gzip, deflate"


@pytest.mark.parametrize(
    ("encoding", "body", "expected"),
    [
        ("gzip", b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03" + b"\xff" * 9, "corrupt gzip"),
        ("gzip", gzip.compress(b'{"chatbots": []}', mtime=0)[:-12], "the gzip data ends early"),
        ("br", b"\x0b\x02\x80{}\x03", "Content-Encoding 'br', which botctl did not ask for"),
        ("gzip, gzip, gzip", b"", "encoded 3 times over"),
    ],
)
def test_an_answer_that_cannot_be_decoded_is_a_clear_error(
    encoding: str, body: bytes, expected: str
) -> None:
    script = Script(streamed(Drip([body]), {"Content-Encoding": encoding}))
    error = catch(make(script), "list_chatbots")
    assert isinstance(error, TransportError)
    assert "the answer to GET /get-chatbots could not be decoded" in str(error)
    assert expected in str(error)
    assert len(script.requests) == 1  # the same bytes would come again


def test_a_dripping_answer_ends_at_the_deadline_of_each_attempt() -> None:
    time = FakeTime()  # backoff sleeps are virtual; the deadline is the loop's real clock
    stream = Drip(iter(lambda: b" ", None), pause=0.02)  # a byte every 20 ms, forever
    script = Script(streamed(stream))
    client = make(script, time, timeout=0.1, retry=time.policy(max_attempts=3))
    error = run(asyncio.wait_for(_failure(client, "list_chatbots"), timeout=60))
    assert isinstance(error, TransportError)
    assert str(error) == (
        "read chatbot list failed: no complete answer to GET /get-chatbots from "
        "api.example.test within 0.1 s (--request-timeout) (3 attempts)"
    )
    assert len(script.requests) == 3  # each attempt had its own deadline, within the budget
    assert len(time.sleeps) == 2


def test_a_deadline_on_a_create_is_not_retried_and_may_have_applied() -> None:
    script = Script(streamed(Drip(iter(lambda: b" ", None), pause=0.02)))
    client = make(script, timeout=0.1)
    error = run(
        asyncio.wait_for(_failure(client, "create_attribute", "b", {"name": "n"}), timeout=60)
    )
    assert isinstance(error, TransportError)
    assert "within 0.1 s (--request-timeout); the change may have been applied" in str(error)
    assert error.outcome_unknown
    assert len(script.requests) == 1


async def _failure(client: ServiceClient, op: str, *args: Any) -> ServiceError:
    try:
        await call(client, op, *args)
    except ServiceError as exc:
        return exc
    raise AssertionError("no error")


# -- wrong shapes ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("op", "body", "expected"),
    [
        ("list_chatbots", "", "HTTP 200 with an empty body"),
        ("list_chatbots", "   \n", "HTTP 200 with an empty body"),
        ("list_chatbots", '{"chatbots": [', "not JSON (text/plain; charset=utf-8): {"),
        ("list_chatbots", "<html><title>Sign in</title></html>", "not JSON (text/plain"),
        ("list_chatbots", '{"chatbots": [{"id": NaN}]}', "not JSON"),
        ("list_chatbots", '{"chatbots": [{"temp": 1e999}]}', "not JSON"),
        ("list_chatbots", '{"chatbots": [{"ipLimit": ' + "9" * 5000 + "}]}", "not JSON"),
        ("list_chatbots", "[" * 100_000 + "]" * 100_000, "JSON nested deeper than 32 levels"),
        ("list_chatbots", '{"chatbots": ' + "[" * 40 + "]" * 40 + "}", "nested deeper than 32"),
        ("list_chatbots", b'{"chatbots": "\xff\xfe"}', "not JSON"),
        ("list_chatbots", '"chatbots"', "got a string ('chatbots')"),
        ("list_chatbots", '{"chatbots": null}', 'expected {"chatbots": [...]}, got null'),
        ("list_chatbots", '{"chatbots": {"data": 7}}', "got a number"),
        ("list_chatbots", '{"chatbots": ["a", "b"]}', "item 1 of the chatbot list is a string"),
        ("list_chatbots", '{"chatbots": [{}, [1]]}', "item 2 of the chatbot list is a list of 1"),
        ("list_attributes", "[]", None),
        ("list_attributes", '{"data": {"name": "x"}}', "got an object with keys 'name'"),
        ("list_attributes", '{"data": [true]}', "item 1 of the attribute list is a boolean"),
        ("list_attributes", '{"message": "Success"}', "got an object with keys 'message'"),
    ],
)
def test_wrong_shapes_are_located_errors(op: str, body: str | bytes, expected: str | None) -> None:
    def step(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=body, headers={"Content-Type": "text/plain; charset=utf-8"}
        )

    args = ("bot1",) if op == "list_attributes" else ()
    if expected is None:
        assert run(call(make(Script(step)), op, *args)) == []
        return
    error = catch(make(Script(step)), op, *args)
    assert type(error) is ServiceError
    path = "/chatbots/bot1/custom-attributes" if args else "/get-chatbots"
    assert f"unexpected answer to GET {path}: " in str(error)
    assert expected in str(error)
    assert len(str(error)) < 400


# -- redirects and wrong URLs ------------------------------------------------------------------


def test_a_redirect_is_not_followed_and_says_where_it_pointed() -> None:
    script = Script(reply(302, "", {"Location": "https://elsewhere.test/api/v1/get-chatbots"}))
    error = catch(make(script), "list_chatbots")
    assert isinstance(error, ApiError)
    assert error.status == 302
    assert "redirected to https://elsewhere.test/api/v1/get-chatbots" in str(error)
    assert "is --api-url the service's own base address?" in str(error)
    assert len(script.requests) == 1


def test_a_404_on_the_chatbot_list_names_the_url_without_its_credentials() -> None:
    script = Script(reply(404, {"message": "Not Found"}))
    client = ServiceClient(
        "https://user:pa55@wrong.test/api/v1", KEY, transport=httpx.MockTransport(script)
    )
    error = catch(client, "list_chatbots")
    assert type(error) is ApiError
    assert "nothing answers GET https://wrong.test/api/v1/get-chatbots: is --api-url right?" in (
        str(error)
    )
    assert "pa55" not in str(error)


def test_with_reads_off_a_read_sends_nothing() -> None:
    script = Script(reply(200, {"chatbots": []}))
    client = ServiceClient(BASE, KEY, transport=httpx.MockTransport(script), reads=False)
    error = catch(client, "list_attributes", "bot1")
    assert isinstance(error, ReadsUnavailable)
    assert error.status is None
    assert "--no-reads" in str(error)
    assert script.requests == []
    assert client.refused_reads == {}


def test_refused_reads_are_counted_for_the_plan_warnings() -> None:
    script = Script(reply(405, {"message": "Method not allowed"}))
    client = make(script)

    async def main() -> None:
        async with client:
            for chatbot_id in ("a", "b"):
                with pytest.raises(ReadsUnavailable):
                    await client.list_attributes(chatbot_id)

    run(main())
    assert client.refused_reads == {("read attributes", 405): 2}


# -- every form of a secret --------------------------------------------------------------------

ODD_KEY = 'sk-live/0dd+"key"\\with=chars%41'
ODD_SECRET = 'hunter2 "quoted"\nline'


def echoes(kind: str) -> Step:
    """A service that quotes what it received back, in one of the ways services do."""

    def step(request: httpx.Request) -> httpx.Response:
        auth = request.headers["authorization"]
        sent = request.content.decode()
        if kind == "json":
            return httpx.Response(400, json={"message": f"bad auth {auth}; body {sent}"})
        if kind == "percent":
            target = "https://login.test/?next=" + quote(auth, safe="") + "&b=" + quote(sent)
            return httpx.Response(302, headers={"Location": target})
        if kind == "repr":
            return httpx.Response(500, text=f"<pre>{auth!r} {json.loads(sent)!r}</pre>")
        if kind == "bytes":
            return httpx.Response(401, text=repr(auth.encode()))
        raise httpx.RemoteProtocolError(f"peer said {auth!r}", request=request)

    return step


@pytest.mark.parametrize("kind", ["json", "percent", "repr", "bytes", "transport"])
def test_escaped_and_percent_encoded_forms_of_key_and_secrets_are_redacted(kind: str) -> None:
    lines: list[str] = []
    client = ServiceClient(
        BASE,
        ODD_KEY,
        transport=httpx.MockTransport(Script(echoes(kind))),
        retry=FakeTime().policy(max_attempts=1),
        trace=lines.append,
        redactor=Redactor(secrets=frozenset({ODD_SECRET})),
    )
    error = catch(client, "update_settings", "bot1", {"instructions": f"say {ODD_SECRET}"})
    texts = [str(error), *lines]
    combined = "\n".join(texts)
    forms = {*secret_forms(ODD_KEY), *secret_forms(ODD_SECRET), "0dd+", "hunter2"}
    for form in forms:
        assert form not in combined, form
    assert "***" in combined or "(secret)" in combined
    assert "(secret)" in lines[0]  # the request body's secret, JSON-escaped in the trace
