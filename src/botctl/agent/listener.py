"""What the agent serves on ``--listen`` (loopback unless told otherwise):

- ``GET /healthz``: 200 while the loop moves; 503 once it has made no progress for
  ``--watchdog`` past the time its next cycle was due (``status.Watchdog``), so that a
  supervisor restarts a stuck process;
- ``GET /readyz``: 200 while this replica plays its role, active (holds the lease) or standby
  (ready to take it over); 503 while starting and stopping. The service's health is not
  readiness: it is in ``/status`` and ``/metrics``;
- ``GET /metrics``: Prometheus text format (``status.Metrics``);
- ``GET /status``: the agent's status as JSON; ``GET /``: the status page (both behind the
  control token whenever one is configured or the listener is not on loopback: ``auth``);
- ``POST /control/sync``, ``/control/suspend``, ``/control/resume``: ``botctl agent sync``
  and the others (``steering``), with the control token as a bearer token, on the active
  replica (a standby answers 503 naming the lease holder);
- ``POST /hooks/git``: a push triggers a cycle (``hooks``): credentials judged from the headers
  before any body is read, the body read under a deadline and a size cap, a delivery seen
  before acknowledged and ignored, a standby answering 503 (a proxy retries the other
  replica).

Every request passes the ``Host`` check first (``hosts``); every body passes through the
``Redactor``: no key or secret value is ever served. The server is uvicorn's, with the
connection guard (``guard``) as its protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from botctl.agent import hooks
from botctl.agent.auth import Access, Refusal
from botctl.agent.guard import ConnectionGuard
from botctl.agent.hosts import AllowedHosts
from botctl.agent.log import Redactor
from botctl.agent.page import render_page
from botctl.agent.status import CONTROL_ACTIONS, AgentStatus
from botctl.agent.steering import Conflict, Steering
from botctl.agent.steering import Request as ControlRequest
from botctl.values import json_controls_escaped

MAX_HOOK_BYTES = 1 << 20  # a push's body; GitHub caps its payloads at 25 MB, pushes are small
MAX_CONTROL_BYTES = 16 * 1024  # a control request's body: a reason and a name
MAX_REASON = 1000  # characters of a control request's reason
MAX_BY = 200  # characters of who sent it
OPEN_ACCESS = Access(None, loopback=True, variable="BOTCTL_CONTROL_TOKEN")
BODY_TIMEOUT = 10.0  # seconds to receive a webhook's whole body
HEAD_TIMEOUT = 10.0  # seconds to receive a request's line and headers
KEEP_ALIVE = 5.0  # seconds an idle kept-alive connection stays open (uvicorn's default)
MAX_HEAD_BYTES = 16 * 1024  # a request line and headers (h11's incomplete-event cap)
SHUTDOWN_GRACE = 5.0  # seconds requests in progress get once the agent stops


class Refused(Exception):
    def __init__(self, code: int, message: str, result: str = "refused") -> None:
        super().__init__(message)
        self.code, self.message, self.result = code, message, result


def make_app(
    status: AgentStatus,
    trigger: Callable[[], str],
    redact: Redactor,
    *,
    webhook_secret: Callable[[], str | None],
    branch: str | None,
    refresh: int,
    allowed_hosts: AllowedHosts,
    body_timeout: float = BODY_TIMEOUT,
    access: Access = OPEN_ACCESS,
    steering: Steering | None = None,
) -> Starlette:
    def redacted(doc: Any, code: int = 200) -> Response:
        text = redact(json_controls_escaped(json.dumps(doc, ensure_ascii=False, default=str)))
        return Response(text, status_code=code, media_type="application/json")

    async def healthz(request: Request) -> Response:
        quiet = status.watchdog.stalled_for()
        if quiet is None:
            return JSONResponse({"status": "alive"})
        doc = {
            "status": "stalled",
            "quietSeconds": round(quiet, 1),
            "watchdogSeconds": status.watchdog.limit,
            "cycleInProgress": status.running,
        }
        return JSONResponse(doc, status_code=503)

    async def readyz(request: Request) -> Response:
        ready = status.serving_role
        doc = {"ready": ready, "role": status.role, "serviceAnswering": status.ready}
        return JSONResponse(doc, status_code=200 if ready else 503)

    async def metrics(request: Request) -> Response:
        status.refresh_watch_gauges()
        text = redact(generate_latest(status.metrics.registry).decode("utf-8"))
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def status_json(request: Request) -> Response:
        refused = access.reads(request.headers)
        if refused is not None:
            return refusal(refused)
        return redacted(status.to_document())

    async def page(request: Request) -> Response:
        refused = access.reads(request.headers)
        if refused is not None:
            return refusal(refused)
        # Every text redacted before it is escaped as HTML (a key holding "&" would not be
        # recognised once escaped), and the page once more as a whole.
        shown = redact(json.dumps(status.to_document(), ensure_ascii=False, default=str))
        html = redact(render_page(json.loads(shown), refresh))
        return Response(html, media_type="text/html; charset=utf-8")

    webhook = Webhook(status, trigger, webhook_secret, branch, body_timeout)
    control = Control(status, access, steering, body_timeout, redacted)
    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            Route("/status", status_json),
            Route("/", page),
            Route("/hooks/git", webhook.endpoint, methods=["POST"]),
            Route("/control/{action}", control.endpoint, methods=["POST"]),
        ],
        middleware=[Middleware(HostCheck, allowed=allowed_hosts)],
    )


def refusal(refused: Refusal) -> Response:
    headers = {"WWW-Authenticate": refused.challenge} if refused.challenge else None
    return JSONResponse({"error": refused.message}, status_code=refused.code, headers=headers)


class Control:
    """``POST /control/{sync,suspend,resume}``: the token first (before any body is read),
    then the replica's role, then the body (JSON: ``by``, ``reason``, ``overrideWindow``)."""

    def __init__(
        self,
        status: AgentStatus,
        access: Access,
        steering: Steering | None,
        body_timeout: float,
        respond: Callable[[Any, int], Response],
    ) -> None:
        self.status = status
        self.access = access
        self.steering = steering
        self.body_timeout = body_timeout
        self.respond = respond

    async def endpoint(self, request: Request) -> Response:
        action = request.path_params["action"]
        if action not in CONTROL_ACTIONS or self.steering is None:
            return JSONResponse({"error": f"no control action {action[:40]!r}"}, 404)
        result, response = await self.handle(request, action, self.steering)
        self.status.metrics.control.labels(action=action, result=result).inc()
        return response

    async def handle(
        self, request: Request, action: str, steering: Steering
    ) -> tuple[str, Response]:
        refused = self.access.control(request.headers)
        if refused is not None:
            return "unauthorized", refusal(refused)
        if self.status.role != "active":
            doc = {
                "error": f"this replica is {self.status.role}: control goes to the lease holder",
                "leaseHolder": self.status.lease_holder,
            }
            return "standby", JSONResponse(doc, 503, headers={"Retry-After": "1"})
        try:
            body = await read_body(request, MAX_CONTROL_BYTES, self.body_timeout)
            asked = control_request(body, request.client.host if request.client else None)
            doc = await getattr(steering, action)(asked)
        except Refused as exc:
            return "invalid", JSONResponse({"error": exc.message}, exc.code)
        except Conflict as exc:
            return "invalid", JSONResponse({"error": str(exc)}, 409)
        return "done", self.respond(doc, 202 if action == "sync" else 200)


