"""The admin API under /_sandbox: simulate the world around the v1 API.

No v1 key is needed, so it is refused (403) to any client that is not on loopback.
Errors are `{"message": "<field>: <reason>"}` - readable, unlike v1's terse messages.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from botctl import contract
from botctl.sandbox import validation as v
from botctl.sandbox import world
from botctl.sandbox.runtime import key_id
from botctl.sandbox.scripts import validate_script
from botctl.sandbox.views import iso
from botctl.sandbox.web import runtime

JSON = dict[str, Any]
Handler = Callable[[Request], Awaitable[Response]]


def _loopback(request: Request) -> bool:
    host = request.client.host if request.client else ""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _msg(status: int, text: str) -> JSONResponse:
    return JSONResponse({"message": text}, status_code=status)


def guarded(handler: Handler) -> Handler:
    """Loopback only; admin errors answered as readable 400s."""

    async def wrapper(request: Request) -> Response:
        if not _loopback(request):
            return _msg(403, "the sandbox admin API is only served to loopback clients")
        try:
            return await handler(request)
        except v.Invalid as exc:
            return _msg(400, exc.detail)

    return wrapper


async def _body(request: Request) -> Any:
    try:
        return json.loads(await request.body() or b"{}")
    except ValueError as exc:
        raise v.Invalid(f"body: malformed JSON ({exc})") from None


async def add_account(request: Request) -> Response:
    fields = v.obj(await _body(request), "", {"key": v.string, "plan": v.one_of(*contract.PLANS)})
    key = fields.get("key")
    if not key or not key.isprintable() or " " in key:
        raise v.Invalid("key: required, printable and without spaces")
    created = runtime(request).store.upsert_account(key, fields.get("plan", "standard"))
    body = {"id": key_id(key), "plan": fields.get("plan", "standard")}
    return JSONResponse(body, status_code=201 if created else 200)


def _chatbot_state(request: Request, chatbot_id: str) -> JSON:
    store = runtime(request).store
    bot = store.chatbot(chatbot_id)
    assert bot is not None
    conversations = [
        {k: val for k, val in c.items() if not k.startswith("_")}
        for c in store.conversations(chatbot_id)
    ]
    return {
        "id": bot.id,
        "account": key_id(bot.account),
        "settings": bot.settings,
        "icon": bot.icon,
        "created_at": iso(bot.created_at),
        "updated_at": iso(bot.updated_at),
        "attributes": store.attributes(chatbot_id),
        "contacts": store.contacts(chatbot_id),
        "conversations": conversations,
        "replies": store.replies(chatbot_id),
    }


async def create_chatbot(request: Request) -> Response:
    rt = runtime(request)
    try:
        chatbot_id = world.create_chatbot(rt.store, await _body(request), rt.dashboard)
    except world.Conflict as exc:
        return _msg(409, str(exc))
    return JSONResponse(_chatbot_state(request, chatbot_id), status_code=201)


async def patch_chatbot(request: Request) -> Response:
    chatbot_id = request.path_params["chatbot_id"]
    rt = runtime(request)
    try:
        world.patch_chatbot(rt.store, chatbot_id, await _body(request), rt.dashboard)
    except KeyError:
        return _msg(404, f"no chatbot {chatbot_id!r}")
    return JSONResponse(_chatbot_state(request, chatbot_id))


async def put_replies(request: Request) -> Response:
    """Replace a chatbot's scripted chat replies (``sandbox.scripts``); ``[]`` clears them."""
    chatbot_id = request.path_params["chatbot_id"]
    store = runtime(request).store
    script = validate_script(await _body(request))
    if store.chatbot(chatbot_id) is None:
        return _msg(404, f"no chatbot {chatbot_id!r}")
    store.set_replies(chatbot_id, script)
    return JSONResponse({"replies": script})


async def get_replies(request: Request) -> Response:
    chatbot_id = request.path_params["chatbot_id"]
    store = runtime(request).store
    if store.chatbot(chatbot_id) is None:
        return _msg(404, f"no chatbot {chatbot_id!r}")
    return JSONResponse({"replies": store.replies(chatbot_id)})


async def add_fault(request: Request) -> Response:
    fault = runtime(request).faults.add(await _body(request))
    return JSONResponse({"id": fault.id, "pending": fault.count}, status_code=201)


async def list_faults(request: Request) -> Response:
    return JSONResponse({"faults": runtime(request).faults.pending()})


async def clear_faults(request: Request) -> Response:
    runtime(request).faults.clear()
    return JSONResponse({"message": "faults cleared"})


async def list_requests(request: Request) -> Response:
    return JSONResponse({"requests": runtime(request).log.entries()})


async def clear_requests(request: Request) -> Response:
    runtime(request).log.clear()
    return JSONResponse({"message": "request log cleared"})


async def state(request: Request) -> Response:
    rt = runtime(request)
    accounts = [{"id": key_id(k), "plan": p} for k, p in rt.store.accounts()]
    bots = [_chatbot_state(request, b.id) for b in rt.store.chatbots()]
    return JSONResponse({"accounts": accounts, "chatbots": bots})


async def reset(request: Request) -> Response:
    """Back to the start: everything wiped, then configured keys and the seed re-applied."""
    rt = runtime(request)
    rt.store.reset()
    world.bootstrap(rt.store, rt.config)
    rt.faults.clear()
    rt.log.clear()
    rt.limiter.clear()
    return JSONResponse({"message": "sandbox reset"})


ROUTES = [
    Route("/accounts", guarded(add_account), methods=["POST"]),
    Route("/chatbots", guarded(create_chatbot), methods=["POST"]),
    Route("/chatbots/{chatbot_id}", guarded(patch_chatbot), methods=["PATCH"]),
    Route("/chatbots/{chatbot_id}/replies", guarded(put_replies), methods=["PUT"]),
    Route("/chatbots/{chatbot_id}/replies", guarded(get_replies), methods=["GET"]),
    Route("/faults", guarded(add_fault), methods=["POST"]),
    Route("/faults", guarded(list_faults), methods=["GET"]),
    Route("/faults", guarded(clear_faults), methods=["DELETE"]),
    Route("/requests", guarded(list_requests), methods=["GET"]),
    Route("/requests", guarded(clear_requests), methods=["DELETE"]),
    Route("/state", guarded(state), methods=["GET"]),
    Route("/reset", guarded(reset), methods=["POST"]),
]
