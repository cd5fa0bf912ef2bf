"""v1 contacts (4.5, 4.7-4.9 and the create call API-NOTES documents)."""

from __future__ import annotations

import math
import re
import time
import uuid
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from botctl import contract
from botctl.sandbox import validation as v
from botctl.sandbox.store import Store
from botctl.sandbox.web import (
    ApiError,
    account,
    int_param,
    invalid,
    json_object,
    owned_chatbot,
    runtime,
    strict_query,
)

JSON = dict[str, Any]
MSG_SUCCESS = "Success"
MSG_EMAIL_EXISTS = "Email already exists"
MSG_CONTACT_EXISTS = "Contact already exists"
MAX_USERS = 1000
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


def _external_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value or "/" in value:
        raise v.Invalid(f"{where}: must be a non-empty string without '/'")
    return value


def _email(value: Any, where: str) -> str:
    # Strict: the contract only says "e-mail address"; refuse what is plainly not one.
    if not isinstance(value, str) or not _EMAIL.match(value):
        raise v.Invalid(f"{where}: must be an e-mail address")
    return value


_PAYMENT = {"label": v.string, "payments_id": v.string, "payments_email": v.string}


def _payments(value: Any, where: str) -> list[JSON]:
    if not isinstance(value, list):
        raise v.Invalid(f"{where}: must be an array of objects")
    return [v.obj(item, f"{where}[{i}]", _PAYMENT) for i, item in enumerate(value)]


def _any_object(value: Any, where: str) -> JSON:
    if not isinstance(value, dict):
        raise v.Invalid(f"{where}: must be an object")
    return value


_FIELDS = {
    "external_id": _external_id,
    "name": v.string,
    "email": _email,
    "phonenumber": v.string,
    "payments_accounts": _payments,
    "custom_attributes": _any_object,
}


def _typed(kind: str, value: Any) -> bool:
    if kind == "text":
        return isinstance(value, str)
    if kind == "number":
        return v.is_number(value)
    if kind == "boolean":
        return isinstance(value, bool)
    if not isinstance(value, str):  # date: an ISO-8601 string
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def attribute_values(
    given: JSON, attributes: list[JSON], where: str, current: JSON | None = None
) -> JSON:
    """Values typed by their attribute; unknown names dropped; archived ones accept only null
    (or the value they hold already: sending a contact's map back whole sets nothing new)."""
    by_name = {a["name"]: a for a in attributes}
    held = current or {}
    out: JSON = {}
    for name, value in given.items():
        attr = by_name.get(name)
        if attr is None:
            continue
        unchanged = name in held and held[name] == value and type(held[name]) is type(value)
        if value is not None and attr["archived"] and not unchanged:
            raise v.Invalid(f"{where}.{name}: attribute is archived; only null is accepted")
        if value is not None and not _typed(attr["type"], value):
            raise v.Invalid(f"{where}.{name}: must be a {attr['type']} value")
        out[name] = value
    return out


def _apply(record: JSON, fields: JSON, attributes: list[JSON], where: str) -> JSON:
    """A new record: fields replace, custom attribute values merge (null clears one)."""
    merged = {**record, **{k: val for k, val in fields.items() if k != "custom_attributes"}}
    current = dict(record.get("custom_attributes", {}))
    values = attribute_values(fields.get("custom_attributes", {}), attributes, where, current)
    for name, value in values.items():
        if value is None:
            current.pop(name, None)
        else:
            current[name] = value
    merged["custom_attributes"] = current
    return merged


def _conflict(store: Store, chatbot_id: str, record: JSON, skip: str | None) -> None:
    email = record.get("email")
    for other in store.contacts(chatbot_id):
        if other["external_id"] == skip:
            continue
        if other["external_id"] == record["external_id"]:
            raise ApiError(409, MSG_CONTACT_EXISTS, f"external_id {record['external_id']!r}")
        if email is not None and str(other.get("email") or "").lower() == email.lower():
            raise ApiError(409, MSG_EMAIL_EXISTS, f"email {email!r}")


async def list_contacts(request: Request) -> JSONResponse:
    key, _ = account(request)
    chatbot_id = request.path_params["chatbot_id"]
    params = strict_query(request, ("per_page", "page"))
    per_page = int_param(
        params, "per_page", 100, contract.CONTACTS_PAGE_SIZE_MIN, contract.CONTACTS_PAGE_SIZE_MAX
    )
    page = int_param(params, "page", 1, 1, None)
    store = runtime(request).store
    owned_chatbot(request, key, chatbot_id)
    total = store.count_contacts(chatbot_id)
    data = store.contacts(chatbot_id, offset=(page - 1) * per_page, limit=per_page)
    pages = {"page": page, "per_page": per_page, "total_pages": math.ceil(total / per_page)}
    return JSONResponse({"message": MSG_SUCCESS, "data": data, "total": total, "pages": pages})


async def create_contacts(request: Request) -> JSONResponse:
    """All or nothing: one bad or conflicting user refuses the whole batch. Strict choices:
    `external_id` is required (it is the key in paths), e-mails are unique per chatbot
    regardless of letter case, and success is 200 `{message, data: [contacts]}`."""
    key, _ = account(request)
    chatbot_id = request.path_params["chatbot_id"]
    body = await json_object(request)
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        try:
            users = v.obj(body, "", {"users": _users})
            if "users" not in users:
                raise v.Invalid("users: required")
            created = build_contacts(store, chatbot_id, users["users"], "users")
        except v.Invalid as exc:
            raise invalid(exc) from None
        except Clash as exc:
            raise ApiError(409, exc.message, exc.detail) from None
        store.add_contacts(chatbot_id, created)
    return JSONResponse({"message": MSG_SUCCESS, "data": created})


