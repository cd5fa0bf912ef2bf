"""POST /chat (4.2) and GET /get-conversations (4.6)."""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest

from botctl import contract

HI = [{"role": "user", "content": "Hello there"}]


def chat(api: httpx.Client, **fields: Any) -> httpx.Response:
    return api.post("/chat", json={"chatbotId": "bot-1", "messages": HI, **fields})


def test_answer_is_deterministic_json(api: httpx.Client, bot: str) -> None:
    first = chat(api)
    assert first.status_code == 200
    assert first.json() == {"text": "Sandbox answer (gpt-4o-mini): you said Hello there"}
    assert chat(api).json() == first.json()
    assert "gpt-4.1" in chat(api, model="gpt-4.1", temperature=1).json()["text"]


def test_stream_is_data_only_sse_ending_done(api: httpx.Client, bot: str) -> None:
    with api.stream(
        "POST", "/chat", json={"chatbotId": bot, "messages": HI, "stream": True}
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    text = "".join(line[len("data: ") :] for line in lines[:-1])
    assert text == chat(api).json()["text"]


def test_conversation_saved_and_overridden(api: httpx.Client, bot: str) -> None:
    assert api.get("/get-conversations", params={"chatbotId": bot}).json() == {"data": []}
    chat(api)  # no conversationId: not saved
    assert api.get("/get-conversations", params={"chatbotId": bot}).json() == {"data": []}
    chat(api, conversationId="c1")
    answer = chat(api).json()["text"]
    history = [*HI, {"role": "assistant", "content": answer}, {"role": "user", "content": "More"}]
    api.post("/chat", json={"chatbotId": bot, "messages": history, "conversationId": "c1"})
    (conv,) = api.get("/get-conversations", params={"chatbotId": bot}).json()["data"]
    assert conv["id"] == "c1"
    assert conv["source"] == "API"
    assert [m["content"] for m in conv["messages"]] == [
        "Hello there",
        answer,
        "More",
        "Sandbox answer (gpt-4o-mini): you said More",
    ]
    assert {m["role"] for m in conv["messages"]} == {"user", "assistant"}
    # the latest call's messages override what was saved
    api.post("/chat", json={"chatbotId": bot, "messages": HI, "conversationId": "c1"})
    (conv,) = api.get("/get-conversations", params={"chatbotId": bot}).json()["data"]
    assert len(conv["messages"]) == 2


def test_conversation_filters_and_paging(api: httpx.Client, bot: str) -> None:
    for i in range(3):
        chat(api, conversationId=f"c{i}")
    q = {"chatbotId": bot}
    assert [c["id"] for c in api.get("/get-conversations", params=q).json()["data"]] == [
        "c2",
        "c1",
        "c0",
    ]
    page2 = api.get("/get-conversations", params={**q, "size": 2, "page": 2}).json()["data"]
    assert [c["id"] for c in page2] == ["c0"]
    assert (
        len(api.get("/get-conversations", params={**q, "filteredSources": "API"}).json()["data"])
        == 3
    )
    playground = {**q, "filteredSources": "Playground,Widget or Iframe"}
    assert api.get("/get-conversations", params=playground).json()["data"] == []
    past = {**q, "startDate": "2000-01-01", "endDate": "2000-12-31"}
    assert api.get("/get-conversations", params=past).json()["data"] == []
    wide = {**q, "startDate": "2000-01-01", "endDate": "2999-12-31"}
    assert len(api.get("/get-conversations", params=wide).json()["data"]) == 3


@pytest.mark.parametrize(
    "params",
    [
        {},
        {"chatbotId": "bot-1", "startDate": "2024-13-01"},
        {"chatbotId": "bot-1", "endDate": "01/02/2024"},
        {"chatbotId": "bot-1", "startDate": "2024-1-1"},
        {"chatbotId": "bot-1", "startDate": "2024-02-02", "endDate": "2024-02-01"},
        {"chatbotId": "bot-1", "size": 101},
        {"chatbotId": "bot-1", "page": 0},
        {"chatbotId": "bot-1", "filteredSources": "Email"},
        {"chatbotId": "bot-1", "sort": "asc"},
    ],
)
def test_conversations_bad_query_400(api: httpx.Client, bot: str, params: dict[str, Any]) -> None:
    assert api.get("/get-conversations", params=params).status_code == 400


def test_conversations_404_401_500(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    assert api.get("/get-conversations", params={"chatbotId": "nope"}).status_code == 404
    no_key = api.get("/get-conversations", params={"chatbotId": bot}, headers={"Authorization": ""})
    assert no_key.status_code == 401
    admin.post("/_sandbox/faults", json={"path": "/api/v1/get-conversations", "status": 500})
    assert api.get("/get-conversations", params={"chatbotId": bot}).status_code == 500


@pytest.mark.parametrize(
    "fields",
    [
        {"messages": []},
        {"messages": [{"role": "system", "content": "x"}]},
        {"messages": [{"role": "user"}]},
        {"messages": [{"role": "user", "content": 1}]},
        {"messages": [{"role": "assistant", "content": "I end"}]},
        {"temperature": 1.5},
        {"temperature": "0"},
        {"stream": "true"},
        {"model": "gpt-5.2"},
        {"conversationId": 5},
        {"chatbotId": None},
        {"extra": True},
    ],
)
def test_chat_validation(api: httpx.Client, bot: str, fields: dict[str, Any]) -> None:
    assert chat(api, **fields).status_code == 400


def test_chat_unknown_chatbot(api: httpx.Client, bot: str) -> None:
    assert chat(api, chatbotId="nope").status_code == 404


@pytest.mark.parametrize(
    ("plan", "model", "status"),
    [
        ("free", None, 403),
        ("hobby", None, 200),
        ("hobby", "gpt-4", 403),
        ("hobby", "gpt-4-turbo", 403),
        ("hobby", "gpt-4o", 200),
        ("standard", "gpt-4", 200),
        ("unlimited", "gpt-4-turbo", 200),
    ],
)
def test_plans(
    api: httpx.Client, admin: httpx.Client, plan: str, model: str | None, status: int
) -> None:
    admin.post("/_sandbox/accounts", json={"key": plan, "plan": plan})
    admin.post("/_sandbox/chatbots", json={"id": "p", "account": plan})
    body: dict[str, Any] = {"chatbotId": "p", "messages": HI}
    if model:
        body["model"] = model
    response = api.post("/chat", json=body, headers={"Authorization": f"Bearer {plan}"})
    assert response.status_code == status
    if status == 403:
        assert response.json() == {"message": contract.MSG_FORBIDDEN}


def test_extra_sources_and_models(sandbox_factory: Any) -> None:
    """4.6: the four channel sources the contract does not name are accepted once named with
    `--extra-source`; `--extra-model` names serve the chat too."""
    running = sandbox_factory(extra_sources=("WhatsApp",), extra_models=("gpt-9-preview",))
    httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "b"}).raise_for_status()
    with httpx.Client(
        base_url=running.api_url, headers={"Authorization": "Bearer test-key"}
    ) as client:
        body = {"chatbotId": "b", "messages": HI, "model": "gpt-9-preview", "conversationId": "c"}
        assert client.post("/chat", json=body).status_code == 200
        q = {"chatbotId": "b"}
        channel = client.get("/get-conversations", params={**q, "filteredSources": "WhatsApp"})
        assert channel.status_code == 200
        assert channel.json()["data"] == []  # stored through the API: source API
        both = client.get("/get-conversations", params={**q, "filteredSources": "WhatsApp,API"})
        assert [c["id"] for c in both.json()["data"]] == ["c"]
        unnamed = client.get("/get-conversations", params={**q, "filteredSources": "Telegram"})
        assert unnamed.status_code == 400
    log = httpx.get(f"{running.url}/_sandbox/requests").json()["requests"]
    assert "--extra-source" in log[-1]["detail"]


