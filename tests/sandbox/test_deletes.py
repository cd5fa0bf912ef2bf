"""DELETE /delete-chatbot (4.11) and DELETE /delete-chatbot-icon (4.10)."""

from __future__ import annotations

import httpx

from botctl import contract


def test_delete_chatbot_removes_everything(
    api: httpx.Client, admin: httpx.Client, bot: str
) -> None:
    api.post(f"/chatbots/{bot}/contacts", json={"users": [{"external_id": "u"}]})
    response = api.delete("/delete-chatbot", params={"chatbotId": bot})
    assert response.status_code == 200
    assert response.json() == {"message": "Deleted successfully"}
    assert admin.get("/_sandbox/state").json()["chatbots"] == []
    assert api.get(f"/chatbots/{bot}/contacts").status_code == 404
    assert api.delete("/delete-chatbot", params={"chatbotId": bot}).status_code == 404
    # recreated with the same id: nothing of the old one comes back
    admin.post("/_sandbox/chatbots", json={"id": bot})
    assert api.get(f"/chatbots/{bot}/custom-attributes").json()["data"] == []


def test_delete_chatbot_failures(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    assert api.delete("/delete-chatbot").status_code == 404  # no 400 listed for this operation
    assert (
        api.delete(
            "/delete-chatbot", params={"chatbotId": bot}, headers={"Authorization": "Bearer x"}
        ).status_code
        == 401
    )
    admin.post("/_sandbox/accounts", json={"key": "other"})
    other = {"Authorization": "Bearer other"}
    assert (
        api.delete("/delete-chatbot", params={"chatbotId": bot}, headers=other).status_code == 404
    )
    admin.post("/_sandbox/faults", json={"path": "/api/v1/delete-chatbot", "status": 500})
    assert api.delete("/delete-chatbot", params={"chatbotId": bot}).status_code == 500
    assert len(admin.get("/_sandbox/state").json()["chatbots"]) == 1


def test_delete_icon(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    response = api.delete("/delete-chatbot-icon", params={"chatbotId": bot})
    assert response.status_code == 200
    assert response.json() == {"message": "Deleted successfully"}
    assert admin.get("/_sandbox/state").json()["chatbots"][0]["icon"] is False
    again = api.delete("/delete-chatbot-icon", params={"chatbotId": bot})
    assert again.status_code == 404
    assert again.json() == {"message": contract.MSG_NOT_FOUND}


def test_delete_icon_failures(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    missing = api.delete("/delete-chatbot-icon")
    assert missing.status_code == 400
    assert missing.json() == {"message": contract.MSG_INVALID_DATA}
    assert api.delete("/delete-chatbot-icon", params={"chatbotId": "x"}).status_code == 404
    assert (
        api.delete(
            "/delete-chatbot-icon", params={"chatbotId": bot}, headers={"Authorization": "Bearer x"}
        ).status_code
        == 401
    )
    admin.post("/_sandbox/faults", json={"path": "/api/v1/delete-chatbot-icon", "status": 500})
    assert api.delete("/delete-chatbot-icon", params={"chatbotId": bot}).status_code == 500
