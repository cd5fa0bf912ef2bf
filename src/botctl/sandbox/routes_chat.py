"""v1 chat (4.2, `POST /chat`) and conversation listing (4.6)."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from datetime import date
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from botctl import contract
from botctl.sandbox import validation as v
from botctl.sandbox.scripts import instructed, scripted_answer
from botctl.sandbox.views import iso
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
PAID_PLANS = ("hobby", "standard", "unlimited")
SOURCE = "API"  # conversations stored through the API carry this source
CONVERSATIONS_DEFAULT_SIZE = 10
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _message(value: Any, where: str) -> JSON:
    return v.obj(value, where, {"role": v.one_of("user", "assistant"), "content": v.string})


def _messages(value: Any, where: str) -> list[JSON]:
    if not isinstance(value, list) or not value:
        raise v.Invalid(f"{where}: must be a non-empty array of messages")
    out = [_message(m, f"{where}[{i}]") for i, m in enumerate(value)]
    for i, m in enumerate(out):
        if set(m) != {"role", "content"}:
            raise v.Invalid(f"{where}[{i}]: role and content are required")
    # Strict: there is nothing to answer unless the conversation ends with the user.
    if out[-1]["role"] != "user":
        raise v.Invalid(f"{where}: the last message must have role user")
    return out


def _conversation_id(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise v.Invalid(f"{where}: must be a non-empty string")
    return value


def _chat_fields(models: tuple[str, ...]) -> dict[str, v.Check]:
    return {
        "messages": _messages,
        "chatbotId": _conversation_id,
        "stream": v.boolean,
        "temperature": v.temperature,
        "conversationId": _conversation_id,
        "model": v.one_of(*models),
    }


def answer_text(model: str, question: str, instructions: str = "") -> str:
    """The deterministic answer: same request and settings, same text, no language model
    involved. It follows the instructions as far as a sandbox can: the sentence of the
    instructions that shares the most words with the question (``scripts.instructed``) is
    the answer; with none, the question is echoed."""
    told = instructed(instructions, question)
    if told is not None:
        return f"Sandbox answer ({model}): {told}"
    return f"Sandbox answer ({model}): you said {question}"


def _events(text: str) -> list[str]:
    """Word-sized data-only events; a newline inside a chunk becomes a second data line."""
    chunks = re.findall(r"\s*\S+", text) or [text]
    events = ["".join(f"data: {line}\n" for line in c.split("\n")) + "\n" for c in chunks]
    return [*events, "data: [DONE]\n\n"]


async def chat(request: Request) -> Response:
    """4.2. Order of checks: key (401), plan (403 for free, before the body is read), body
    (400), chatbot (404), model against plan (403). Success is 200 `{"text": ...}`. A model
    is one of the contract's chat list or of the sandbox's `--extra-model`s. The text is the
    chatbot's scripted reply (``sandbox.scripts``) when one matches, else the default answer
    (``answer_text``: from the instructions when a sentence of them fits the question);
    `--latency-ms` holds the answer back before its head, so a stream's first event too."""
    key, plan = account(request)
    if plan not in PAID_PLANS:
        raise ApiError(403, contract.MSG_FORBIDDEN, "chat needs a paid plan")
    body = await json_object(request)
    try:
        req = v.obj(body, "", _chat_fields(runtime(request).config.chat_models))
        for required in ("messages", "chatbotId"):
            if required not in req:
                raise v.Invalid(f"{required}: required")
    except v.Invalid as exc:
        raise invalid(exc) from None
    bot = owned_chatbot(request, key, req["chatbotId"])
    model = req.get("model") or bot.settings.get("model") or "auto"
    if model in contract.CHAT_MODELS_STANDARD_ONLY and plan not in ("standard", "unlimited"):
        raise ApiError(403, contract.MSG_FORBIDDEN, f"{model} needs the standard plan")
    question = req["messages"][-1]["content"]
    script = runtime(request).store.replies(bot.id)
    scripted = scripted_answer(script, bot.settings, question) if script else None
    instructions = bot.settings.get("instructions")
    told = instructions if isinstance(instructions, str) else ""
    text = answer_text(model, question, told) if scripted is None else scripted
    if "conversationId" in req:
        _save(request, bot.id, req["conversationId"], req["messages"], text)
    if not req.get("stream", False):
        return JSONResponse({"text": text})

    async def stream() -> AsyncIterator[str]:
        for event in _events(text):
            yield event

    return StreamingResponse(stream(), media_type="text/event-stream")