REFUND = {"pattern": r"refund", "answer": "Refunds take 5 days."}


def script(admin: httpx.Client, bot: str, *replies: dict[str, Any]) -> httpx.Response:
    return admin.put(f"/_sandbox/chatbots/{bot}/replies", json={"replies": list(replies)})


def ask(api: httpx.Client, bot: str, question: str, **fields: Any) -> str:
    body = {"chatbotId": bot, "messages": [{"role": "user", "content": question}], **fields}
    response = api.post("/chat", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["text"])


def test_scripted_reply_by_pattern(api: httpx.Client, admin: httpx.Client, bot: str) -> None:
    assert script(admin, bot, REFUND).status_code == 200
    assert ask(api, bot, "How long does a REFUND take?") == "Refunds take 5 days."
    assert ask(api, bot, "Hello") == "Sandbox answer (gpt-4o-mini): you said Hello"
    assert admin.get(f"/_sandbox/chatbots/{bot}/replies").json() == {"replies": [REFUND]}
    (state,) = admin.get("/_sandbox/state").json()["chatbots"]
    assert state["replies"] == [REFUND]
    assert script(admin, bot).json() == {"replies": []}  # cleared
    assert ask(api, bot, "refund?").startswith("Sandbox answer")


def test_scripted_reply_follows_the_settings(
    api: httpx.Client, admin: httpx.Client, bot: str
) -> None:
    """A reply only while the instructions contain a phrase: a prompt change changes the
    answer, as a test must be able to show."""
    policy = {"setting": "instructions", "contains": "Refund Policy"}
    script(
        admin,
        bot,
        {**REFUND, "when": policy},
        {
            "pattern": "refund",
            "answer": "I cannot help.",
            "when": {"setting": "model", "equals": "gpt-4o-mini"},
        },
    )
    assert ask(api, bot, "refund") == "I cannot help."
    api.post(
        "/update-chatbot-settings",
        json={"chatbotId": bot, "instructions": "Follow the refund policy."},
    )
    assert ask(api, bot, "refund") == "Refunds take 5 days."
    saved = api.post(
        "/update-chatbot-settings",
        json={"chatbotId": bot, "instructions": "Be brief.", "model": "gpt-oss-20b"},
    )
    assert saved.status_code == 202, saved.text
    assert ask(api, bot, "refund").startswith("Sandbox answer (gpt-oss-20b)")


