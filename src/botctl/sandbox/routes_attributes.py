"""v1 custom attributes: list (API-NOTES read 2), create (4.3), update (4.4)."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from botctl import contract
from botctl.sandbox import validation
from botctl.sandbox.web import ApiError, account, json_object, owned_chatbot, runtime

MSG_SUCCESS = "Success"
MSG_EXISTS = "Custom attribute already exists"


def _success(data: object) -> JSONResponse:
    return JSONResponse({"message": MSG_SUCCESS, "data": data})


async def list_attributes(request: Request) -> JSONResponse:
    """Archived attributes included, in creation order. `--reads none` answers 404 before
    the key is checked, like a deployment without the route."""
    rt = runtime(request)
    if rt.config.reads == "none":
        raise ApiError(404, contract.MSG_NOT_FOUND)
    key, _ = account(request)
    chatbot_id = request.path_params["chatbot_id"]
    owned_chatbot(request, key, chatbot_id, not_found=contract.MSG_CHATBOT_NOT_FOUND)
    return _success(rt.store.attributes(chatbot_id))


async def create_attribute(request: Request) -> JSONResponse:
    """200 (API-NOTES: not 201). Unknown body fields are refused; a name already taken -
    archived or not, in any letter case - is a 400."""
    key, _ = account(request)
    chatbot_id = request.path_params["chatbot_id"]
    body = await json_object(request)
    record = validation.attribute_create(body)  # Invalid -> 400 (app's handler)
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        if validation.name_taken(record["name"], store.attributes(chatbot_id)):
            raise ApiError(400, MSG_EXISTS, f"name {record['name']!r} is taken")
        store.put_attribute(chatbot_id, record)
    return _success(record)


async def update_attribute(request: Request) -> JSONResponse:
    """4.4. `archived` omitted means false (its documented default), so a PUT without it
    un-archives; an omitted label or description stays as it was. The path name must match
    exactly (no case folding)."""
    key, _ = account(request)
    chatbot_id = request.path_params["chatbot_id"]
    name = request.path_params["name"]
    body = await json_object(request)
    changes = validation.attribute_update(body)
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        record = store.attribute(chatbot_id, name)
        if record is None:
            raise ApiError(404, contract.MSG_ATTRIBUTE_NOT_FOUND)
        record.update(changes)
        record["archived"] = changes.get("archived", False)
        store.put_attribute(chatbot_id, record)
    return _success(record)


ROUTES = [
    Route(
        "/chatbots/{chatbot_id}/custom-attributes",
        list_attributes,
        methods=["GET"],
    ),
    Route(
        "/chatbots/{chatbot_id}/custom-attributes",
        create_attribute,
        methods=["POST"],
    ),
    Route(
        "/chatbots/{chatbot_id}/custom-attributes/{name}",
        update_attribute,
        methods=["PUT"],
    ),
]
