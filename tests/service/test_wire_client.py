"""The client over its own connections (``service/wire.py``) against what it did before
(httpx's own transport over anyio, still the path when a proxy is configured): each scenario
runs through ``ServiceClient`` against real loopback servers once on each path, and both must
end alike, with the same botctl error text. TLS verified (and refused) as before, a proxy from
the environment used, every timeout enforced as the retry logic expects, a keep-alive
connection the server dropped, a large answer read whole, the bound on connections, the fence
on a kept-alive connection, no descriptor left open, and the key in no log or error."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from pathlib import Path
from typing import Any

import httpx
import pytest

from botctl.errors import BotctlError, ServiceError
from botctl.service import client as client_module
from botctl.service import wire
from botctl.service.client import RetryPolicy, ServiceClient
from tests.service.test_wire import _certificate, answer, request_head, serving, until

KEY = "sk-wire-SECRET-0123456789abcdef"
PATHS = ("wire", "httpx")
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Operation = Callable[[ServiceClient], Awaitable[Any]]


@pytest.fixture(autouse=True)
def _no_proxy_and_fresh_tls(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY", "SSL_CERT_FILE"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    client_module._tls_context.cache_clear()  # built from SSL_CERT_FILE as the test sets it


def make(path: str, url: str, **options: Any) -> ServiceClient:
    """A client on ``path``: "wire" (the default now) or "httpx" (its own transport, as when
    a proxy is configured, and as every request went before)."""
    client_module._tls_context.cache_clear()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(client_module, "proxied", lambda: path == "httpx")
        made = ServiceClient(
            f"{url}/api/v1",
            KEY,
            key_name="WIRE_KEY",
            retry=options.pop("retry", RetryPolicy(max_attempts=2, base_delay=0.001)),
            **options,
        )
    assert (made._direct is None) == (path == "httpx")
    return made


async def outcome(client: ServiceClient, operation: Operation) -> tuple[str, str]:
    """How ``operation`` ended: ("ok", its result) or the botctl error's type and text."""
    async with client:
        try:
            return "ok", repr(await operation(client))
        except ServiceError as exc:
            return type(exc).__name__, str(exc)


def on_both(scenario: Callable[[str], Coroutine[Any, Any, tuple[str, str]]]) -> tuple[str, str]:
    """The scenario's outcome on each path: the same on both, returned."""
    found = {path: asyncio.run(scenario(path)) for path in PATHS}
    assert found["wire"] == found["httpx"]
    return found["wire"]


def chatbots(client: ServiceClient) -> Awaitable[Any]:
    return client.list_chatbots()


def listing(body: bytes = b'{"chatbots": []}') -> Handler:
    """A keep-alive server answering every request with ``body``."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                await request_head(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            writer.write(answer(body))
            await writer.drain()

    return handler


# -- TLS ---------------------------------------------------------------------------------------


def test_https_is_verified_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trusted through ``SSL_CERT_FILE`` (httpx's context honours it): answered. Untrusted,
    or trusted for another name: refused before a byte of the request is sent."""
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    heads: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            heads.append(await request_head(reader))
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            return  # the client refused the certificate
        writer.write(answer(b'{"chatbots": [{"id": "b1"}]}'))
        await writer.drain()

    async def scenario(path: str, host: str = "127.0.0.1") -> tuple[str, str]:
        async with serving(handler, server_side) as url:
            url = url.replace("127.0.0.1", host)
            return await outcome(make(path, url), chatbots)

    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert on_both(scenario) == ("ok", "[{'id': 'b1'}]")
    assert len(heads) == 2
    mismatch = on_both(lambda path: scenario(path, "localhost"))  # the name is not 127.0.0.1
    assert mismatch[0] == "TransportError"
    assert "CERTIFICATE_VERIFY_FAILED" in mismatch[1]
    assert "the request was not sent" in mismatch[1]
    monkeypatch.delenv("SSL_CERT_FILE")
    untrusted = on_both(scenario)
    assert untrusted[0] == "TransportError"
    assert "CERTIFICATE_VERIFY_FAILED" in untrusted[1]
    assert len(heads) == 2  # neither refusal sent a request


def test_https_through_a_proxy_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``HTTPS_PROXY``: the client tunnels through it (CONNECT) and still verifies the
    service's certificate at the far end."""
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    tunnels: list[bytes] = []

    async def go() -> tuple[str, str]:
        async with serving(listing(), server_side) as url, serving(tunnel(tunnels)) as proxy:
            monkeypatch.setenv("HTTPS_PROXY", proxy)
            client_module._tls_context.cache_clear()
            assert wire.proxied()
            client = ServiceClient(f"{url}/api/v1", KEY, key_name="WIRE_KEY")
            return await outcome(client, chatbots)

    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    assert asyncio.run(go()) == ("ok", "[]")
    assert len(tunnels) == 1
    assert tunnels[0].startswith(b"CONNECT 127.0.0.1:")


