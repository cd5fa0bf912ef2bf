"""Contacts: list (4.5), create, get (4.8), update (4.7), delete (4.9); typed attribute values."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from botctl import contract

BASE = "/chatbots/bot-1/contacts"


def make(api: httpx.Client, *users: dict[str, Any]) -> httpx.Response:
    return api.post(BASE, json={"users": list(users)})


@pytest.fixture
def ada(api: httpx.Client, bot: str) -> dict[str, Any]:
    user = {"external_id": "u1", "name": "Ada", "email": "ada@example.com", "phonenumber": "+1"}
    response = make(api, {**user, "custom_attributes": {"plan": "pro", "ghost": 1}})
    assert response.status_code == 200, response.text
    record: dict[str, Any] = response.json()["data"][0]
    return record


def test_create_and_get(api: httpx.Client, ada: dict[str, Any]) -> None:
    assert ada["external_id"] == "u1"
    assert ada["custom_attributes"] == {"plan": "pro"}  # unknown key dropped
    assert isinstance(ada["created_at"], int)
    assert ada["payments_accounts"] == []
    response = api.get(f"{BASE}/u1")
    assert response.status_code == 200
    assert response.json() == {"message": "Success", "data": ada}


def test_typed_values(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    extra = [
        {"name": "score", "type": "number"},
        {"name": "vip", "type": "boolean"},
        {"name": "since", "type": "date"},
    ]
    admin.patch(f"/_sandbox/chatbots/{bot}", json={"attributes": extra})
    good = {"plan": "x", "score": 2.5, "vip": False, "since": "2024-05-01"}
    assert make(api, {"external_id": "a", "custom_attributes": good}).status_code == 200
    for bad in ({"score": "2"}, {"score": True}, {"vip": 1}, {"since": "May 1"}, {"plan": 3}):
        response = make(api, {"external_id": "b", "custom_attributes": bad})
        assert response.status_code == 400, bad
    assert api.get(f"{BASE}/b").status_code == 404


def test_archived_attribute_accepts_only_null(api: httpx.Client, ada: dict[str, Any]) -> None:
    refused = api.patch(f"{BASE}/u1", json={"data": {"custom_attributes": {"legacy": 3}}})
    assert refused.status_code == 400
    cleared = api.patch(f"{BASE}/u1", json={"data": {"custom_attributes": {"legacy": None}}})
    assert cleared.status_code == 200


def test_archived_attribute_keeps_values(api: httpx.Client, ada: dict[str, Any]) -> None:
    api.put("/chatbots/bot-1/custom-attributes/plan", json={"archived": True})
    assert api.get(f"{BASE}/u1").json()["data"]["custom_attributes"] == {"plan": "pro"}
    refused = api.patch(f"{BASE}/u1", json={"data": {"custom_attributes": {"plan": "basic"}}})
    assert refused.status_code == 400


def test_update(api: httpx.Client, ada: dict[str, Any]) -> None:
    payments = [{"label": "main", "payments_id": "cus_1", "payments_email": "a@example.com"}]
    body = {
        "data": {
            "name": "Ada L.",
            "payments_accounts": payments,
            "custom_attributes": {"plan": None},
        }
    }
    response = api.patch(f"{BASE}/u1", json=body)
    assert response.status_code == 200
    data = response.json()["data"]
    assert data["name"] == "Ada L."
    assert data["email"] == "ada@example.com"
    assert data["payments_accounts"] == payments
    assert data["custom_attributes"] == {}
    renamed = api.patch(f"{BASE}/u1", json={"data": {"external_id": "u9"}})
    assert renamed.status_code == 200
    assert api.get(f"{BASE}/u9").status_code == 200
    assert api.get(f"{BASE}/u1").status_code == 404


@pytest.mark.parametrize(
    "body",
    [
        {"name": "x"},
        {"data": {"name": None}},
        {"data": {"email": "not-an-email"}},
        {"data": {"payments_accounts": [{"label": "x", "iban": "y"}]}},
        {"data": {"custom_attributes": []}},
        {"data": {"unknown": 1}},
    ],
)
def test_update_validation(api: httpx.Client, ada: dict[str, Any], body: dict[str, Any]) -> None:
    assert api.patch(f"{BASE}/u1", json=body).status_code == 400


def test_conflicts_are_409(api: httpx.Client, ada: dict[str, Any]) -> None:
    dup_email = make(api, {"external_id": "u2", "email": "ADA@example.com"})
    assert dup_email.status_code == 409
    assert dup_email.json() == {"message": "Email already exists"}
    assert make(api, {"external_id": "u1"}).status_code == 409
    make(api, {"external_id": "u2", "email": "bob@example.com"})
    clash = api.patch(f"{BASE}/u2", json={"data": {"email": "ada@example.com"}})
    assert clash.status_code == 409


def test_batch_is_all_or_nothing(api: httpx.Client, bot: str) -> None:
    users = [{"external_id": "a"}, {"external_id": "b", "email": "bad"}]
    assert make(api, *users).status_code == 400
    assert api.get(BASE).json()["total"] == 0
    users = [{"external_id": "a", "email": "x@y.io"}, {"external_id": "b", "email": "x@y.io"}]
    assert make(api, *users).status_code == 409
    assert api.get(BASE).json()["total"] == 0


@pytest.mark.parametrize(
    "body", [{}, {"users": []}, {"users": [{"name": "no id"}]}, {"users": {}}, {"user": []}]
)
def test_create_validation(api: httpx.Client, bot: str, body: dict[str, Any]) -> None:
    assert api.post(BASE, json=body).status_code == 400


def test_create_limit_1000(api: httpx.Client, bot: str) -> None:
    users = [{"external_id": f"u{i}"} for i in range(1001)]
    assert make(api, *users).status_code == 400
    assert make(api, *users[:1000]).status_code == 200


def test_list_pagination(api: httpx.Client, bot: str) -> None:
    make(api, *[{"external_id": f"u{i:02}"} for i in range(25)])
    first = api.get(BASE).json()
    assert first["total"] == 25
    assert first["pages"] == {"page": 1, "per_page": 100, "total_pages": 1}
    page3 = api.get(BASE, params={"per_page": 10, "page": 3}).json()
    assert [c["external_id"] for c in page3["data"]] == [f"u{i}" for i in range(20, 25)]
    assert page3["pages"] == {"page": 3, "per_page": 10, "total_pages": 3}
    assert api.get(BASE, params={"per_page": 10, "page": 4}).json()["data"] == []
    assert api.get(BASE, params={"per_page": 1000}).status_code == 200


@pytest.mark.parametrize(
    "params",
    [
        {"per_page": 9},
        {"per_page": 1001},
        {"page": 0},
        {"page": "x"},
        {"per_page": "1e2"},
        {"limit": 10},
    ],
)
def test_list_bad_query_is_400(api: httpx.Client, bot: str, params: dict[str, Any]) -> None:
    response = api.get(BASE, params=params)
    assert response.status_code == 400
    assert response.json() == {"message": contract.MSG_INVALID_DATA}


def test_delete_returns_the_contact(api: httpx.Client, ada: dict[str, Any]) -> None:
    response = api.delete(f"{BASE}/u1")
    assert response.status_code == 200
    assert response.json()["data"] == ada
    assert api.delete(f"{BASE}/u1").status_code == 404


def test_unknown_chatbot_and_contact(api: httpx.Client, bot: str) -> None:
    for method, path in [
        ("GET", "/chatbots/nope/contacts"),
        ("GET", f"{BASE}/zz"),
        ("PATCH", f"{BASE}/zz"),
        ("DELETE", f"{BASE}/zz"),
    ]:
        body: dict[str, Any] | None = {"data": {}} if method == "PATCH" else None
        assert api.request(method, path, json=body).status_code == 404, path


def test_list_401_429_500(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    assert api.get(BASE, headers={"Authorization": "Bearer no"}).status_code == 401
    for status in (429, 500):
        admin.post(
            "/_sandbox/faults",
            json={"method": "GET", "path": "/api/v1/*/contacts", "status": status},
        )
        # the glob's * crosses '/' (fnmatch), so this matches /api/v1/chatbots/bot-1/contacts
        assert api.get(BASE).status_code == status


def test_bulk_contacts_by_admin(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    """Thousands of contacts with typed values in one admin call; then paged as API-NOTES says."""
    extra = [{"name": "score", "type": "number"}]
    generate = [
        {"count": 2500, "prefix": "p", "custom_attributes": {"plan": "pro-{i}", "score": 3}},
        {"count": 500, "prefix": "n"},
    ]
    given = [{"external_id": "x1", "email": "x@example.com", "custom_attributes": {"plan": "x"}}]
    response = admin.patch(
        f"/_sandbox/chatbots/{bot}",
        json={"attributes": extra, "generate_contacts": generate, "contacts": given},
    )
    assert response.status_code == 200, response.text
    page = api.get(BASE, params={"per_page": 1000, "page": 3}).json()
    assert page["total"] == 3001
    assert page["pages"] == {"page": 3, "per_page": 1000, "total_pages": 4}
    # The listed contacts first, then each generator's, in order.
    assert [c["external_id"] for c in page["data"][:2]] == ["p2000", "p2001"]
    assert page["data"][0]["custom_attributes"] == {"plan": "pro-2000", "score": 3}
    first = api.get(BASE, params={"per_page": 1000}).json()["data"][:2]
    assert [c["external_id"] for c in first] == ["x1", "p1"]
    last = api.get(BASE, params={"per_page": 1000, "page": 4}).json()["data"]
    assert [(c["external_id"], c["custom_attributes"]) for c in last] == [("n500", {})]
    assert api.get(BASE, params={"per_page": 1001}).status_code == 400


def test_bulk_contacts_are_checked(admin: httpx.Client, bot: str) -> None:
    typed = admin.patch(
        f"/_sandbox/chatbots/{bot}",
        json={"generate_contacts": {"count": 3, "custom_attributes": {"plan": 3}}},
    )
    assert typed.status_code == 400
    assert "must be a text value" in typed.json()["message"]
    twice = admin.patch(
        f"/_sandbox/chatbots/{bot}",
        json={"contacts": [{"external_id": "a"}, {"external_id": "a"}]},
    )
    assert twice.status_code == 400
    assert "Contact already exists" in twice.json()["message"]
    assert admin.get("/_sandbox/state").json()["chatbots"][0]["contacts"] == []


def test_archived_value_sent_back_unchanged(api: httpx.Client, ada: dict[str, Any]) -> None:
    """A contact's map sent back whole: an archived attribute's own value is no update."""
    api.put("/chatbots/bot-1/custom-attributes/plan", json={"archived": True})
    same = api.patch(f"{BASE}/u1", json={"data": {"custom_attributes": {"plan": "pro"}}})
    assert same.status_code == 200, same.text
    assert same.json()["data"]["custom_attributes"] == {"plan": "pro"}
