"""The client's connections (``service/wire.py``): httpcore's pool over asyncio's transports,
against real loopback servers in the test's own event loop: plain and TLS, a connection the
server closed while idle, a body faster than it is read, each failure as httpx's error, and a
proxy from the environment still honoured (by httpx's own transport)."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpcore
import httpx
import pytest

from botctl.service import wire
from botctl.service.client import ServiceClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
LIMITS = httpx.Limits(max_connections=4, max_keepalive_connections=4)
BODY = b'{"data": []}'


def answer(body: bytes = BODY, extra: str = "") -> bytes:
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
    return head.encode() + body


async def request_head(reader: asyncio.StreamReader) -> bytes:
    return await reader.readuntil(b"\r\n\r\n")


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"
    finally:
        server.close()


def client(context: ssl.SSLContext | None = None, **timeouts: float) -> httpx.AsyncClient:
    transport = wire.AsyncioTransport(
        ssl_context=context or ssl.create_default_context(), limits=LIMITS
    )
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5.0, **timeouts))


async def until(condition: Callable[[], bool]) -> None:
    """A bounded poll on something the test can observe."""
    for _ in range(500):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


def test_requests_on_one_kept_alive_connection() -> None:
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            try:
                await request_head(reader)
            except asyncio.IncompleteReadError:
                return
            writer.write(answer())

    async def go() -> None:
        async with serving(handler) as url, client() as http:
            for _ in range(5):
                response = await http.get(f"{url}/x")
                assert response.status_code == 200
                assert response.content == BODY

    asyncio.run(go())
    assert connections == [1]


def test_an_idle_connection_the_server_closed_is_not_used_again() -> None:
    """The pool asks an idle connection whether it is readable before reusing it: one the
    server closed is, and a new connection carries the next request (no error)."""
    connections: list[int] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        await request_head(reader)
        writer.write(answer())  # keep-alive as far as the client knows ...
        await writer.drain()
        writer.close()  # ... then closed while idle

    async def go() -> None:
        async with serving(handler) as url, client() as http:
            first = await http.get(f"{url}/x")
            stream = first.extensions["network_stream"]
            await until(lambda: bool(stream.get_extra_info("is_readable")))
            second = await http.get(f"{url}/x")
            assert second.content == BODY

    asyncio.run(go())
    assert len(connections) == 2


def test_a_body_faster_than_it_is_read_is_buffered_within_bounds() -> None:
    size = 8 * 1024 * 1024

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(answer(b"x" * size))
        await writer.drain()

    async def go() -> None:
        async with serving(handler) as url, client() as http:
            async with http.stream("GET", f"{url}/big") as response:
                chunks = response.aiter_raw()
                received = len(await anext(chunks))
                connection = response.extensions["network_stream"]._connection
                await until(lambda: connection.reading_paused)
                # Paused at the high-water mark: at most one socket read beyond it.
                assert len(connection.buffer) <= wire._HIGH + 256 * 1024
                async for chunk in chunks:
                    received += len(chunk)
            assert received == size

    asyncio.run(go())


def test_failures_are_httpx_errors() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        await asyncio.sleep(5)

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(answer(b"x" * 100)[:-50])  # half the body, then gone
        await writer.drain()
        writer.close()

    async def garbage(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"this is no HTTP\r\n\r\n")
        await writer.drain()

    async def go() -> None:
        async with serving(silent) as url, client(read=0.2) as http:
            with pytest.raises(httpx.ReadTimeout) as timed_out:
                await http.get(f"{url}/x")
            assert timed_out.value.request.url.path == "/x"
        async with serving(cut) as url, client() as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(f"{url}/x")
        async with serving(garbage) as url, client() as http:
            with pytest.raises(httpx.RemoteProtocolError):
                await http.get(f"{url}/x")
        async with serving(silent) as url:
            closed = url  # nothing listens on its port once the server is closed
        async with client() as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"{closed}/x")

    asyncio.run(go())


def _certificate(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert, private = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert, private


def test_tls_verified_against_the_given_context(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    server_side = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_side.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await request_head(reader)
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the client refused the certificate
        writer.write(answer())
        await writer.drain()

    async def go() -> None:
        async with serving(handler, server_side) as url:
            async with client(trusting) as http:
                response = await http.get(f"{url}/x")
                assert response.content == BODY
                assert response.extensions["network_stream"].get_extra_info("ssl_object")
            async with client(ssl.create_default_context()) as http:  # the system's CAs
                with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                    await http.get(f"{url}/x")

    asyncio.run(go())


def test_a_proxy_in_the_environment_is_still_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx honours HTTP(S)_PROXY only with its own transport: the client keeps that one
    then, and the request goes to the proxy."""
    lines: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await request_head(reader)
        lines.append(head.split(b"\r\n")[0])
        writer.write(answer(b'{"chatbots": []}'))
        await writer.drain()

    async def go() -> Any:
        async with serving(proxy) as url:
            for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
                monkeypatch.delenv(name, raising=False)
            monkeypatch.setenv("HTTP_PROXY", url)
            assert wire.proxied()
            async with ServiceClient("http://api.example.test/api/v1", "key-1") as service:
                return await service.list_chatbots()

    assert asyncio.run(go()) == []
    assert lines == [b"GET http://api.example.test/api/v1/get-chatbots HTTP/1.1"]


def test_no_proxy_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    assert not wire.proxied()
    monkeypatch.setenv("https_proxy", "http://proxy.test:3128")
    assert wire.proxied()