def test_scripted_reply_streams_the_same_text(
    api: httpx.Client, admin: httpx.Client, bot: str
) -> None:
    script(admin, bot, {"pattern": ".", "answer": "Line one\nline two ends."})
    body = {"chatbotId": bot, "messages": HI, "stream": True}
    with api.stream("POST", "/chat", json=body) as response:
        raw = response.read().decode()
    events = [e for e in raw.split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    texts = ["\n".join(line[len("data: ") :] for line in e.split("\n")) for e in events[:-1]]
    assert "".join(texts) == "Line one\nline two ends."


@pytest.mark.parametrize(
    ("body", "detail"),
    [
        ({}, "replies: required"),
        ({"replies": [{"answer": "x"}]}, "replies[0].pattern: required"),
        ({"replies": [{"pattern": "(", "answer": "x"}]}, "replies[0].pattern: not a regular"),
        ({"replies": [{"pattern": "a", "answer": 1}]}, "replies[0].answer: must be a string"),
        ({"replies": [{"pattern": "a", "answer": "b", "extra": 1}]}, "unknown field 'extra'"),
        (
            {"replies": [{"pattern": "a", "answer": "b", "when": {"setting": "model"}}]},
            "exactly one of equals or contains",
        ),
        (
            {"replies": [{"pattern": "a", "answer": "b", "when": {"setting": "a b", "equals": 1}}]},
            "replies[0].when.setting: must be",
        ),
    ],
)
def test_script_validation(
    admin: httpx.Client, bot: str, body: dict[str, Any], detail: str
) -> None:
    response = admin.put(f"/_sandbox/chatbots/{bot}/replies", json=body)
    assert response.status_code == 400
    assert detail in response.json()["message"]
    assert admin.get(f"/_sandbox/chatbots/{bot}/replies").json() == {"replies": []}


def test_script_unknown_chatbot(admin: httpx.Client, sandbox_url: str) -> None:
    assert script(admin, "nope", REFUND).status_code == 404


def test_latency_delays_the_first_event(sandbox_factory: Any) -> None:
    running = sandbox_factory(latency_ms=120)
    httpx.post(f"{running.url}/_sandbox/chatbots", json={"id": "b"}).raise_for_status()
    headers = {"Authorization": "Bearer test-key"}
    body = {"chatbotId": "b", "messages": HI, "stream": True}
    started = time.perf_counter()
    with httpx.stream("POST", f"{running.api_url}/chat", json=body, headers=headers) as response:
        first = next(response.iter_lines())
        waited = time.perf_counter() - started
    assert first.startswith("data: ")
    assert waited >= 0.12
