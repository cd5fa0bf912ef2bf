"""GET /get-chatbots and GET /chatbots/{id}/custom-attributes in the three --reads modes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from botctl import contract
from botctl.sandbox.server import RunningSandbox

Factory = Callable[..., RunningSandbox]
AUTH = {"Authorization": "Bearer test-key"}
SPEC: dict[str, Any] = {
    "id": "b",
    "settings": {
        "name": "Support",
        "temp": 0.3,
        "styles": {"buttonColor": "#000", "autoOpenChatWindowAfter": 5},
        "collectCustomerInformation": {"title": "T", "email": {"active": True, "label": "Mail"}},
        "onlyAllowOnAddedDomains": False,
    },
    "attributes": [{"name": "tier", "type": "text", "archived": True}],
}


def start(factory: Factory, reads: str) -> httpx.Client:
    running = factory(reads=reads)
    assert httpx.post(f"{running.url}/_sandbox/chatbots", json=SPEC).status_code == 201
    return httpx.Client(base_url=running.url, headers=AUTH, timeout=5)


def test_documented_shape(api: httpx.Client, bot: str) -> None:
    response = api.get("/get-chatbots")
    assert response.status_code == 200
    (record,) = response.json()["chatbots"]
    assert set(record) == {
        "id",
        "name",
        "status",
        "model",
        "instructions",
        "visibility",
        "created_at",
        "updated_at",
    }
    assert record["id"] == bot
    assert record["name"] == "Support"
    assert record["status"] == "ready"
    assert record["instructions"] is None  # never set


def test_documented_is_the_default_and_unset_fields_are_null(sandbox_factory: Factory) -> None:
    with start(sandbox_factory, "documented") as client:
        (record,) = client.get("/api/v1/get-chatbots").json()["chatbots"]
        assert record["model"] is None
        assert record["visibility"] is None


def test_extended_shape_carries_only_set_fields_in_snake_case(sandbox_factory: Factory) -> None:
    with start(sandbox_factory, "extended") as client:
        body = client.get("/api/v1/get-chatbots").json()
        (record,) = body["chatbots"]["data"]
        assert record == {
            "id": "b",
            "status": "ready",
            "name": "Support",
            "temp": 0.3,
            "styles": {"button_color": "#000", "auto_open_chat_window_after": 5},
            "collect_customer_information": {
                "title": "T",
                "email": {"active": True, "label": "Mail"},
            },
            "only_allow_on_added_domains": False,
            "created_at": record["created_at"],
            "updated_at": record["updated_at"],
        }
        attributes = client.get("/api/v1/chatbots/b/custom-attributes").json()
        assert attributes["data"][0]["name"] == "tier"


def test_none_answers_404_for_both_reads(sandbox_factory: Factory) -> None:
    with start(sandbox_factory, "none") as client:
        for path in ("/api/v1/get-chatbots", "/api/v1/chatbots/b/custom-attributes"):
            response = client.get(path)
            assert response.status_code == 404
            assert response.json() == {"message": contract.MSG_NOT_FOUND}
        # writes still work
        body = {"chatbotId": "b", "name": "x"}
        assert client.post("/api/v1/update-chatbot-settings", json=body).status_code == 202


def test_attribute_list_includes_archived(api: httpx.Client, bot: str) -> None:
    response = api.get(f"/chatbots/{bot}/custom-attributes")
    assert response.status_code == 200
    assert response.json() == {
        "message": "Success",
        "data": [
            {
                "name": "plan",
                "label": "Plan",
                "type": "text",
                "description": None,
                "archived": False,
            },
            {
                "name": "legacy",
                "label": None,
                "type": "number",
                "description": None,
                "archived": True,
            },
        ],
    }


def test_attribute_list_unknown_chatbot(api: httpx.Client, bot: str) -> None:
    response = api.get("/chatbots/nope/custom-attributes")
    assert response.status_code == 404
    assert response.json() == {"message": contract.MSG_CHATBOT_NOT_FOUND}


@pytest.mark.parametrize("path", ["/get-chatbots", "/chatbots/bot-1/custom-attributes"])
def test_reads_need_a_key(sandbox_url: str, bot: str, path: str) -> None:
    response = httpx.get(f"{sandbox_url}/api/v1{path}")
    assert response.status_code == 401


def test_reads_show_only_own_chatbots(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    admin.post("/_sandbox/accounts", json={"key": "other"})
    admin.post("/_sandbox/chatbots", json={"id": "theirs", "account": "other"})
    assert [b["id"] for b in api.get("/get-chatbots").json()["chatbots"]] == [bot]
    assert api.get("/chatbots/theirs/custom-attributes").status_code == 404


def test_unknown_route_and_method(api: httpx.Client, bot: str) -> None:
    assert api.get("/nope").json() == {"message": contract.MSG_NOT_FOUND}
    assert api.delete("/get-chatbots").status_code == 405
