"""v1 chatbot operations: settings update (4.1), the chatbot read, deletions (4.10, 4.11)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from botctl import contract
from botctl.sandbox import views
from botctl.sandbox.web import (
    ApiError,
    account,
    json_object,
    message,
    owned_chatbot,
    runtime,
    strict_query,
)

MSG_DELETED = "Deleted successfully"  # API-NOTES, delete chatbot; reused for the icon


async def update_settings(request: Request) -> JSONResponse:
    """4.1. The body is validated before the chatbot is looked up, so a bad body is a 400
    even for an unknown chatbot. Omitted fields stay; a nested object sent replaces the
    stored one whole (API-NOTES leaves merge-vs-replace open; replace is the strict reading).
    A body with only `chatbotId` is accepted and changes nothing."""
    key, _ = account(request)
    body = await json_object(request)
    rt = runtime(request)
    chatbot_id, changes = rt.rules.settings_update(body)  # Invalid -> 400 (app's handler)
    store = rt.store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        store.update_chatbot(chatbot_id, settings=changes)
    return message(202, contract.MSG_SETTINGS_SAVED)


async def get_chatbots(request: Request) -> JSONResponse:
    """API-NOTES read 1, in the shape `--reads` selects. `none` answers 404 before checking
    the key, as a deployment without the route would (its gateway knows no such path)."""
    rt = runtime(request)
    if rt.config.reads == "none":
        raise ApiError(404, contract.MSG_NOT_FOUND)
    key, _ = account(request)
    strict_query(request, ())
    bots = rt.store.chatbots(account=key)
    if rt.config.reads == "extended":
        return JSONResponse({"chatbots": {"data": [views.extended(b) for b in bots]}})
    return JSONResponse({"chatbots": [views.documented(b) for b in bots]})


def _target(request: Request, missing_status: int) -> str:
    """`chatbotId` from the query. Strict: the status for a missing id follows each
    operation's own list in section 7 - delete chatbot lists no 400, so it answers 404."""
    try:
        params = strict_query(request, ("chatbotId",))
    except ApiError as exc:
        if missing_status == 404:
            raise ApiError(404, contract.MSG_NOT_FOUND, exc.detail) from None
        raise
    chatbot_id = params.get("chatbotId", "")
    if not chatbot_id:
        if missing_status == 404:
            raise ApiError(404, contract.MSG_NOT_FOUND, "chatbotId query parameter missing")
        raise ApiError(400, contract.MSG_INVALID_DATA, "chatbotId query parameter missing")
    return chatbot_id


async def delete_chatbot(request: Request) -> JSONResponse:
    """4.11: permanent, with attributes, contacts and conversations."""
    key, _ = account(request)
    chatbot_id = _target(request, 404)
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        store.delete_chatbot(chatbot_id)
    return message(200, MSG_DELETED)


async def delete_chatbot_icon(request: Request) -> JSONResponse:
    """4.10. Strict: a chatbot without an icon answers 404 (nothing to delete); icons are
    given to chatbots through the admin API (`"icon": true`)."""
    key, _ = account(request)
    chatbot_id = _target(request, 400)
    store = runtime(request).store
    with store.atomic():
        bot = owned_chatbot(request, key, chatbot_id)
        if not bot.icon:
            raise ApiError(404, contract.MSG_NOT_FOUND, "the chatbot has no icon")
        store.update_chatbot(chatbot_id, icon=False)
    return message(200, MSG_DELETED)


ROUTES = [
    Route("/update-chatbot-settings", update_settings, methods=["POST"]),
    Route("/get-chatbots", get_chatbots, methods=["GET"]),
    Route("/delete-chatbot", delete_chatbot, methods=["DELETE"]),
    Route("/delete-chatbot-icon", delete_chatbot_icon, methods=["DELETE"]),
]