def _save(request: Request, chatbot_id: str, conv_id: str, messages: list[JSON], text: str) -> None:
    """4.2 Saving: the latest call's messages replace what was saved, then the answer is
    appended; one conversation per (chatbotId, conversationId)."""
    store = runtime(request).store
    now = time.time()
    with store.atomic():
        old = store.conversation(chatbot_id, conv_id)
        created = now if old is None else float(old["_created"])
        items = [*messages, {"role": "assistant", "content": text}]
        record = {
            "id": conv_id,
            "chatbot_id": chatbot_id,
            "created_at": iso(created),
            "updated_at": iso(now),
            "source": SOURCE,
            "messages": [
                {**m, "id": f"{conv_id}-{i}", "type": "text"} for i, m in enumerate(items)
            ],
            "_created": created,
        }
        store.put_conversation(chatbot_id, record, created)


def _day(params: dict[str, str], name: str) -> date | None:
    raw = params.get(name)
    if raw is None:
        return None
    try:
        if not _DATE.match(raw):
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise ApiError(400, contract.MSG_INVALID_DATA, f"{name}: must be YYYY-MM-DD") from None


async def get_conversations(request: Request) -> JSONResponse:
    """4.6 with API-NOTES' parameter names. Strict choices: chatbotId required (400),
    startDate after endDate is a 400, dates filter on the UTC creation day inclusively,
    `size` is 1..100 (default 10), newest conversation first, no totals.

    Sources: the four the contract names, and the names given with `--extra-source` for the
    four channel sources it says exist but does not name; any other is a 400, since the
    sandbox cannot tell a channel it was not told of from a typo."""
    key, _ = account(request)
    names = ("chatbotId", "filteredSources", "startDate", "endDate", "page", "size")
    params = strict_query(request, names)
    chatbot_id = params.get("chatbotId", "")
    if not chatbot_id:
        raise ApiError(400, contract.MSG_INVALID_DATA, "chatbotId: required")
    start, end = _day(params, "startDate"), _day(params, "endDate")
    if start and end and start > end:
        raise ApiError(400, contract.MSG_INVALID_DATA, "startDate is after endDate")
    sources = None
    if "filteredSources" in params:
        sources = [s.strip() for s in params["filteredSources"].split(",")]
        known = runtime(request).config.conversation_sources
        unknown = [s for s in sources if s not in known]
        if unknown:
            detail = f"unknown source {unknown[0]!r} (name channel sources with --extra-source)"
            raise ApiError(400, contract.MSG_INVALID_DATA, detail)
    page = int_param(params, "page", 1, 1, None)
    size = int_param(
        params, "size", CONVERSATIONS_DEFAULT_SIZE, 1, contract.CONVERSATIONS_PAGE_SIZE_MAX
    )
    owned_chatbot(request, key, chatbot_id)
    found = []
    for record in runtime(request).store.conversations(chatbot_id):
        day = date.fromisoformat(record["created_at"][:10])
        if sources is not None and record["source"] not in sources:
            continue
        if (start and day < start) or (end and day > end):
            continue
        found.append({k: val for k, val in record.items() if not k.startswith("_")})
    return JSONResponse({"data": found[(page - 1) * size : page * size]})


ROUTES = [
    Route("/chat", chat, methods=["POST"]),
    Route("/get-conversations", get_conversations, methods=["GET"]),
]
