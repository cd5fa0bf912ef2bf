"""Request plumbing shared by the v1 routes: errors, JSON bodies, authentication, ownership."""

from __future__ import annotations

import json
from typing import Any, cast

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from botctl import contract
from botctl.sandbox.runtime import Runtime
from botctl.sandbox.store import Chatbot
from botctl.sandbox.validation import Invalid

JSON = dict[str, Any]
DETAIL_KEY = "sandbox.detail"  # scope key the request log reads the reason of a 4xx from


class ApiError(Exception):
    """An error answered as `{"message": ...}` (contract section 7)."""

    def __init__(self, status: int, message: str, detail: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.detail = detail


def invalid(exc: Invalid) -> ApiError:
    return ApiError(400, contract.MSG_INVALID_DATA, exc.detail)


def message(status: int, text: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"message": text}, status_code=status, headers=headers)


async def api_error_handler(request: Request, exc: Exception) -> Response:
    err = cast(ApiError, exc)
    if err.detail:
        request.scope[DETAIL_KEY] = err.detail
    return message(err.status, err.message)


async def invalid_data_handler(request: Request, exc: Exception) -> Response:
    """A validation failure anywhere in a v1 handler: 400 `Invalid request data`."""
    return await api_error_handler(request, invalid(cast(Invalid, exc)))


def runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.sandbox)


async def json_object(request: Request) -> JSON:
    """The body as a JSON object, else 400 `Invalid request body`.

    Strict choice: a body must be declared `application/json` (contract section 4 says all
    bodies are JSON with that content type), so a form-encoded curl -d is refused, not guessed.
    """
    ctype = request.headers.get("content-type", "").split(";")[0].strip().lower()
    raw = await request.body()
    if ctype != "application/json":
        raise ApiError(400, contract.MSG_INVALID_BODY, "Content-Type must be application/json")
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(400, contract.MSG_INVALID_BODY, f"malformed JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ApiError(400, contract.MSG_INVALID_BODY, "body must be a JSON object")
    return body


def account(request: Request) -> tuple[str, str]:
    """(key, plan) of the caller, else 401 as contract section 5 describes.

    The scheme is matched case-insensitively (RFC 7235); "Bearer" with no token counts as no
    key, any other scheme as an invalid one.
    """
    header = request.headers.get("authorization", "").strip()
    scheme, _, token = header.partition(" ")
    token = token.strip()
    is_bearer = scheme.lower() == "bearer"
    if not header or (is_bearer and not token):
        raise ApiError(401, contract.MSG_NO_KEY)
    plan = runtime(request).store.plan_of(token) if is_bearer else None
    if plan is None:
        raise ApiError(401, contract.MSG_UNAUTHORIZED)
    return token, plan


def owned_chatbot(
    request: Request, key: str, chatbot_id: str, not_found: str = contract.MSG_NOT_FOUND
) -> Chatbot:
    """The caller's chatbot; another account's chatbot is indistinguishable from none (404)."""
    bot = runtime(request).store.chatbot(chatbot_id)
    if bot is None or bot.account != key:
        raise ApiError(404, not_found)
    return bot


def strict_query(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    """Query parameters, refusing unknown or repeated ones (strict: the contract is silent)."""
    params = request.query_params.multi_items()
    names = [k for k, _ in params]
    for name in names:
        if name not in allowed:
            raise ApiError(400, contract.MSG_INVALID_DATA, f"unknown query parameter {name!r}")
        if names.count(name) > 1:
            raise ApiError(400, contract.MSG_INVALID_DATA, f"repeated query parameter {name!r}")
    return dict(params)


def int_param(params: dict[str, str], name: str, default: int, lo: int, hi: int | None) -> int:
    """A decimal integer query parameter within [lo, hi]; no signs, spaces or decimals."""
    raw = params.get(name)
    if raw is None:
        return default
    if not raw.isascii() or not raw.isdigit():
        raise ApiError(400, contract.MSG_INVALID_DATA, f"{name}: must be an integer")
    value = int(raw)
    if value < lo or (hi is not None and value > hi):
        bounds = f"{lo}..{hi}" if hi is not None else f">= {lo}"
        raise ApiError(400, contract.MSG_INVALID_DATA, f"{name}: must be {bounds}")
    return value
