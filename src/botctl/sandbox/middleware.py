"""The gate every /api/v1 request passes: request log, latency, rate limit (on the operations
the contract limits), faults.

Pure ASGI (no BaseHTTPMiddleware) so that it can hold a response back, replace it, or drop
the connection half-way - which a higher-level response object cannot express.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import parse_qsl

import httpx
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from botctl import contract
from botctl.sandbox.faults import Fault, fault_message
from botctl.sandbox.ratelimit import is_limited
from botctl.sandbox.runtime import Runtime
from botctl.sandbox.web import DETAIL_KEY


class DroppedConnection(httpx.RemoteProtocolError):
    """Raised after the response head was sent, to cut the connection mid-response.

    Under uvicorn the client sees headers with a Content-Length and then EOF, which httpx
    reports as RemoteProtocolError. In-process (httpx.ASGITransport re-raises app errors) the
    client gets this very exception, which is the same httpx type - so callers handle both
    paths alike. `server.py` keeps uvicorn from logging it as a crash.
    """


def _json_message(status: int, text: str, headers: dict[str, str]) -> list[Message]:
    body = json.dumps({"message": text}).encode()
    raw = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    return [
        {"type": "http.response.start", "status": status, "headers": raw},
        {"type": "http.response.body", "body": body},
    ]


def _body_for_log(raw: bytes) -> Any:
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", errors="replace")


def _token(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            return token.strip() or None if scheme.lower() == "bearer" else None
    return None


class V1Gate:
    def __init__(self, app: ASGIApp, runtime: Runtime) -> None:
        self.app = app
        self.rt = runtime

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith(contract.API_PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        raw = await _read_body(receive)
        method, path = scope["method"], scope["path"]
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1"), True))
        entry = self.rt.log.record(method, path, query, _body_for_log(raw))
        if self.rt.config.latency_ms:
            await asyncio.sleep(self.rt.config.latency_ms / 1000)

        extra: dict[str, str] = {}
        token = _token(scope)
        limited = is_limited(path.removeprefix(contract.API_PREFIX))
        if self.rt.limiter.enabled and token is not None and limited:
            decision = self.rt.limiter.check(token)
            extra = decision.headers(window=self.rt.config.rate_limit_headers)
            if not decision.allowed:
                entry["status"] = 429
                for msg in _json_message(429, contract.MSG_RATE_LIMITED, extra):
                    await send(msg)
                return

        fault = self.rt.faults.take(method, path)
        if fault is not None:
            entry["fault"] = fault.when
        if fault is not None and fault.when == "before":
            await asyncio.sleep(fault.latency_ms / 1000)
            if fault.status is not None or fault.drop:
                await _inflict(fault, send, entry, extra)
                return
            fault = None  # a pure delay: the request then proceeds normally

        held: list[Message] = []

        replayed = False

        async def replay() -> Message:
            # The body once, then the real channel: a streaming response waits on it for the
            # client's disconnect, and must not spin on a body that never ends.
            nonlocal replayed
            if replayed:
                return await receive()
            replayed = True
            return {"type": "http.request", "body": raw, "more_body": False}

        async def capture(message: Message) -> None:
            if message["type"] == "http.response.start":
                entry["status"] = message["status"]
                message = {
                    **message,
                    "headers": [
                        *message.get("headers", []),
                        *[(k.lower().encode(), v.encode()) for k, v in extra.items()],
                    ],
                }
            if fault is None:
                await send(message)
            else:
                held.append(message)

        await self.app(scope, replay, capture)
        entry["detail"] = scope.get(DETAIL_KEY)
        if fault is None:
            return
        await asyncio.sleep(fault.latency_ms / 1000)
        if fault.status is not None or fault.drop:
            await _inflict(fault, send, entry, extra)
            return
        for message in held:
            await send(message)


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _inflict(fault: Fault, send: Send, entry: dict[str, Any], extra: dict[str, str]) -> None:
    if fault.drop:
        entry["status"] = None
        # Promise a body and never deliver it: the client sees a truncated response.
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"64")],
            }
        )
        raise DroppedConnection("sandbox fault: connection dropped")
    assert fault.status is not None
    headers = dict(extra)
    if fault.retry_after is not None:
        headers["Retry-After"] = f"{fault.retry_after:g}"
    entry["status"] = fault.status
    for msg in _json_message(fault.status, fault_message(fault.status), headers):
        await send(msg)
