"""One HTTP answer, received within bounds, and what it holds.

httpx would read a whole body into memory, however large: a 3 GB answer took botctl to
12.7 GB, a 2 MB gzip bomb to 6.7 GB. ``receive`` streams the raw body, decodes it in bounded
steps (``service.inflate``) and stops as soon as the decoded bytes pass the cap. The whole-answer
deadline is the caller's (the client wraps each attempt in one).

Failures are ``httpx.RequestError`` subclasses, so the client's retry rules and error
translation treat them like any other answer that could not be used.

Reading the body is strict too: JSON that is not JSON (``NaN``, ``Infinity``, numbers no float
holds) or that nests deeper than any answer of this API is refused rather than carried on into
plans, state and JSON output.
"""

from __future__ import annotations

import html
import json
import math
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from botctl.service.inflate import Decoder

# Deeper JSON is no answer of this API (its deepest is ~5 levels) and would only make every
# later step recurse.
MAX_JSON_DEPTH = 32
_HEAD = 64 * 1024  # of a body quoted in a message, which shows 200 characters anyway
_TITLE = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]*>")


class ResponseTooLarge(httpx.RequestError):
    """The decoded body passed the cap (``together``: the answers read at once passed their
    shared cap); reading stopped there."""

    def __init__(self, limit: int, *, request: httpx.Request, together: bool = False) -> None:
        self.limit = limit
        self.together = together
        super().__init__(f"the answer is larger than {format_size(limit)}", request=request)


class InFlight:
    """The decoded bytes of every answer being read at once, against one shared cap.

    One cap per answer is not enough: ``--parallelism`` answers may grow together, each
    just under it (64 gzip bombs would hold 2 GiB). Sharing a second cap among the clients
    of a run bounds the whole. It is far above what honest answers ever reach together (the
    largest is the chatbot list, read once per key), so it only ever stops a service that
    is sending far too much; nothing waits on it, so nothing can deadlock on it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0


class DeadlineExceeded(httpx.TimeoutException):
    """No complete answer within the per-attempt deadline (raised by the caller)."""


class NestedTooDeep(ValueError):
    """JSON nested deeper than ``MAX_JSON_DEPTH``."""

    def __init__(self) -> None:
        super().__init__(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")


@dataclass(frozen=True)
class Reply:
    """A received answer: status, headers and the whole decoded body."""

    status_code: int
    reason_phrase: str
    headers: httpx.Headers
    content: bytes
    # Seconds from sending the request to the first byte of the body (None: no body), and to
    # the last: what a conversation test measures (time to first event, answer time).
    first_byte: float | None = None
    elapsed: float = 0.0

    @property
    def is_success(self) -> bool:
        return 200 <= self.status_code < 300

    def json(self) -> Any:
        """The body as strict JSON; ``ValueError`` when it is not (syntax, encoding, NaN,
        numbers no float or int holds) and ``NestedTooDeep`` when it nests too deep."""
        try:
            body = json.loads(self.content, parse_constant=_refuse_constant, parse_float=_finite)
        except RecursionError:  # the parser's own limit (~1000 levels): deeper still
            raise NestedTooDeep() from None
        # JSON cannot nest deeper than it has brackets: most answers (an attribute list) have
        # too few to need the walk, and counting them is done in C.
        brackets = self.content.count(b"[") + self.content.count(b"{")
        if brackets > MAX_JSON_DEPTH and _deeper_than(body, MAX_JSON_DEPTH):
            raise NestedTooDeep()
        return body

    def maybe_json(self) -> Any:
        """The body as JSON, or None when it is not JSON."""
        try:
            return self.json()
        except ValueError:
            return None

    def readable(self) -> str:
        """The start of the body as text; an HTML page as its title, or its text."""
        text = self.content[:_HEAD].decode("utf-8", errors="replace")
        kind = self.headers.get("content-type", "").lower()
        if "html" in kind or text.lstrip().startswith("<"):
            title = _TITLE.search(text)
            text = title.group(1) if title and title.group(1).strip() else _TAG.sub(" ", text)
            text = html.unescape(text)
        return text

    def service_message(self) -> str:
        """The service's own words: its JSON ``message`` (or ``error``), else the body's text."""
        body = self.maybe_json()
        if isinstance(body, dict):
            for key in ("message", "error"):
                if isinstance(body.get(key), str) and body[key]:
                    return str(body[key])
        return self.readable()


async def receive(
    exchange: Callable[[httpx.Request], Awaitable[httpx.Response]],
    request: httpx.Request,
    *,
    max_bytes: int,
    in_flight: InFlight,
) -> Reply:
    """Send ``request`` by ``exchange`` (which returns the response with its body unread) and
    read its answer, decoded, refusing more than ``max_bytes`` and more than what
    ``in_flight`` has left."""
    started = time.monotonic()
    response = await exchange(request)
    reading = _Reading(request, max_bytes, in_flight)
    try:
        content = await reading.body(response)
    finally:
        in_flight.used -= reading.size  # the bytes are kept or freed by the caller now
        # An error's traceback keeps this frame, and with it the pieces, alive for as long
        # as the error lives: let go of them here (64 failed answers would keep 2 GiB).
        reading.parts.clear()
        await response.aclose()
    first = None if reading.first_at is None else reading.first_at - started
    return Reply(
        response.status_code,
        response.reason_phrase,
        response.headers,
        content,
        first_byte=first,
        elapsed=time.monotonic() - started,
    )


class _Reading:
    """One body being read: its pieces, counted against both caps as they arrive."""

    def __init__(self, request: httpx.Request, max_bytes: int, in_flight: InFlight) -> None:
        self.request = request
        self.max_bytes = max_bytes
        self.in_flight = in_flight
        self.parts: list[bytes] = []
        self.size = 0
        self.first_at: float | None = None

    def take(self, piece: bytes) -> None:
        if self.first_at is None and piece:
            self.first_at = time.monotonic()
        self.size += len(piece)
        self.in_flight.used += len(piece)
        if self.size > self.max_bytes:
            raise ResponseTooLarge(self.max_bytes, request=self.request)
        if self.in_flight.used > self.in_flight.limit:
            raise ResponseTooLarge(self.in_flight.limit, request=self.request, together=True)
        self.parts.append(piece)

    async def body(self, response: httpx.Response) -> bytes:
        if response.is_stream_consumed:
            # An in-memory transport (httpx.MockTransport) hands over a body it already
            # holds: nothing left to bound but its size.
            self.take(response.content)
            return response.content
        decoder = Decoder(response.headers.get("content-encoding", ""), self.request)
        declared = response.headers.get("content-length", "")
        if not decoder.layers and declared.isdigit() and int(declared) > self.max_bytes:
            raise ResponseTooLarge(self.max_bytes, request=self.request)  # need not read it
        async for raw in response.aiter_raw():
            for piece in decoder.feed(raw):
                self.take(piece)
        for piece in decoder.finish():
            self.take(piece)
        return b"".join(self.parts)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:20]} is out of range")
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether JSON nests deeper than ``limit`` (iterative: the point is not to recurse)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > limit:
            return True
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return False


def format_size(count: int) -> str:
    """Bytes as people write them: ``32 MiB`` when exact, the byte count otherwise."""
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if count >= size and count % size == 0:
            return f"{count // size} {unit}"
    return f"{count} bytes"
