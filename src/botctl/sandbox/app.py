"""`create_app`: the sandbox as one Starlette app, ready without lifespan events.

Everything is initialised here, synchronously, because the app must also work in-process
through httpx.ASGITransport, which sends no lifespan events.
"""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount

from botctl import contract
from botctl.sandbox import admin, routes_attributes, routes_chat, routes_chatbots, routes_contacts
from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.middleware import V1Gate
from botctl.sandbox.ratelimit import RateLimiter
from botctl.sandbox.runtime import Runtime
from botctl.sandbox.store import Store
from botctl.sandbox.validation import Invalid, Rules
from botctl.sandbox.web import ApiError, api_error_handler, invalid_data_handler, message
from botctl.sandbox.world import bootstrap, dashboard_rules

__all__ = ["SandboxConfig", "create_app"]

V1_ROUTES = [
    *routes_chatbots.ROUTES,
    *routes_attributes.ROUTES,
    *routes_contacts.ROUTES,
    *routes_chat.ROUTES,
]


async def _http_error(request: Request, exc: Exception) -> Response:
    """Unknown paths and wrong methods answer in the service's JSON error shape."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 405:
        return message(405, "Method not allowed")
    return message(status, contract.MSG_NOT_FOUND if status == 404 else contract.MSG_INTERNAL)


async def _crash(request: Request, exc: Exception) -> Response:
    return message(500, contract.MSG_INTERNAL)


def create_app(config: SandboxConfig) -> Starlette:
    """Open (or create) the database, register the configured keys, apply the seed.

    Raises SandboxConfigError for option values or a seed file the user must fix.
    """
    config.validate()
    store = Store(config.db)
    try:
        bootstrap(store, config)
    except Exception:
        store.close()
        raise
    runtime = Runtime(
        config=config,
        store=store,
        rules=Rules(config.settings_models),
        dashboard=dashboard_rules(config),
        limiter=RateLimiter(config.rate_limit),
    )
    app = Starlette(
        routes=[
            Mount(contract.API_PREFIX, routes=V1_ROUTES),
            Mount("/_sandbox", routes=admin.ROUTES),
        ],
        middleware=[Middleware(V1Gate, runtime=runtime)],
        exception_handlers={
            ApiError: api_error_handler,
            Invalid: invalid_data_handler,
            404: _http_error,
            405: _http_error,
            Exception: _crash,
        },
    )
    app.state.sandbox = runtime
    return app