class Clash(Exception):
    """A contact's external id or e-mail is taken (409 in v1)."""

    def __init__(self, message: str, detail: str) -> None:
        super().__init__(detail)
        self.message, self.detail = message, detail


def build_contacts(store: Store, chatbot_id: str, users: list[JSON], where: str) -> list[JSON]:
    """New contact records from validated user objects (not stored): values typed by the
    chatbot's attributes, ids and e-mails unique among the chatbot's contacts and the batch.
    Linear in the batch and the chatbot's contacts, so thousands are made at once."""
    attributes = store.attributes(chatbot_id)
    ids, emails = store.contact_keys(chatbot_id)
    now = int(time.time())
    created = []
    for i, user in enumerate(users):
        if "external_id" not in user:
            raise v.Invalid(f"{where}[{i}].external_id: required")
        blank = {"id": "ct_" + uuid.uuid4().hex[:16], "created_at": now, "updated_at": now}
        blank |= {"name": None, "email": None, "phonenumber": None}
        blank |= {"payments_accounts": [], "custom_attributes": {}}
        record = _apply(blank, user, attributes, f"{where}[{i}].custom_attributes")
        if record["external_id"] in ids:
            raise Clash(MSG_CONTACT_EXISTS, f"external_id {record['external_id']!r}")
        email = record.get("email")
        if email is not None and email.lower() in emails:
            raise Clash(MSG_EMAIL_EXISTS, f"email {email!r}")
        ids.add(record["external_id"])
        if email is not None:
            emails.add(email.lower())
        created.append(record)
    return created


def user_objects(value: Any, where: str, limit: int | None = MAX_USERS) -> list[JSON]:
    """A list of contacts in the shape of the v1 create (each field checked)."""
    if not isinstance(value, list) or (limit is not None and not 1 <= len(value) <= limit):
        raise v.Invalid(f"{where}: must be an array of 1 to {limit} contacts")
    return [v.obj(user, f"{where}[{i}]", _FIELDS) for i, user in enumerate(value)]


def _users(value: Any, where: str) -> list[JSON]:
    return user_objects(value, where)


def _found(store: Store, chatbot_id: str, contact_id: str) -> JSON:
    record = store.contact(chatbot_id, contact_id)
    if record is None:
        raise ApiError(404, contract.MSG_NOT_FOUND, f"no contact {contact_id!r}")
    return record


async def get_contact(request: Request) -> JSONResponse:
    key, _ = account(request)
    chatbot_id, contact_id = request.path_params["chatbot_id"], request.path_params["contact_id"]
    owned_chatbot(request, key, chatbot_id)
    record = _found(runtime(request).store, chatbot_id, contact_id)
    return JSONResponse({"message": MSG_SUCCESS, "data": record})


async def update_contact(request: Request) -> JSONResponse:
    """4.7: `{"data": {...}}`, every field optional. The sandbox's choice where the contract
    is silent: custom attribute values MERGE by name (a name not sent keeps its value, null
    clears one); a value an archived attribute already holds may be sent back unchanged."""
    key, _ = account(request)
    chatbot_id, contact_id = request.path_params["chatbot_id"], request.path_params["contact_id"]
    body = await json_object(request)
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        try:
            fields = v.obj(body, "", {"data": lambda x, w: v.obj(x, w, _FIELDS)})
            if "data" not in fields:
                raise v.Invalid("data: required")
            record = _found(store, chatbot_id, contact_id)
            updated = _apply(
                record, fields["data"], store.attributes(chatbot_id), "data.custom_attributes"
            )
        except v.Invalid as exc:
            raise invalid(exc) from None
        updated["updated_at"] = int(time.time())
        if any(updated.get(k) != record.get(k) for k in ("external_id", "email")):
            _conflict(store, chatbot_id, updated, skip=contact_id)
        store.replace_contact(chatbot_id, contact_id, updated)
    return JSONResponse({"message": MSG_SUCCESS, "data": updated})


async def delete_contact(request: Request) -> JSONResponse:
    key, _ = account(request)
    chatbot_id, contact_id = request.path_params["chatbot_id"], request.path_params["contact_id"]
    store = runtime(request).store
    with store.atomic():
        owned_chatbot(request, key, chatbot_id)
        record = _found(store, chatbot_id, contact_id)
        store.delete_contact(chatbot_id, contact_id)
    return JSONResponse({"message": MSG_SUCCESS, "data": record})


_ONE = "/chatbots/{chatbot_id}/contacts/{contact_id}"
ROUTES = [
    Route("/chatbots/{chatbot_id}/contacts", list_contacts, methods=["GET"]),
    Route("/chatbots/{chatbot_id}/contacts", create_contacts, methods=["POST"]),
    Route(_ONE, get_contact, methods=["GET"]),
    Route(_ONE, update_contact, methods=["PATCH"]),
    Route(_ONE, delete_contact, methods=["DELETE"]),
]