def control_request(body: bytes, peer: str | None) -> ControlRequest:
    """A control request's JSON body (empty: no field), checked: 400 naming the field."""
    try:
        found = json.loads(body) if body.strip() else {}
    except ValueError:
        raise Refused(400, "the body is not JSON") from None
    if not isinstance(found, dict):
        raise Refused(400, "the body is not a JSON object")
    unknown = sorted(set(found) - {"by", "reason", "overrideWindow"})
    if unknown:
        raise Refused(400, f"unknown field {unknown[0][:40]!r}: by, reason, overrideWindow")
    override = found.get("overrideWindow", False)
    if not isinstance(override, bool):
        raise Refused(400, "overrideWindow: true or false")
    return ControlRequest(
        by=_text_field(found, "by", MAX_BY),
        reason=_text_field(found, "reason", MAX_REASON),
        override_window=override,
        peer=peer,
    )


def _text_field(found: dict[str, Any], name: str, limit: int) -> str | None:
    value = found.get(name)
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise Refused(400, f"{name}: text of at most {limit} characters")
    if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in value):
        raise Refused(400, f"{name}: no control characters")
    return value.strip() or None


class Webhook:
    """``POST /hooks/git``."""

    def __init__(
        self,
        status: AgentStatus,
        trigger: Callable[[], str],
        secret: Callable[[], str | None],
        branch: str | None,
        body_timeout: float,
    ) -> None:
        self.status = status
        self.trigger = trigger
        self.secret = secret
        self.branch = branch
        self.body_timeout = body_timeout
        self.deliveries = hooks.Deliveries()

    async def endpoint(self, request: Request) -> Response:
        try:
            result, doc, code = await self.handle(request)
        except Refused as refused:
            result, doc, code = refused.result, {"error": refused.message}, refused.code
        self.status.metrics.webhooks.labels(result=result).inc()
        headers = {"Retry-After": "5"} if code == 503 else None
        return JSONResponse(doc, status_code=code, headers=headers)

    async def handle(self, request: Request) -> tuple[str, dict[str, Any], int]:
        body, found = await self.authenticated(request)
        kind, name = hooks.event(request.headers)
        if kind == "ping":
            return "pong", {"status": "pong"}, 200
        keys = hooks.delivery_keys(request.headers, body, found)
        if self.deliveries.seen(keys):
            return "duplicate", {"status": "duplicate", "reason": "delivered before"}, 200
        ignored = self.ignored(kind, name, body)
        if ignored is not None:
            self.deliveries.remember(keys)
            return "ignored", {"status": "ignored", "reason": ignored}, 200
        if self.status.role != "active":
            # Not remembered: a proxy retrying the other replica, or the sender redelivering
            # once this one holds the lease, is not a duplicate.
            doc = {
                "error": f"this replica is {self.status.role}: the lease holder reconciles",
                "leaseHolder": self.status.lease_holder,
            }
            return "standby", doc, 503
        self.deliveries.remember(keys)
        return "triggered", {"status": "triggered", "cycle": self.trigger()}, 202

    async def authenticated(self, request: Request) -> tuple[bytes, hooks.Credential]:
        """The body of a delivery whose credentials hold; refused (401, 408, 413) before
        reading anything when the headers alone tell."""
        secret = self.secret()
        if not secret:
            raise Refused(401, "webhooks are off: start the agent with --webhook-secret-env VAR")
        found = hooks.credential(request.headers)
        if found is None:
            raise Refused(401, "missing X-Hub-Signature-256 / X-Gitlab-Token")
        if not found.needs_body and not hooks.token_matches(found, secret):
            raise Refused(401, "wrong X-Gitlab-Token")
        body = await read_body(request, MAX_HOOK_BYTES, self.body_timeout)
        if found.needs_body and not hooks.signature_matches(found, body, secret):
            raise Refused(401, "wrong X-Hub-Signature-256")
        return body, found

    def ignored(self, kind: str, name: str, body: bytes) -> str | None:
        if kind != "push":
            return f"a {name!r} event: only a push triggers a cycle"
        ref = hooks.ref_of(body)
        if self.branch and ref is not None and ref != f"refs/heads/{self.branch}":
            return f"a push to {ref}"
        return None


