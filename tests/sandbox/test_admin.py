"""The /_sandbox admin API: accounts, chatbots, request log, state, reset, loopback guard."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from botctl.sandbox.app import create_app
from botctl.sandbox.config import SandboxConfig


def test_accounts_are_idempotent(admin: httpx.Client, api: httpx.Client) -> None:
    assert admin.post("/_sandbox/accounts", json={"key": "k2", "plan": "free"}).status_code == 201
    again = admin.post("/_sandbox/accounts", json={"key": "k2", "plan": "free"})
    assert again.status_code == 200
    assert again.json()["id"].startswith("key_")
    assert api.get("/get-chatbots", headers={"Authorization": "Bearer k2"}).status_code == 200
    bad = admin.post("/_sandbox/accounts", json={"key": "k3", "plan": "gold"})
    assert bad.status_code == 400


def test_chatbot_create_conflicts_and_validation(admin: httpx.Client, bot: str) -> None:
    assert admin.post("/_sandbox/chatbots", json={"id": bot}).status_code == 409
    specs: list[dict[str, Any]] = [
        {"id": "x", "settings": {"temp": 2}},
        {"id": "x", "settings": {"chatbotId": "x"}},
        {"id": "x", "account": "nobody"},
        {"id": "x", "attributes": [{"name": "a", "type": "text"}, {"name": "A", "type": "text"}]},
        {"settings": {}},
        {"id": "x", "color": "red"},
    ]
    for spec in specs:
        response = admin.post("/_sandbox/chatbots", json=spec)
        assert response.status_code == 400, spec
        assert response.json()["message"]
    message = admin.post("/_sandbox/chatbots", json={"id": "x", "settings": {"temp": 2}})
    assert "temp" in message.json()["message"]


def test_dashboard_edit(admin: httpx.Client, api: httpx.Client, bot: str) -> None:
    spec: dict[str, Any] = {
        "settings": {"name": "Edited", "styles": {"theme": "dark"}},
        "attributes": [
            {"name": "plan", "label": "Plan tier", "archived": True},
            {"name": "fresh", "type": "boolean"},
        ],
    }
    response = admin.patch(f"/_sandbox/chatbots/{bot}", json=spec)
    assert response.status_code == 200
    attrs = {a["name"]: a for a in api.get(f"/chatbots/{bot}/custom-attributes").json()["data"]}
    assert attrs["plan"] == {
        "name": "plan",
        "label": "Plan tier",
        "type": "text",
        "description": None,
        "archived": True,
    }
    assert attrs["legacy"]["archived"] is True  # untouched
    assert attrs["fresh"]["type"] == "boolean"
    assert api.get("/get-chatbots").json()["chatbots"][0]["name"] == "Edited"
    change_type = {"attributes": [{"name": "plan", "type": "number"}]}
    assert admin.patch(f"/_sandbox/chatbots/{bot}", json=change_type).status_code == 400
    assert admin.patch("/_sandbox/chatbots/nope", json={}).status_code == 404


def test_request_log_redacts_and_clears(admin: httpx.Client, api: httpx.Client, bot: str) -> None:
    api.post("/update-chatbot-settings", json={"chatbotId": bot, "temp": "hot"})
    api.get("/get-conversations", params={"chatbotId": bot, "page": "1"})
    (first, second) = admin.get("/_sandbox/requests").json()["requests"]
    assert first["method"] == "POST"
    assert first["path"] == "/api/v1/update-chatbot-settings"
    assert first["body"] == {"chatbotId": bot, "temp": "hot"}
    assert first["status"] == 400
    assert "temp" in first["detail"]
    assert second["query"] == {"chatbotId": bot, "page": "1"}
    assert second["seq"] == first["seq"] + 1
    assert "test-key" not in admin.get("/_sandbox/requests").text
    assert admin.delete("/_sandbox/requests").status_code == 200
    assert admin.get("/_sandbox/requests").json()["requests"] == []


def test_state_hides_keys(admin: httpx.Client, bot: str) -> None:
    state = admin.get("/_sandbox/state")
    assert "test-key" not in state.text
    (account,) = state.json()["accounts"]
    assert account["plan"] == "standard"
    assert state.json()["chatbots"][0]["account"] == account["id"]


def test_reset_restores_start(admin: httpx.Client, api: httpx.Client, bot: str) -> None:
    admin.post("/_sandbox/accounts", json={"key": "temp"})
    admin.post("/_sandbox/faults", json={"path": "*", "status": 500})
    assert admin.post("/_sandbox/reset").status_code == 200
    state = admin.get("/_sandbox/state").json()
    assert state["chatbots"] == []
    assert len(state["accounts"]) == 1
    assert admin.get("/_sandbox/faults").json()["faults"] == []
    assert api.get("/get-chatbots").status_code == 200


def test_admin_refuses_non_loopback_clients() -> None:
    app = create_app(SandboxConfig(db=":memory:"))

    async def get(client_host: str) -> int:
        transport = httpx.ASGITransport(app=app, client=(client_host, 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as client:
            return (await client.get("/_sandbox/state")).status_code

    assert asyncio.run(get("203.0.113.9")) == 403
    assert asyncio.run(get("::1")) == 200


@pytest.mark.parametrize("body", [b"{", b"[]"])
def test_admin_bad_json(admin: httpx.Client, body: bytes) -> None:
    assert admin.post("/_sandbox/chatbots", content=body).status_code == 400


def test_dashboard_may_store_negative_counts_the_v1_write_refuses(
    admin: httpx.Client, api: httpx.Client, bot: str
) -> None:
    """The contract gives ipLimit, ipLimitTimeframe and autoOpenChatWindowAfter no lower
    bound; the v1 write refuses a negative one, but the dashboard may hold it."""
    negative = {
        "ipLimit": -1,
        "ipLimitTimeframe": -60,
        "styles": {"autoOpenChatWindowAfter": -5},
    }
    refused = api.post("/update-chatbot-settings", json={"chatbotId": bot, **negative})
    assert refused.status_code == 400
    edited = admin.patch(f"/_sandbox/chatbots/{bot}", json={"settings": negative})
    assert edited.status_code == 200, edited.text
    assert {k: edited.json()["settings"][k] for k in negative} == negative
    created = admin.post("/_sandbox/chatbots", json={"id": "neg", "settings": negative})
    assert created.status_code == 201
    still_typed = admin.patch(f"/_sandbox/chatbots/{bot}", json={"settings": {"ipLimit": 1.5}})
    assert still_typed.status_code == 400
