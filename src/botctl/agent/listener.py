"""What the agent serves on ``--listen`` (loopback unless told otherwise):

- ``GET /healthz``: the process is alive;
- ``GET /readyz``: 200 once a cycle completed with the service answering (503 before, and
  on a standby, which does not reconcile);
- ``GET /metrics``: Prometheus text format (``status.Metrics``);
- ``GET /status``: the agent's status as JSON; ``GET /``: the status page;
- ``POST /hooks/git``: a push event triggers a cycle at once, if signed: GitHub's
  ``X-Hub-Signature-256`` (HMAC-SHA256 of the body under the secret) or GitLab's
  ``X-Gitlab-Token`` (the secret itself). Anything else is 401 and triggers nothing.

Every body passes through the ``Redactor``: no key or secret value is ever served.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from botctl.agent.log import Redactor
from botctl.agent.page import render_page
from botctl.agent.status import AgentStatus

MAX_HOOK_BYTES = 1 << 20


def make_app(
    status: AgentStatus,
    trigger: Callable[[], None],
    redact: Redactor,
    *,
    webhook_secret: Callable[[], str | None],
    branch: str | None,
    refresh: int,
) -> Starlette:
    def redacted(doc: Any, code: int = 200) -> Response:
        text = redact(json.dumps(doc, ensure_ascii=False, default=str))
        return Response(text, status_code=code, media_type="application/json")

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "alive"})

    async def readyz(request: Request) -> Response:
        ready = status.ready and status.role == "active"
        return JSONResponse(
            {"ready": ready, "role": status.role}, status_code=200 if ready else 503
        )

    async def metrics(request: Request) -> Response:
        text = redact(generate_latest(status.metrics.registry).decode("utf-8"))
        return Response(text, media_type=CONTENT_TYPE_LATEST)

    async def status_json(request: Request) -> Response:
        return redacted(status.to_document())

    async def page(request: Request) -> Response:
        html = redact(render_page(status.to_document(), refresh))
        return Response(html, media_type="text/html; charset=utf-8")

    async def hook(request: Request) -> Response:
        secret = webhook_secret()
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > MAX_HOOK_BYTES:
                return JSONResponse({"error": "body too large"}, status_code=413)
        if not secret:
            return JSONResponse(
                {"error": "webhooks are off: start the agent with --webhook-secret-env VAR"},
                status_code=401,
            )
        if not _signed(request, body, secret):
            return JSONResponse(
                {"error": "missing or wrong X-Hub-Signature-256 / X-Gitlab-Token"},
                status_code=401,
            )
        if request.headers.get("x-github-event") == "ping":
            return JSONResponse({"status": "pong"})
        ref = _ref_of(body)
        if branch is not None and ref is not None and ref != f"refs/heads/{branch}":
            return JSONResponse({"status": "ignored", "reason": f"a push to {ref}"}, 202)
        trigger()
        return JSONResponse({"status": "triggered"}, status_code=202)

    return Starlette(
        routes=[
            Route("/healthz", healthz),
            Route("/readyz", readyz),
            Route("/metrics", metrics),
            Route("/status", status_json),
            Route("/", page),
            Route("/hooks/git", hook, methods=["POST"]),
        ]
    )


def _signed(request: Request, body: bytes, secret: str) -> bool:
    signature = request.headers.get("x-hub-signature-256")
    if signature is not None:
        expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        return hmac.compare_digest(signature.strip().encode(), expected.encode())
    token = request.headers.get("x-gitlab-token")
    if token is not None:
        return hmac.compare_digest(token.encode(), secret.encode())
    return False


def _ref_of(body: bytes) -> str | None:
    try:
        ref = json.loads(body).get("ref")
    except (ValueError, AttributeError):
        return None
    return ref if isinstance(ref, str) else None


class Server(uvicorn.Server):
    """uvicorn without its own signal handlers: the agent handles SIGTERM and SIGINT."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


def make_server(app: Starlette, host: str, port: int) -> Server:
    config = uvicorn.Config(
        app, host=host, port=port, log_level="warning", access_log=False, lifespan="off"
    )
    return Server(config)
