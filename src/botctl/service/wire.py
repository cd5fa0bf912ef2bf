"""The connections under the client: httpcore's HTTP/1.1 over asyncio's own transports, kept
by a pool of its own.

httpx's default transport reaches its sockets through anyio. Every read and write enters a
cancel scope with a timer of the loop, and httpcore's pool, at the start and the end of every
request, goes over every connection, asking each idle one whether the server has closed it: a
``poll(2)`` behind anyio's attribute lookup, which builds a dictionary of lambdas and calls
``getpeername(2)`` each time. At 5,001 reads and 8 connections that was a third of a large
plan's time (``bench/bench_plan_large.py``; httpx's own issue #3215 measures the same).

Here a connection is an ``asyncio.Protocol``: the loop hands it bytes as they arrive, so
whether an idle connection was closed (or sent something it should not have) is a look at its
buffer, and a read of buffered bytes waits on nothing. The buffer is bounded (reading pauses
above ``_HIGH`` and resumes below ``_LOW``), so a fast sender cannot fill memory faster than
the answer is read and capped (``reply``). ``Pool`` keeps the connections at a constant cost
per request. The rest is httpcore's (connecting, TLS, keep-alive expiry, HTTP/1.1 by h11, the
``trace`` extension the fence uses) and httpx's (requests, responses, errors): the same
exception types come out, mapped as httpx maps them.

Used for every connection the client opens itself; a proxy configured in the environment is
left to httpx's own transport (``proxied``).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

import httpcore
import httpx

_HIGH = 256 * 1024  # bytes buffered at which the connection stops reading from its socket
_LOW = 64 * 1024  # ... and below which it reads again
_UNBOUNDED = 1 << 30  # httpx.Limits' None
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
    """httpx's ``AsyncHTTPTransport`` without a proxy: HTTP/1.1 connections of httpcore's
    over ``AsyncioBackend``, kept by a ``Pool``."""

    def __init__(self, *, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._pool = Pool(ssl_context, limits)

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


class Pool:
    """HTTP/1.1 connections kept alive for reuse: what httpcore's ``AsyncConnectionPool``
    does for HTTP/1.1, at a constant cost a request.

    httpcore's pool goes over every connection at the start and the end of each request
    (whether it expired, whether it is idle, and for each idle one how many are idle) and
    hands each request its connection through an anyio event: with 8 requests at once, a
    tenth of a read's time. Here a request takes the connection of its origin used last (the
    one least likely to have been closed by the server), after asking it, as httpcore does,
    whether its keep-alive expired or the server closed it; or opens one. At most
    ``max_connections`` are in use at once (a request waits for one within the ``pool``
    timeout); at most ``max_keepalive_connections`` wait idle, beyond which a connection is
    closed once its response is."""

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        self._ssl_context = ssl_context
        self._expiry = limits.keepalive_expiry
        keep, most = limits.max_keepalive_connections, limits.max_connections
        self._keep = _UNBOUNDED if keep is None else keep
        self._in_use = asyncio.Semaphore(_UNBOUNDED if most is None else most)
        # By origin (scheme, host, port): the connections waiting for a request, last used last.
        self._idle: dict[tuple[bytes, bytes, int], list[httpcore.AsyncHTTPConnection]] = {}
        self._busy: set[httpcore.AsyncHTTPConnection] = set()  # closed too when the pool is
        self._backend = AsyncioBackend()
        self._closed = False

    async def handle_async_request(self, request: httpcore.Request) -> httpcore.Response:
        if request.url.scheme not in (b"http", b"https"):
            raise httpcore.UnsupportedProtocol(f"{request.url.scheme!r} is not http or https")
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        timeout = request.extensions.get("timeout", {}).get("pool")
        try:
            async with asyncio.timeout(timeout):
                await self._in_use.acquire()
        except TimeoutError:
            raise httpcore.PoolTimeout("no connection free within the pool timeout") from None
        origin, connection = request.url.origin, None
        try:
            while True:
                connection = await self._connection(origin)
                self._busy.add(connection)
                try:
                    response = await connection.handle_async_request(request)
                except httpcore.ConnectionNotAvailable:  # not idle after all: never reused
                    self._busy.discard(connection)
                    await connection.aclose()
                    continue
                break
        except BaseException:
            await self._done(origin, connection)
            raise
        return httpcore.Response(
            status=response.status,
            headers=response.headers,
            content=_Returned(response.stream, lambda: self._done(origin, connection)),
            extensions=response.extensions,
        )

    async def _connection(self, origin: httpcore.Origin) -> httpcore.AsyncHTTPConnection:
        idle = self._idle.get(_key(origin))
        while idle:
            connection = idle.pop()
            if connection.is_available() and not connection.has_expired():
                return connection
            await connection.aclose()
        return httpcore.AsyncHTTPConnection(
            origin,
            ssl_context=self._ssl_context,
            keepalive_expiry=self._expiry,
            network_backend=self._backend,
        )

    async def _done(
        self, origin: httpcore.Origin, connection: httpcore.AsyncHTTPConnection | None
    ) -> None:
        """A request is over (its response closed, or it failed): its connection waits for
        the next one, or is closed."""
        self._in_use.release()
        if connection is None:
            return
        self._busy.discard(connection)
        idle = self._idle.setdefault(_key(origin), [])
        if connection.is_available() and len(idle) < self._keep and not self._closed:
            idle.append(connection)
        else:
            await connection.aclose()

    async def aclose(self) -> None:
        self._closed = True
        # Those in use too, as httpcore's pool does: a request still running (its task
        # abandoned, say) ends with a connection error rather than keep its socket open.
        every = [connection for stack in self._idle.values() for connection in stack]
        every += self._busy
        self._idle.clear()
        self._busy.clear()
        for connection in every:
            await connection.aclose()


def _key(origin: httpcore.Origin) -> tuple[bytes, bytes, int]:
    return origin.scheme, origin.host, origin.port


class _Returned:
    """A response body from a connection of the pool, which gets the connection back once
    the body is closed (or its reading failed)."""

    def __init__(self, stream: Any, done: Callable[[], Awaitable[None]]) -> None:
        self._stream = stream
        self._done = done
        self._closed = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for part in self._stream:
                yield part
        except BaseException:
            await self.aclose()
            raise

    async def aclose(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            await self._stream.aclose()
        finally:
            await self._done()


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
