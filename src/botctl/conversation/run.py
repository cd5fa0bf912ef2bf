"""Running conversation tests: every (test, chatbot, repeat) conversation at once within the
run's parallelism (the clients pace the requests to the service), each conversation's turns in
order, each answer taken into the conversation for the next turn."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from botctl.config.conversation import ConversationTest
from botctl.config.document import Judge
from botctl.conversation.expect import check, clip, quote
from botctl.conversation.judge import OffFormat, prompt, verdict
from botctl.conversation.report import CaseResult, RunResult, TestReport, TurnResult
from botctl.errors import ApiError, ServiceError
from botctl.models import BotSpec
from botctl.service.sse import ChatAnswer
from botctl.values import mask_secrets_in_text

PLAN_403 = (
    "the service refused the chat operation (HTTP 403): it needs a paid plan, and gpt-4 and "
    "gpt-4-turbo need the Standard or Unlimited plan; check the plan of the account of ${env}"
)


@dataclass(frozen=True)
class ChatRequest:
    bot: BotSpec
    messages: list[dict[str, str]]
    stream: bool
    model: str | None
    temperature: float | None
    conversation_id: str | None


Chat = Callable[[ChatRequest], Awaitable[ChatAnswer]]


def cases(
    tests: Sequence[ConversationTest], bots: Sequence[BotSpec]
) -> list[tuple[ConversationTest, BotSpec]]:
    """Each test against each of its chatbots among ``bots``, in the tests' order."""
    by_name = {b.name: b for b in bots}
    return [(t, by_name[name]) for t in tests for name in t.chatbots if name in by_name]


async def run_tests(
    tests: Sequence[ConversationTest],
    bots: Sequence[BotSpec],
    chat: Chat,
    *,
    parallelism: int,
    secrets: Iterable[str] = (),
    judges: Mapping[str, BotSpec] | None = None,
) -> TestReport:
    todo = cases(tests, bots)
    results = await run_cases(
        todo, chat, parallelism=parallelism, secrets=secrets, judges=judges or {}
    )
    covered = {b.name for _, b in todo}
    return TestReport(results, tuple(b.name for b in bots if b.name not in covered))


async def run_cases(
    todo: Sequence[tuple[ConversationTest, BotSpec]],
    chat: Chat,
    *,
    parallelism: int,
    secrets: Iterable[str] = (),
    judges: Mapping[str, BotSpec],
) -> tuple[CaseResult, ...]:
    """Each (test, chatbot) case, every run of every case at once within ``parallelism``;
    ``judges``: the chatbots ``expect.judge`` names, by ``metadata.name``."""
    secrets = tuple(secrets)
    gate = asyncio.Semaphore(max(1, parallelism))

    async def one_run(test: ConversationTest, bot: BotSpec) -> RunResult:
        async with gate:
            return await _conversation(test, bot, chat, secrets, judges)

    async def one_case(test: ConversationTest, bot: BotSpec) -> CaseResult:
        started = time.monotonic()
        runs = await asyncio.gather(*(one_run(test, bot) for _ in range(test.spec.repeat)))
        return CaseResult(
            test.name,
            test.source,
            bot.name,
            bot.chatbot_id,
            tuple(runs),
            test.spec.passRate,
            time.monotonic() - started,
        )

    return tuple(await asyncio.gather(*(one_case(t, b) for t, b in todo)))


class _Stop(Exception):
    """The chat operation (of the chatbot or of its judge) failed: no verdict on this run."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


async def _ask(chat: Chat, request: ChatRequest, who: str = "") -> ChatAnswer:
    try:
        return await chat(request)
    except ApiError as exc:
        if exc.status == 403:
            raise _Stop(who + PLAN_403.replace("${env}", f"${request.bot.api_key_env}")) from None
        raise _Stop(who + str(exc)) from None
    except ServiceError as exc:
        raise _Stop(who + str(exc)) from None


async def _conversation(
    test: ConversationTest,
    bot: BotSpec,
    chat: Chat,
    secrets: tuple[str, ...],
    judges: Mapping[str, BotSpec],
) -> RunResult:
    spec = test.spec
    conversation_id = f"botctl-test-{test.name}-{uuid.uuid4().hex[:12]}" if spec.store else None
    sent: list[dict[str, str]] = []
    turns: list[TurnResult] = []
    messages = spec.conversation
    for i, message in enumerate(messages):
        sent.append({"role": message.role, "content": message.content})
        if message.role != "user" or (i + 1 < len(messages) and messages[i + 1].role != "user"):
            continue
        request = ChatRequest(
            bot, list(sent), spec.stream, spec.model, spec.temperature, conversation_id
        )
        try:
            answer = await _ask(chat, request)
            failures = check(message.expect, answer, secrets)
            judged = message.expect.judge if message.expect is not None else None
            if judged is not None:
                judge = judges[judged.chatbot]
                failures += await _judged(chat, judge, judged, message.content, answer, secrets)
        except _Stop as stop:
            return RunResult(tuple(turns), stop.message)
        turns.append(
            TurnResult(
                i,
                clip(message.content, secrets),
                clip(answer.text, secrets),
                answer.seconds,
                answer.first_event_seconds,
                tuple(failures),
                mask_secrets_in_text(answer.text, secrets),
            )
        )
        sent.append({"role": "assistant", "content": answer.text})
    return RunResult(tuple(turns))


async def _judged(
    chat: Chat,
    judge: BotSpec,
    spec: Judge,
    question: str,
    answer: ChatAnswer,
    secrets: tuple[str, ...],
) -> list[str]:
    """The judge's verdict on ``answer``: no failure when it passes, one when it fails; a
    judge that cannot answer, or answers off-format, stops the run (an error)."""
    who = f"judge {judge.name} ({judge.chatbot_id}): "
    text = prompt(spec.rubric, question, answer.text)
    request = ChatRequest(judge, [{"role": "user", "content": text}], False, None, 0.0, None)
    said = await _ask(chat, request, who)
    try:
        found = verdict(said.text)
    except OffFormat as exc:
        raise _Stop(f"{who}answered off-format: {exc}: {quote(said.text, secrets)}") from None
    if found.passed:
        return []
    why = f": {quote(found.reason, secrets)}" if found.reason else ""
    return [
        f"judge {judge.name}: FAIL{why} (rubric {quote(spec.rubric, secrets)}): the answer "
        f"{quote(answer.text, secrets)}"
    ]