def tunnel(seen: list[bytes]) -> Handler:
    """An HTTP proxy that only tunnels (CONNECT), as one for https does."""

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await request_head(reader)
        seen.append(head)
        host, _, port = head.split(b" ")[1].decode().rpartition(":")
        far_reader, far_writer = await asyncio.open_connection(host, int(port))
        writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        await asyncio.gather(pipe(reader, far_writer), pipe(far_reader, writer))

    return handler


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        with contextlib.suppress(ConnectionError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
    finally:
        writer.close()


# -- timeouts ----------------------------------------------------------------------------------


def test_a_server_that_never_answers_times_out_and_is_retried() -> None:
    """Accepting and reading the request, or accepting and reading nothing: either way each
    attempt ends at --request-timeout, as a timeout the retry logic retries for a read."""
    requests: list[int] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(1)
        await request_head(reader)
        await asyncio.sleep(30)

    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(1)
        await asyncio.sleep(30)

    for handler in (silent, deaf):

        async def scenario(path: str, handler: Handler = handler) -> tuple[str, str]:
            async with serving(handler) as url:
                return await outcome(make(path, url, timeout=0.3), chatbots)

        kind, text = on_both(scenario)
        assert kind == "TransportError"
        assert "no complete answer to GET /get-chatbots" in text
        assert "within 0.3 s (--request-timeout) (2 attempts)" in text
    assert len(requests) == 2 * 2 * 2  # two servers, two paths, two attempts each


def test_connecting_that_never_completes_times_out() -> None:
    """A listener whose queue is full drops further handshakes: connecting hangs, and the
    attempt ends within the timeout, as a timeout error of the connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    queued = [socket.create_connection(("127.0.0.1", port)) for _ in range(1)]
    try:

        async def scenario(path: str) -> tuple[str, str]:
            client = make(path, f"http://127.0.0.1:{port}", timeout=0.3)
            started = asyncio.get_running_loop().time()
            found = await outcome(client, chatbots)
            assert asyncio.get_running_loop().time() - started < 5
            return found

        kind, text = on_both(scenario)
        assert kind == "TransportError"
        assert "within 0.3 s (--request-timeout) (2 attempts)" in text
    finally:
        for held in queued:
            held.close()
        listener.close()


@pytest.mark.parametrize("path", PATHS)
def test_connect_write_and_pool_timeouts_are_httpx_timeouts(path: str) -> None:
    """Below the client's deadline, each of httpx's own timeouts fires as the exception type
    the retry logic tells apart (a connect or pool timeout: never sent)."""
    transport = (
        wire.AsyncioTransport(ssl_context=ssl.create_default_context(), limits=httpx.Limits())
        if path == "wire"
        else httpx.AsyncHTTPTransport()
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    full = f"http://127.0.0.1:{listener.getsockname()[1]}"
    queued = socket.create_connection(listener.getsockname())

    async def deaf(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(30)  # reads nothing: the request body fills the socket

    async def endless() -> AsyncIterator[bytes]:
        chunk = b"x" * 65536  # one chunk, sent again and again: the test's memory stays small
        for _ in range(4096):
            yield chunk

    timeouts = httpx.Timeout(5.0, write=0.2)

    async def go() -> None:
        async with httpx.AsyncClient(transport=transport) as http:
            with pytest.raises(httpx.ConnectTimeout):
                await http.get(f"{full}/x", timeout=httpx.Timeout(5.0, connect=0.2))
            async with serving(deaf) as url:
                with pytest.raises(httpx.WriteTimeout):
                    await http.post(f"{url}/x", content=endless(), timeout=timeouts)

    try:
        asyncio.run(go())
    finally:
        queued.close()
        listener.close()


# -- connections -------------------------------------------------------------------------------


def test_a_keep_alive_connection_dropped_by_the_server_as_a_request_arrives() -> None:
    """The server answers once, then drops the connection when the next request arrives on
    it (its keep-alive ran out just then): a read is retried on a new connection; a create,
    which may have been applied, is not, and says so."""
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await request_head(reader)
        writer.write(answer(b'{"data": [{"name": "n"}]}'))
        await writer.drain()
        await request_head(reader)
        writer.transport.abort()

    async def scenario(path: str, create: bool) -> tuple[str, str]:
        async with serving(handler) as url:
            client = make(path, url)
            async with client:
                await client.list_attributes("b1")
                if create:
                    return await outcome(client, lambda c: c.create_attribute("b1", {"name": "x"}))
                return await outcome(client, lambda c: c.list_attributes("b1"))

    assert on_both(lambda path: scenario(path, False)) == ("ok", "[{'name': 'n'}]")
    assert len(connections) == 2 * 2
    kind, text = on_both(lambda path: scenario(path, True))
    assert kind == "TransportError"
    assert "may have been applied" in text


def test_a_large_answer_is_read_whole() -> None:
    body = b'{"chatbots": [' + b",".join(b'{"id": "b%06d"}' % i for i in range(120_000)) + b"]}"
    assert len(body) > 8 * wire._HIGH

    async def scenario(path: str) -> tuple[str, str]:
        async with serving(listing(body)) as url:
            found = await outcome(make(path, url, max_response_bytes=8 << 20), chatbots)
            return found[0], str(len(found[1]))

    kind, _ = on_both(scenario)
    assert kind == "ok"

    async def records() -> list[Any]:
        async with (
            serving(listing(body)) as url,
            make("wire", url, max_response_bytes=8 << 20) as client,
        ):
            return await client.list_chatbots()

    found = asyncio.run(records())
    assert len(found) == 120_000
    assert found[-1] == {"id": "b119999"}


def test_connections_are_bounded_and_nothing_is_left_open() -> None:
    """60 requests at once on a client allowing 16 connections: at most 16 reach the server
    at once; after a few hundred requests, some cut short, some timed out, and the client
    closed, the process holds as many descriptors as before."""
    most = [0, 0]  # open now, the most at once

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        most[0] += 1
        most[1] = max(most)
        try:
            while True:
                head = await request_head(reader)
                if b"/cut" in head:
                    writer.transport.abort()
                    return
                if b"/silent" in head:
                    await asyncio.sleep(1)
                    return
                await asyncio.sleep(0.01)
                writer.write(answer(b'{"data": []}'))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            most[0] -= 1
            writer.close()

    async def go(path: str) -> None:
        async with serving(handler) as url:
            before = descriptors()
            async with make(path, url, max_connections=16) as client:
                for _ in range(5):
                    await asyncio.gather(*(client.list_attributes("b") for _ in range(60)))
                bound.append(most[1])
            async with make(path, url, timeout=0.2) as client:
                await client.list_attributes("b")
                for name in ("cut", "silent") * 5:
                    with pytest.raises(ServiceError):
                        await client.list_attributes(name)
            await until(lambda: most[0] == 0)
            await until(lambda: descriptors() <= before)

    bound: list[int] = []
    for path in PATHS:
        most[1] = 0
        asyncio.run(go(path))
    assert len(bound) == 2
    assert all(1 < found <= 16 for found in bound), bound


def test_tls_connections_closed_leave_no_descriptor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each answer says its connection ends (``Connection: close``), and the client closes
    it: 30 TLS connections opened and closed, and the process holds as many descriptors as
    before."""
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    opened = [0]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened[0] += 1
        await request_head(reader)
        writer.write(answer(b'{"data": []}', "Connection: close\r\n"))
        await writer.drain()
        with contextlib.suppress(ConnectionError):
            await reader.read()  # the client closes it, as the answer said
        writer.close()

    async def go(path: str) -> None:
        async with serving(handler, server_side) as url:
            before = descriptors()
            async with make(path, url) as client:
                for _ in range(30):
                    assert await client.list_attributes("b") == []
            await until(lambda: descriptors() <= before)

    for path in PATHS:
        asyncio.run(go(path))
    assert opened[0] == 60


def descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


# -- the fence, the key ------------------------------------------------------------------------


class Refused(BotctlError):
    pass


def test_the_fence_is_asked_on_a_kept_alive_connection_before_it_is_written_to() -> None:
    """The second request goes on the first one's connection: the fence, shut between the
    check before the attempt and the one at the connection, keeps it from the server."""
    heads: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                heads.append(await request_head(reader))
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            writer.write(answer())
            await writer.drain()

    async def scenario(path: str) -> tuple[str, str]:
        asked = [0]

        def fence() -> None:
            asked[0] += 1
            if asked[0] > 3:
                raise Refused(f"fenced at check {asked[0]}")

        async with serving(handler) as url, make(path, url, fence=fence) as client:
            await client.list_attributes("b1")
            try:
                await client.list_attributes("b1")
            except Refused as exc:
                return "Refused", str(exc)
            return "ok", ""

    assert on_both(scenario) == ("Refused", "fenced at check 4")
    assert len(heads) == 2  # one per path: the fenced request never reached the server


def test_the_key_is_in_no_log_or_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With httpx's and httpcore's debug logs on, through a success, a timeout, a cut
    connection and a refused certificate: the key is in none of them, nor in any error."""
    caplog.set_level(logging.DEBUG)
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.transport.abort()

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        await asyncio.sleep(30)

    traced: list[str] = []
    errors: list[str] = []

    async def go(path: str) -> None:
        for handler, tls in ((listing(), None), (cut, None), (silent, None), (cut, server_side)):
            async with serving(handler, tls) as url:
                client = make(path, url, timeout=0.3, trace=traced.append)
                errors.extend(await outcome(client, chatbots))

    for path in PATHS:
        asyncio.run(go(path))
    assert any("CERTIFICATE_VERIFY_FAILED" in text for text in errors)
    assert any("send_request_headers" in record.message for record in caplog.records)
    for text in [*errors, *traced, caplog.text]:
        assert KEY not in text
        assert "SECRET" not in text
