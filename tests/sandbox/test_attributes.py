"""Custom attributes: create (4.3), update / archive / unarchive (4.4, section 3)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from botctl import contract


def attrs(api: httpx.Client, bot: str) -> dict[str, dict[str, Any]]:
    return {a["name"]: a for a in api.get(f"/chatbots/{bot}/custom-attributes").json()["data"]}


def test_create_returns_200_with_record(api: httpx.Client, bot: str) -> None:
    body = {"name": "signup-date", "type": "date", "label": "Signed up", "description": "When"}
    response = api.post(f"/chatbots/{bot}/custom-attributes", json=body)
    assert response.status_code == 200
    assert response.json() == {"message": "Success", "data": {**body, "archived": False}}
    assert attrs(api, bot)["signup-date"]["label"] == "Signed up"


def test_create_archived(api: httpx.Client, bot: str) -> None:
    body = {"name": "old", "type": "boolean", "archived": True}
    assert api.post(f"/chatbots/{bot}/custom-attributes", json=body).json()["data"]["archived"]


@pytest.mark.parametrize(
    "body",
    [
        {"type": "text"},
        {"name": "x"},
        {"name": "1abc", "type": "text"},
        {"name": "_abc", "type": "text"},
        {"name": "a b", "type": "text"},
        {"name": "a.b", "type": "text"},
        {"name": "", "type": "text"},
        {"name": "ok", "type": "string"},
        {"name": "ok", "type": "text", "label": 3},
        {"name": "ok", "type": "text", "description": None},
        {"name": "ok", "type": "text", "archived": "false"},
        {"name": "ok", "type": "text", "required": True},
    ],
)
def test_create_validation(api: httpx.Client, bot: str, body: dict[str, Any]) -> None:
    response = api.post(f"/chatbots/{bot}/custom-attributes", json=body)
    assert response.status_code == 400
    assert response.json() == {"message": contract.MSG_INVALID_DATA}


@pytest.mark.parametrize("name", ["plan", "legacy", "PLAN"])
def test_duplicate_name_is_400(api: httpx.Client, bot: str, name: str) -> None:
    response = api.post(f"/chatbots/{bot}/custom-attributes", json={"name": name, "type": "text"})
    assert response.status_code == 400
    assert "already exists" in response.json()["message"]


def test_create_unknown_chatbot_404(api: httpx.Client, bot: str) -> None:
    body = {"name": "x", "type": "text"}
    response = api.post("/chatbots/nope/custom-attributes", json=body)
    assert response.status_code == 404


def test_archive_then_unarchive(api: httpx.Client, bot: str) -> None:
    url = f"/chatbots/{bot}/custom-attributes/plan"
    response = api.put(url, json={"archived": True})
    assert response.status_code == 200
    assert response.json()["data"] == {
        "name": "plan",
        "label": "Plan",
        "type": "text",
        "description": None,
        "archived": True,
    }
    assert attrs(api, bot)["plan"]["archived"] is True
    assert api.put(url, json={"archived": False}).json()["data"]["archived"] is False


def test_put_without_archived_unarchives_and_keeps_label(api: httpx.Client, bot: str) -> None:
    url = f"/chatbots/{bot}/custom-attributes/legacy"
    response = api.put(url, json={"description": "Old score"})
    assert response.json()["data"] == {
        "name": "legacy",
        "label": None,
        "type": "number",
        "description": "Old score",
        "archived": False,
    }


def test_put_changes_label(api: httpx.Client, bot: str) -> None:
    url = f"/chatbots/{bot}/custom-attributes/plan"
    body = {"label": "Tier", "archived": False}
    assert api.put(url, json=body).json()["data"]["label"] == "Tier"


@pytest.mark.parametrize(
    "body", [{"name": "plan"}, {"type": "text"}, {"label": 1}, {"archived": None}, {"x": 1}]
)
def test_put_validation(api: httpx.Client, bot: str, body: dict[str, Any]) -> None:
    response = api.put(f"/chatbots/{bot}/custom-attributes/plan", json=body)
    assert response.status_code == 400
    assert attrs(api, bot)["plan"]["archived"] is False


def test_put_unknown_attribute_or_chatbot(api: httpx.Client, bot: str) -> None:
    missing = api.put(f"/chatbots/{bot}/custom-attributes/Plan", json={"archived": True})
    assert missing.status_code == 404
    assert missing.json() == {"message": contract.MSG_ATTRIBUTE_NOT_FOUND}
    no_bot = api.put("/chatbots/nope/custom-attributes/plan", json={"archived": True})
    assert no_bot.status_code == 404


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/chatbots/bot-1/custom-attributes"),
        ("PUT", "/chatbots/bot-1/custom-attributes/plan"),
    ],
)
def test_attribute_writes_401_and_429(
    api: httpx.Client, admin: httpx.Client, bot: str, method: str, path: str
) -> None:
    body = {"name": "new", "type": "text"} if method == "POST" else {"archived": False}
    unauth = api.request(method, path, json=body, headers={"Authorization": "Bearer bad"})
    assert unauth.status_code == 401
    fault = {"method": method, "path": f"/api/v1{path}", "status": 429, "retry_after": 2}
    admin.post("/_sandbox/faults", json=fault)
    limited = api.request(method, path, json=body)
    assert limited.status_code == 429
    assert limited.headers["Retry-After"] == "2"
    fault["status"] = 500
    admin.post("/_sandbox/faults", json=fault)
    assert api.request(method, path, json=body).status_code == 500


def test_names_are_unique_in_any_case_and_identified_exactly(api: httpx.Client, bot: str) -> None:
    """botctl's rule for letter case (README): a create that differs from a held name only in
    case is refused, and the update's path names an attribute exactly."""
    assert (
        api.post(
            f"/chatbots/{bot}/custom-attributes", json={"name": "seats", "type": "number"}
        ).status_code
        == 200
    )
    clash = api.post(f"/chatbots/{bot}/custom-attributes", json={"name": "Seats", "type": "number"})
    assert clash.status_code == 400
    missing = api.put(
        f"/chatbots/{bot}/custom-attributes/Seats", json={"label": "x", "archived": False}
    )
    assert missing.status_code == 404
    assert [name for name in attrs(api, bot) if name.lower() == "seats"] == ["seats"]


def test_off_contract_records_are_listed_as_planted(
    admin: httpx.Client, api: httpx.Client, bot: str
) -> None:
    odd: list[Any] = [
        {"name": "a b", "type": "select"},
        {"type": "text"},
        {"name": "flag", "type": "boolean", "archived": 0},
    ]
    response = admin.patch(f"/_sandbox/chatbots/{bot}", json={"off_contract_attributes": odd})
    assert response.status_code == 200, response.text
    listed = api.get(f"/chatbots/{bot}/custom-attributes").json()["data"]
    assert listed[-3:] == odd
    # A well-formed create beside them still works, and one clashing in case with them not.
    assert (
        api.post(
            f"/chatbots/{bot}/custom-attributes", json={"name": "ok", "type": "text"}
        ).status_code
        == 200
    )
    assert (
        api.post(
            f"/chatbots/{bot}/custom-attributes", json={"name": "Flag", "type": "text"}
        ).status_code
        == 400
    )