async def read_body(request: Request, limit: int, timeout: float) -> bytes:
    """The request's body: at most ``limit`` bytes (413), within ``timeout`` seconds (408)."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise Refused(413, f"body over {limit} bytes")
    body = bytearray()
    try:
        async with asyncio.timeout(timeout):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise Refused(413, f"body over {limit} bytes")
    except TimeoutError:
        raise Refused(408, f"the body did not arrive within {timeout:g} s") from None
    return bytes(body)


class HostCheck:
    """Answers 421 to a request whose ``Host`` the agent does not serve (``hosts``)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            host = Headers(scope=scope).get("host")
            if not self.allowed.allows(host):
                shown = (host or "")[:100]
                error = (
                    f"this agent does not answer for Host {shown!r}: start it with "
                    "--allowed-host NAME (a defence against DNS rebinding)"
                )
                await JSONResponse({"error": error}, status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the agent handles SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def make_server(app: Starlette, host: str, port: int, guard: ConnectionGuard) -> Server:
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level="warning",
        log_config=None,  # uvicorn's warnings go to the agent's log (cli.agent)
        access_log=False,
        lifespan="off",
        http=guard.protocol(),
        # The guard keeps at most max_connections open; uvicorn's own cap counts requests
        # still running after their client left too: a backstop at twice that.
        limit_concurrency=2 * guard.max_connections,
        timeout_keep_alive=int(KEEP_ALIVE),
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
        timeout_graceful_shutdown=int(SHUTDOWN_GRACE),
    )
    return Server(config)
