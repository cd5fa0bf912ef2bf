"""Stored conversations seeded "in the dashboard" and listed by GET /get-conversations (4.6),
and the unscripted chat answer that follows the instructions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from botctl.sandbox.config import SandboxConfig, SandboxConfigError
from botctl.sandbox.store import Store
from botctl.sandbox.world import bootstrap

STORED = [
    {
        "id": "c-old",
        "source": "API",
        "created_at": "2025-04-01T08:00:00Z",
        "messages": [{"role": "user", "content": "Old"}, {"role": "assistant", "content": "A"}],
    },
    {
        "id": "c-new",
        "source": "Widget or Iframe",
        "created_at": "2025-05-02T09:30:00+02:00",
        "messages": [
            {"role": "system", "content": "note", "type": "event"},
            {"role": "user", "content": "New"},
        ],
    },
]


def listed(api: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    response = api.get("/get-conversations", params={"chatbotId": "bot-1", **params})
    assert response.status_code == 200, response.text
    return list(response.json()["data"])


def test_seeded_conversations_are_listed_newest_first(
    api: httpx.Client, admin: httpx.Client, bot: str
) -> None:
    assert admin.patch(f"/_sandbox/chatbots/{bot}", json={"conversations": STORED}).is_success
    new, old = listed(api)
    assert (new["id"], old["id"]) == ("c-new", "c-old")
    assert new["created_at"] == "2025-05-02T07:30:00.000Z"
    assert new["chatbot_id"] == "bot-1"
    assert new["messages"][0] == {
        "role": "system", "content": "note", "type": "event", "id": "c-new-0"
    }  # fmt: skip
    assert new["messages"][1]["type"] == "text"
    assert [c["id"] for c in listed(api, startDate="2025-05-01")] == ["c-new"]
    assert [c["id"] for c in listed(api, filteredSources="API")] == ["c-old"]
    assert [c["id"] for c in listed(api, page=2, size=1)] == ["c-old"]
    # One of the same id is replaced.
    again = {**STORED[0], "messages": [{"role": "user", "content": "Edited"}]}
    admin.patch(f"/_sandbox/chatbots/{bot}", json={"conversations": [again]})
    assert [m["content"] for m in listed(api)[1]["messages"]] == ["Edited"]


@pytest.mark.parametrize(
    ("conversation", "message"),
    [
        ({"source": "API", "messages": [{"role": "user", "content": "x"}]}, ".id: required"),
        ({"id": "c", "source": "API", "messages": []}, "messages: must be an array of 1 to"),
        (
            {"id": "c", "source": "API", "created_at": "2025-05-02T09:30:00", "messages": [{}]},
            "created_at: must name its time zone",
        ),
        ({"id": "c", "source": "API", "messages": [{"role": ""}]}, "role: must not be empty"),
        ({"id": "c", "source": "API", "messages": [{"role": "user"}]}, "content: required"),
    ],
)
def test_a_malformed_seeded_conversation_is_refused(
    admin: httpx.Client, bot: str, conversation: dict[str, Any], message: str
) -> None:
    response = admin.patch(f"/_sandbox/chatbots/{bot}", json={"conversations": [conversation]})
    assert response.status_code == 400
    assert message in response.json()["message"]


def test_a_seed_file_holds_conversations(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(
        "accounts: [{key: k}]\nchatbots:\n  - id: b1\n    conversations:\n"
        "      - {id: c1, source: Playground, messages: [{role: user, content: Hi}]}\n"
    )
    store = Store(":memory:")
    bootstrap(store, SandboxConfig(db=":memory:", seed=seed))
    (record,) = store.conversations("b1")
    assert (record["id"], record["source"]) == ("c1", "Playground")
    seed.write_text("chatbots: [{id: b2, conversations: [{id: c1}]}]\n")
    with pytest.raises(SandboxConfigError, match=r"chatbots\[0\]: conversations\[0\]\.source"):
        bootstrap(
            Store(":memory:"), SandboxConfig(db=":memory:", seed=seed, api_keys={"k": "standard"})
        )


def ask(api: httpx.Client, question: str) -> str:
    body = {"chatbotId": "bot-1", "messages": [{"role": "user", "content": question}]}
    return str(api.post("/chat", json=body).json()["text"])


def test_an_unscripted_answer_follows_the_instructions(api: httpx.Client, bot: str) -> None:
    instructions = (
        "You are the support assistant.\nPasswords are reset from the sign-in page. "
        "Refunds take 5 days!"
    )
    api.post("/update-chatbot-settings", json={"chatbotId": bot, "instructions": instructions})
    assert ask(api, "How long does a REFUND take?") == (
        "Sandbox answer (gpt-4o-mini): Refunds take 5 days!"
    )
    assert ask(api, "password?") == (
        "Sandbox answer (gpt-4o-mini): Passwords are reset from the sign-in page."
    )
    assert ask(api, "Hello") == "Sandbox answer (gpt-4o-mini): you said Hello"
