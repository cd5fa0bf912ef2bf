"""Running conversation tests: every (test, chatbot, repeat) conversation at once within the
run's parallelism (the clients pace the requests to the service), each conversation's turns in
order, each answer taken into the conversation for the next turn."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass

from botctl.config.conversation import ConversationTest
from botctl.conversation.expect import check, clip
from botctl.conversation.report import CaseResult, RunResult, TestReport, TurnResult
from botctl.errors import ApiError, ServiceError
from botctl.models import BotSpec
from botctl.service.sse import ChatAnswer

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
) -> TestReport:
    secrets = tuple(secrets)
    todo = cases(tests, bots)
    gate = asyncio.Semaphore(max(1, parallelism))

    async def one_run(test: ConversationTest, bot: BotSpec) -> RunResult:
        async with gate:
            return await _conversation(test, bot, chat, secrets)

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

    results = await asyncio.gather(*(one_case(t, b) for t, b in todo))
    covered = {b.name for _, b in todo}
    return TestReport(tuple(results), tuple(b.name for b in bots if b.name not in covered))


async def _conversation(
    test: ConversationTest, bot: BotSpec, chat: Chat, secrets: tuple[str, ...]
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
            answer = await chat(request)
        except ApiError as exc:
            if exc.status == 403:
                return RunResult(tuple(turns), PLAN_403.replace("${env}", f"${bot.api_key_env}"))
            return RunResult(tuple(turns), str(exc))
        except ServiceError as exc:
            return RunResult(tuple(turns), str(exc))
        turns.append(
            TurnResult(
                i,
                clip(message.content, secrets),
                clip(answer.text, secrets),
                answer.seconds,
                answer.first_event_seconds,
                tuple(check(message.expect, answer, secrets)),
            )
        )
        sent.append({"role": "assistant", "content": answer.text})
    return RunResult(tuple(turns))