class Counting:
    """A keep-alive server that counts connections: open now, the most at once, all opened;
    each answer waits until ``release`` is set (set by default)."""

    def __init__(self) -> None:
        self.open = 0
        self.most = 0
        self.opened = 0
        self.release = asyncio.Event()
        self.release.set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.opened += 1
        self.most = max(self.most, self.open)
        try:
            while True:
                try:
                    await request_head(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    return
                await self.release.wait()
                writer.write(answer())
                await writer.drain()
        finally:
            self.open -= 1


def limited(connections: int, keep: int, **options: Any) -> httpx.AsyncClient:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=keep, **options)
    transport = wire.AsyncioTransport(ssl_context=ssl.create_default_context(), limits=limits)
    return httpx.AsyncClient(transport=transport, timeout=httpx.Timeout(5.0))


def test_connections_in_use_are_bounded_and_idle_ones_kept_within_their_bound() -> None:
    server = Counting()

    async def go() -> None:
        async with serving(server) as url, limited(3, 2) as http:
            server.release.clear()
            requests = [asyncio.create_task(http.get(f"{url}/x")) for _ in range(10)]
            await until(lambda: server.opened == 3)  # the fourth waits for a free connection
            server.release.set()
            answers = await asyncio.gather(*requests)
            assert [a.content for a in answers] == [BODY] * 10
            await until(lambda: server.open == 2)  # the rest closed: two may wait idle
            opened = server.opened
            await http.get(f"{url}/x")  # on one of them
            assert server.opened == opened

    asyncio.run(go())
    assert server.most == 3


def test_waiting_for_a_connection_is_bounded_by_the_pool_timeout() -> None:
    server = Counting()

    async def go() -> None:
        async with serving(server) as url, limited(1, 1) as http:
            server.release.clear()
            held = asyncio.create_task(http.get(f"{url}/x"))
            await until(lambda: server.opened == 1)
            with pytest.raises(httpx.PoolTimeout):
                await http.get(f"{url}/x", timeout=httpx.Timeout(5.0, pool=0.05))
            server.release.set()
            assert (await held).content == BODY

    asyncio.run(go())


def test_a_connection_idle_past_its_keep_alive_is_not_used_again() -> None:
    server = Counting()

    async def go() -> None:
        async with serving(server) as url, limited(2, 2, keepalive_expiry=0.05) as http:
            await http.get(f"{url}/x")
            await asyncio.sleep(0.1)  # at least the expiry: only ever more expired
            await http.get(f"{url}/x")

    asyncio.run(go())
    assert server.opened == 2


def test_a_request_cancelled_or_failed_gives_its_connection_back() -> None:
    """With one connection allowed, a request cancelled while waiting for its answer, one
    whose answer was cut short and one whose body was left half read all leave the pool
    able to serve the next: nothing holds the only connection."""
    server = Counting()

    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Le")
        await writer.drain()
        writer.close()

    async def go() -> None:
        async with serving(server) as url, limited(1, 1) as http:
            server.release.clear()
            waiting = asyncio.create_task(http.get(f"{url}/x"))
            await until(lambda: server.opened == 1)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            server.release.set()
            assert (await http.get(f"{url}/x")).content == BODY
            async with http.stream("GET", f"{url}/x") as response:
                assert response.status_code == 200  # closed with its body unread
            assert (await http.get(f"{url}/x")).content == BODY
            async with serving(cut) as broken:
                with pytest.raises(httpx.RemoteProtocolError):
                    await http.get(f"{broken}/x")
            assert (await http.get(f"{url}/x")).content == BODY

    asyncio.run(go())


def test_closing_the_transport_closes_its_idle_connections() -> None:
    server = Counting()

    async def go() -> None:
        async with serving(server) as url:
            async with limited(4, 4) as http:
                await asyncio.gather(*(http.get(f"{url}/x") for _ in range(3)))
                assert server.open == 3
            await until(lambda: server.open == 0)

    asyncio.run(go())


def test_closing_the_transport_closes_the_connections_in_use_too() -> None:
    """As httpcore's pool does: a request still waiting for its answer when its client is
    closed (its task abandoned, say) ends with a connection error; its socket is closed."""
    seen: list[str] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_head(reader)
        seen.append("request")
        await reader.read()  # never answers; returns once the client closed its side
        seen.append("closed")

    async def go() -> None:
        async with serving(handler) as url:
            http = limited(2, 2)
            waiting = asyncio.create_task(http.get(f"{url}/x", timeout=60))  # only closing ends it
            await until(lambda: seen == ["request"])
            await http.aclose()
            await until(lambda: seen == ["request", "closed"])
            with pytest.raises(httpx.TransportError):
                await waiting

    asyncio.run(go())


def test_a_connection_found_unavailable_is_closed_not_dropped(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Defensive: should a connection taken from the pool refuse the request after all, it
    is closed (not left with its socket open) and the request goes on a new one."""
    server = Counting()
    refused: list[Any] = []
    original = httpcore.AsyncHTTPConnection.handle_async_request

    async def once_unavailable(self: Any, request: Any) -> Any:
        if not refused:
            refused.append(self)
            raise httpcore.ConnectionNotAvailable()
        return await original(self, request)

    async def go() -> None:
        async with serving(server) as url, limited(2, 2) as http:
            await http.get(f"{url}/x")  # one connection, idle now
            monkeypatch.setattr(
                httpcore.AsyncHTTPConnection, "handle_async_request", once_unavailable
            )
            assert (await http.get(f"{url}/x")).content == BODY
            assert refused[0].is_closed()
            await until(lambda: server.open == 1)

    asyncio.run(go())
    assert server.opened == 2
