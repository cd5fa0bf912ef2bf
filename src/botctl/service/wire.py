"""The connections under the client: httpcore's pool and HTTP/1.1 over asyncio's own transports.

httpx's default transport reaches its sockets through anyio. Every read and write enters a
cancel scope with a timer of the loop, and the pool, at the start and the end of every request,
asks each idle connection whether the server has closed it: a ``poll(2)`` behind anyio's
attribute lookup, which builds a dictionary of lambdas and calls ``getpeername(2)`` each time.
At 5,001 reads and 8 connections that was a sixth of a large plan's time
(``bench/bench_plan_large.py``; httpx's own issue #3215 measures the same).

Here a connection is an ``asyncio.Protocol``: the loop hands it bytes as they arrive, so
whether an idle connection was closed (or sent something it should not have) is a look at its
buffer, and a read of buffered bytes waits on nothing. The buffer is bounded (reading pauses
above ``_HIGH`` and resumes below ``_LOW``), so a fast sender cannot fill memory faster than
the answer is read and capped (``reply``). Everything else is httpcore's (the pool, keep-alive,
HTTP/1.1 by h11, the ``trace`` extension the fence uses) and httpx's (requests, responses,
errors): the same exception types come out, mapped as httpx maps them.

Used for every connection the client opens itself; a proxy configured in the environment is
left to httpx's own transport (``proxied``).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_HIGH = 256 * 1024  # bytes buffered at which the connection stops reading from its socket
_LOW = 64 * 1024  # ... and below which it reads again
_HAPPY_EYEBALLS = 0.25  # seconds before the next address is tried as well (anyio's default)

# httpcore's errors as httpx's, most specific first (httpx's own transport maps the same).
_ERRORS: tuple[tuple[type[Exception], type[httpx.RequestError]], ...] = (
    (httpcore.ConnectTimeout, httpx.ConnectTimeout),
    (httpcore.ReadTimeout, httpx.ReadTimeout),
    (httpcore.WriteTimeout, httpx.WriteTimeout),
    (httpcore.PoolTimeout, httpx.PoolTimeout),
    (httpcore.TimeoutException, httpx.TimeoutException),
    (httpcore.ConnectError, httpx.ConnectError),
    (httpcore.ReadError, httpx.ReadError),
    (httpcore.WriteError, httpx.WriteError),
    (httpcore.NetworkError, httpx.NetworkError),
    (httpcore.ProxyError, httpx.ProxyError),
    (httpcore.UnsupportedProtocol, httpx.UnsupportedProtocol),
    (httpcore.LocalProtocolError, httpx.LocalProtocolError),
    (httpcore.RemoteProtocolError, httpx.RemoteProtocolError),
    (httpcore.ProtocolError, httpx.ProtocolError),
)


def proxied() -> bool:
    """Whether the environment names a proxy (``HTTPS_PROXY``, ``ALL_PROXY``, ...), which
    httpx honours only with its own transport: then the client keeps that one."""
    found = urllib.request.getproxies()
    return any(found.get(scheme) for scheme in ("http", "https", "all"))


class AsyncioTransport(httpx.AsyncBaseTransport):
    """httpx's ``AsyncHTTPTransport`` without a proxy, over ``AsyncioBackend``."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=AsyncioBackend(),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        assert isinstance(request.stream, httpx.AsyncByteStream)
        url = request.url
        sent = httpcore.Request(
            method=request.method,
            url=httpcore.URL(
                scheme=url.raw_scheme, host=url.raw_host, port=url.port, target=url.raw_path
            ),
            headers=request.headers.raw,
            content=request.stream,
            extensions=request.extensions,
        )
        with _as_httpx(request):
            answer = await self._pool.handle_async_request(sent)
        assert isinstance(answer.stream, AsyncIterable)
        return httpx.Response(
            status_code=answer.status,
            headers=answer.headers,
            stream=_Body(answer.stream, request),
            extensions=answer.extensions,
        )

    async def aclose(self) -> None:
        await self._pool.aclose()


class _Body(httpx.AsyncByteStream):
    """A response body from the pool, its errors mapped to httpx's."""

    def __init__(self, stream: AsyncIterable[bytes], request: httpx.Request) -> None:
        self._stream = stream
        self._request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _as_httpx(self._request):
            async for part in self._stream:
                yield part

    async def aclose(self) -> None:
        closing = getattr(self._stream, "aclose", None)
        if closing is not None:
            with _as_httpx(self._request):
                await closing()


