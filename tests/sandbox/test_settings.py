"""POST /update-chatbot-settings (contract 4.1, 2.1-2.4) and authentication (section 5)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from botctl import contract


def stored(admin: httpx.Client, bot: str) -> dict[str, Any]:
    bots = admin.get("/_sandbox/state").json()["chatbots"]
    settings: dict[str, Any] = next(b for b in bots if b["id"] == bot)["settings"]
    return settings


FULL = {
    "name": "Helper",
    "instructions": "Be brief.",
    "initialMessages": ["Hi!"],
    "suggestedMessages": ["Pricing?", "Hours?"],
    "visibility": "private",
    "domains": ["example.com"],
    "onlyAllowOnAddedDomains": True,
    "ipLimit": 20,
    "ipLimitTimeframe": 3600,
    "ipLimitMessage": "Slow down",
    "model": "claude-sonnet-4-5",
    "temp": 0.2,
    "styles": {
        "theme": "dark",
        "buttonColor": "#1a2B3c",
        "displayName": "Helper",
        "alignChatButton": "left",
        "userMessageColor": "#fff",
        "autoOpenChatWindowAfter": 0,
    },
    "collectCustomerInformation": {
        "title": "Who are you?",
        "name": {"active": True, "label": "Name"},
        "email": {"active": False, "label": "E-mail"},
        "phone": {"active": True, "label": "Phone"},
    },
}


def test_every_field_saved_with_202(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    response = api.post("/update-chatbot-settings", json={"chatbotId": bot, **FULL})
    assert response.status_code == 202
    assert response.json() == {"message": contract.MSG_SETTINGS_SAVED}
    assert stored(admin, bot) == FULL


def test_partial_update_keeps_omitted_and_nested_replaces_whole(
    api: httpx.Client, admin: httpx.Client, bot: str
) -> None:
    api.post("/update-chatbot-settings", json={"chatbotId": bot, **FULL})
    body = {"chatbotId": bot, "temp": 1, "styles": {"theme": "light"}}
    assert api.post("/update-chatbot-settings", json=body).status_code == 202
    settings = stored(admin, bot)
    assert settings["styles"] == {"theme": "light"}
    assert settings["temp"] == 1
    assert settings["name"] == "Helper"
    assert settings["collectCustomerInformation"] == FULL["collectCustomerInformation"]


def test_only_chatbot_id_is_a_no_op(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    before = stored(admin, bot)
    assert api.post("/update-chatbot-settings", json={"chatbotId": bot}).status_code == 202
    assert stored(admin, bot) == before


@pytest.mark.parametrize("model", contract.SETTINGS_MODELS)
def test_every_listed_model_accepted(api: httpx.Client, bot: str, model: str) -> None:
    body = {"chatbotId": bot, "model": model}
    assert api.post("/update-chatbot-settings", json=body).status_code == 202


@pytest.mark.parametrize(
    "fields",
    [
        {"temp": "0.2"},
        {"temp": True},
        {"temp": 1.01},
        {"temp": -0.01},
        {"ipLimit": True},
        {"ipLimit": 1.5},
        {"ipLimit": -1},
        {"ipLimitTimeframe": "60"},
        {"name": None},
        {"name": 5},
        {"initialMessages": "Hi"},
        {"suggestedMessages": ["ok", 3]},
        {"domains": [None]},
        {"onlyAllowOnAddedDomains": 1},
        {"visibility": "hidden"},
        {"model": "gpt-4"},
        {"model": "GPT-4O-MINI"},
        {"styles": {"theme": "blue"}},
        {"styles": {"buttonColor": "red"}},
        {"styles": {"buttonColor": "#12345"}},
        {"styles": {"alignChatButton": "center"}},
        {"styles": {"autoOpenChatWindowAfter": False}},
        {"styles": {"fontSize": 3}},
        {"styles": "dark"},
        {"collectCustomerInformation": {"name": {"active": "yes"}}},
        {"collectCustomerInformation": {"name": {"label": 1}}},
        {"collectCustomerInformation": {"address": {"active": True}}},
        {"collectCustomerInformation": {"title": None}},
        {"unknownField": 1},
        {"chatbot_id": "x"},
    ],
)
def test_invalid_fields_are_400(
    api: httpx.Client, admin: httpx.Client, bot: str, fields: dict[str, Any]
) -> None:
    before = stored(admin, bot)
    response = api.post("/update-chatbot-settings", json={"chatbotId": bot, **fields})
    assert response.status_code == 400
    assert response.json() == {"message": contract.MSG_INVALID_DATA}
    assert stored(admin, bot) == before


def test_temp_limits_inclusive(api: httpx.Client, bot: str) -> None:
    for temp in (0, 0.0, 1, 1.0):
        body = {"chatbotId": bot, "temp": temp}
        assert api.post("/update-chatbot-settings", json=body).status_code == 202


@pytest.mark.parametrize("body", [{}, {"chatbotId": 7}, {"chatbotId": ""}])
def test_chatbot_id_required_string(api: httpx.Client, bot: str, body: dict[str, Any]) -> None:
    assert api.post("/update-chatbot-settings", json=body).status_code == 400


@pytest.mark.parametrize(
    ("content", "ctype"),
    [
        (b"{not json", "application/json"),
        (b"[1, 2]", "application/json"),
        (b"", "application/json"),
        (b'"x"', "application/json"),
        (b"chatbotId=bot-1", "application/x-www-form-urlencoded"),
    ],
)
def test_malformed_body_is_invalid_request_body(
    api: httpx.Client, bot: str, content: bytes, ctype: str
) -> None:
    response = api.post(
        "/update-chatbot-settings", content=content, headers={"content-type": ctype}
    )
    assert response.status_code == 400
    assert response.json() == {"message": contract.MSG_INVALID_BODY}


def test_unknown_chatbot_is_404(api: httpx.Client, bot: str) -> None:
    response = api.post("/update-chatbot-settings", json={"chatbotId": "nope", "name": "x"})
    assert response.status_code == 404
    assert response.json() == {"message": contract.MSG_NOT_FOUND}


def test_other_accounts_chatbot_is_404(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    assert admin.post("/_sandbox/accounts", json={"key": "other"}).status_code == 201
    spec = {"id": "theirs", "account": "other", "settings": {"name": "Theirs"}}
    assert admin.post("/_sandbox/chatbots", json=spec).status_code == 201
    response = api.post("/update-chatbot-settings", json={"chatbotId": "theirs", "name": "Mine"})
    assert response.status_code == 404
    assert stored(admin, "theirs") == {"name": "Theirs"}
    other = {"Authorization": "Bearer other"}
    mine = api.post("/update-chatbot-settings", json={"chatbotId": bot}, headers=other)
    assert mine.status_code == 404
    names = [b["id"] for b in api.get("/get-chatbots", headers=other).json()["chatbots"]]
    assert names == ["theirs"]


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, contract.MSG_NO_KEY),
        ({"Authorization": "Bearer"}, contract.MSG_NO_KEY),
        ({"Authorization": "Bearer wrong"}, contract.MSG_UNAUTHORIZED),
        ({"Authorization": "Basic dGVzdC1rZXk="}, contract.MSG_UNAUTHORIZED),
        ({"Authorization": "test-key"}, contract.MSG_UNAUTHORIZED),
    ],
)
def test_auth_failures_are_401(
    sandbox_url: str, bot: str, headers: dict[str, str], expected: str
) -> None:
    response = httpx.post(
        f"{sandbox_url}/api/v1/update-chatbot-settings", json={"chatbotId": bot}, headers=headers
    )
    assert response.status_code == 401
    assert response.json() == {"message": expected}


def test_bearer_scheme_is_case_insensitive(sandbox_url: str, bot: str) -> None:
    response = httpx.post(
        f"{sandbox_url}/api/v1/update-chatbot-settings",
        json={"chatbotId": bot},
        headers={"Authorization": "bearer test-key"},
    )
    assert response.status_code == 202


@pytest.mark.parametrize("status", [403, 500])
def test_fault_statuses_listed_for_the_operation(
    api: httpx.Client, admin: httpx.Client, bot: str, status: int
) -> None:
    fault = {"method": "POST", "path": "/api/v1/update-chatbot-settings", "status": status}
    assert admin.post("/_sandbox/faults", json=fault).status_code == 201
    response = api.post("/update-chatbot-settings", json={"chatbotId": bot, "name": "X"})
    assert response.status_code == status
    assert response.json()["message"] in (contract.MSG_FORBIDDEN, contract.MSG_INTERNAL)
    assert stored(admin, bot)["name"] == "Support"


@pytest.mark.parametrize("colour", ["#fff8", "#ffffff80", "#0A84FFCC"])
def test_hex_colours_with_alpha_accepted(
    api: httpx.Client, admin: httpx.Client, bot: str, colour: str
) -> None:
    """2.3 says "hex colour code": CSS's four hex notations, alpha included."""
    body = {"chatbotId": bot, "styles": {"buttonColor": colour, "userMessageColor": colour}}
    assert api.post("/update-chatbot-settings", json=body).status_code == 202
    assert stored(admin, bot)["styles"] == body["styles"]


@pytest.mark.parametrize("colour", ["#fffff", "#fffffff", "#fffffffff", "#fff\n", "fff"])
def test_hex_colours_of_other_lengths_refused(api: httpx.Client, bot: str, colour: str) -> None:
    body = {"chatbotId": bot, "styles": {"buttonColor": colour}}
    assert api.post("/update-chatbot-settings", json=body).status_code == 400


def test_extra_model_accepted_only_when_configured(sandbox_factory: Any) -> None:
    """A model released after the contract: `--extra-model NAME` (SandboxConfig.extra_models)."""
    plain = sandbox_factory()
    extended = sandbox_factory(extra_models=("gpt-9-preview",))
    for running, expected in ((plain, 400), (extended, 202)):
        httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "b"}).raise_for_status()
        response = httpx.post(
            f"{running.api_url}/update-chatbot-settings",
            json={"chatbotId": "b", "model": "gpt-9-preview"},
            headers={"Authorization": "Bearer test-key"},
        )
        assert response.status_code == expected
    other = httpx.post(
        f"{extended.api_url}/update-chatbot-settings",
        json={"chatbotId": "b", "model": "gpt-10"},
        headers={"Authorization": "Bearer test-key"},
    )
    assert other.status_code == 400  # only the models named