@contextmanager
def _as_httpx(request: httpx.Request) -> Iterator[None]:
    try:
        yield
    except Exception as exc:
        for theirs, ours in _ERRORS:
            if isinstance(exc, theirs):
                raise ours(str(exc), request=request) from exc
        raise


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    """httpcore's network backend on the running asyncio loop's transports."""

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        with _connect_errors():
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_connection(
                    _Connection,
                    host,
                    port,
                    local_addr=(local_address, 0) if local_address else None,
                    happy_eyeballs_delay=_HAPPY_EYEBALLS,
                )
        return _stream(transport, connection, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        with _connect_errors():
            async with asyncio.timeout(timeout):
                transport, connection = await loop.create_unix_connection(_Connection, path)
        return _stream(transport, connection, socket_options)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def _stream(
    transport: asyncio.BaseTransport, connection: _Connection, options: Iterable[Any] | None
) -> AsyncioStream:
    raw = transport.get_extra_info("socket")
    for option in options or ():
        raw.setsockopt(*option)
    return AsyncioStream(connection)


@contextmanager
def _connect_errors() -> Iterator[None]:
    try:
        yield
    except TimeoutError as exc:
        raise httpcore.ConnectTimeout(str(exc) or "timed out connecting") from exc
    except OSError as exc:  # refused, unreachable, no such host, a certificate refused
        raise httpcore.ConnectError(str(exc)) from exc


class _Connection(asyncio.Protocol):
    """One connection's state as the loop reports it: bytes received and not yet read, the
    end of the stream, and whether the socket may be written to."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.ended = False  # the peer closed its side, or the connection is gone
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self.waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) > _HIGH and not self.reading_paused and self.transport is not None:
            self.reading_paused = True
            self.transport.pause_reading()
        self.wake()

    def eof_received(self) -> bool:
        self.ended = True
        self.wake()
        return False  # close the transport: HTTP/1.1 never writes after the server's end

    def connection_lost(self, exc: Exception | None) -> None:
        self.ended = True
        self.error = exc
        self.writing_paused = False
        self.wake()

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        self.wake()

    def wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        if len(self.buffer) <= max_bytes:
            data = bytes(self.buffer)
            self.buffer.clear()
        else:
            data = bytes(self.buffer[:max_bytes])
            del self.buffer[:max_bytes]
        if self.reading_paused and len(self.buffer) < _LOW and self.transport is not None:
            self.reading_paused = False
            self.transport.resume_reading()
        return data

    async def wait(self, timeout: float | None) -> None:
        """Until the loop reports something (bytes, the end, room to write); TimeoutError
        after ``timeout`` seconds."""
        loop = asyncio.get_running_loop()
        waiter = self.waiter = loop.create_future()
        timer = None if timeout is None else loop.call_later(timeout, _expire, waiter)
        try:
            await waiter
        finally:
            self.waiter = None
            if timer is not None:
                timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream):
    """httpcore's view of one connection."""

    def __init__(self, connection: _Connection) -> None:
        self._connection = connection

    @property
    def _transport(self) -> asyncio.Transport:
        assert self._connection.transport is not None
        return self._connection.transport

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        connection = self._connection
        if not connection.buffer and not connection.ended:
            try:
                await connection.wait(timeout)
            except TimeoutError:
                raise httpcore.ReadTimeout("timed out reading") from None
        if connection.buffer:
            return connection.take(max_bytes)
        if connection.error is not None:
            raise httpcore.ReadError(str(connection.error) or type(connection.error).__name__)
        return b""  # the end of the stream: h11 makes of it what it means here

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        connection = self._connection
        if connection.ended or self._transport.is_closing():
            raise httpcore.WriteError("the connection is closed")
        self._transport.write(buffer)
        while connection.writing_paused and not connection.ended:
            try:
                await connection.wait(timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out writing") from None
        if connection.error is not None:
            raise httpcore.WriteError(str(connection.error))

    async def aclose(self) -> None:
        self._transport.close()
        await asyncio.sleep(0)  # the loop closes the socket on its next turn

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        connection = self._connection
        try:
            with _connect_errors():
                async with asyncio.timeout(timeout):
                    secured = await loop.start_tls(
                        self._transport, connection, ssl_context, server_hostname=server_hostname
                    )
        except BaseException:
            self._transport.close()
            raise
        assert isinstance(secured, asyncio.Transport)
        connection.transport = secured
        return AsyncioStream(connection)

    def get_extra_info(self, info: str) -> Any:
        connection = self._connection
        if info == "is_readable":  # by httpcore's pool: has an idle connection been closed?
            return bool(connection.buffer) or connection.ended
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._transport.get_extra_info("socket")
        return None
