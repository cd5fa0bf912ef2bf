"""Stored conversations (4.6) -> ``ConversationTest`` documents a person reviews and commits
(``botctl conversations pull``). Pure: the pipeline reads the conversations and the contacts,
and writes the files.

What botctl takes of a stored conversation, where the contract leaves it open (2.6: the
roles and types of stored messages are "not shown"):

- a message of role ``user`` is a question, of role ``assistant`` the chatbot's answer; a
  message of any other role (``system``, a tool's) is left out, and counted;
- a message whose ``type`` is given and is not ``text`` (an image, a file, an event) is left
  out, and counted: the chat operation sends text only;
- questions in a row are one question (joined by a line break), answers in a row one answer;
  answers before the first question (the greeting) are left out;
- each question with a recorded answer becomes a sent user message whose ``expect`` is
  ``similarTo`` that answer with ``minSimilarity``; a last question without an answer is
  left out, and a conversation without an answered question is skipped;
- at most ``MAX_TURNS`` questions are kept, the first ones;
- a conversation whose questions are at least ``duplicate`` similar (the same measure) to
  those of a conversation kept before it (newest first) is a near-duplicate and skipped;
- every text is redacted (``conversation.redact``), and written literally (``${`` as
  ``$${``: nothing a customer typed is read back as a variable).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from botctl.config.document import HANDLE_MAX_LENGTH, MAX_TURNS
from botctl.config.export import BlockStringDumper, literal
from botctl.conversation.redact import Redactor
from botctl.conversation.similarity import similarity

NAME_WORDS = 40  # characters of the question in a test's name


@dataclass(frozen=True)
class Turn:
    question: str
    answer: str | None


@dataclass(frozen=True)
class Recorded:
    """One stored conversation as botctl reads it."""

    id: str
    created_at: str
    source: str
    turns: tuple[Turn, ...]
    left_out: Counter[str] = field(default_factory=Counter)  # messages, by why


def _field(record: Mapping[str, Any], name: str) -> str:
    value = record.get(name)
    return value if isinstance(value, str) else ""


def _message_kind(message: Any) -> str:
    """``user``, ``assistant``, or why the message is left out."""
    if not isinstance(message, Mapping) or not isinstance(message.get("content"), str):
        return "malformed message"
    kind = message.get("type")
    if kind is not None and kind != "text":
        return f"message of type {kind!r}" if isinstance(kind, str) else "malformed message"
    role = message.get("role")
    if role in ("user", "assistant"):
        return str(role) if message["content"].strip() else "empty message"
    return f"message of role {role!r}" if isinstance(role, str) else "malformed message"


def read_conversation(record: Mapping[str, Any]) -> Recorded | str:
    """The conversation's questions and answers, or why it cannot be used."""
    conv_id = _field(record, "id")
    messages = record.get("messages")
    if not conv_id or not isinstance(messages, list):
        return "malformed conversation (no id or no messages)"
    turns: list[Turn] = []
    asked: list[str] = []
    answered: list[str] = []
    left_out: Counter[str] = Counter()

    def close() -> None:
        if asked:
            turns.append(Turn("\n".join(asked), "\n".join(answered) or None))
        asked.clear()
        answered.clear()

    for message in messages:
        kind = _message_kind(message)
        if kind == "user":
            if answered:
                close()
            asked.append(message["content"].strip())
        elif kind == "assistant":
            if asked:
                answered.append(message["content"].strip())
            else:
                left_out["answer before any question"] += 1
        else:
            left_out[kind] += 1
    close()
    return Recorded(
        conv_id, _field(record, "created_at"), _field(record, "source"), tuple(turns), left_out
    )


@dataclass(frozen=True)
class PullRules:
    min_similarity: float  # written as each expectation's minSimilarity
    duplicate: float  # questions at least this similar to a kept conversation's: skipped
    most: int  # tests written per chatbot, at most


@dataclass(frozen=True)
class Pulled:
    """One test document drawn from a conversation."""

    name: str
    conversation_id: str
    text: str  # the YAML document

    @property
    def file_name(self) -> str:
        return f"{self.name}.yaml"


@dataclass
class Harvest:
    """What one chatbot's conversations gave: the tests, and what was skipped, by why."""

    tests: list[Pulled] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    left_out: Counter[str] = field(default_factory=Counter)  # messages of kept conversations


def pulled_name(bot: str, chatbot_id: str, conv_id: str, question: str) -> str:
    """``<chatbot>-<the first words of the question's last line>-<6 hex digits of the
    conversation>``:
    stable for the same conversation, so a second pull finds the file of the first."""
    digest = hashlib.sha256(f"{chatbot_id}\0{conv_id}".encode()).hexdigest()[:6]
    # The question's last line (a greeting often comes first), redactions left out.
    asked = re.sub(
        r"\[[a-z-]+\]", " ", question.strip().splitlines()[-1] if question.strip() else ""
    )
    words = re.sub(r"[^a-z0-9]+", "-", asked.lower()).strip("-")[:NAME_WORDS].strip("-")
    room = HANDLE_MAX_LENGTH - len(digest) - len(words) - 2
    head = bot[: max(room, 1)].rstrip("-._")
    return "-".join(part for part in (head, words, digest) if part)


@dataclass
class Harvester:
    """Takes one chatbot's conversations, newest first, into tests until ``rules.most``."""

    bot: str
    chatbot_id: str
    redact: Redactor
    rules: PullRules
    pulled_at: str  # UTC, ISO 8601
    known: frozenset[str] = frozenset()  # test names the configuration already has
    found: Harvest = field(default_factory=Harvest)
    _kept: list[str] = field(default_factory=list)  # the questions of each test taken

    @property
    def full(self) -> bool:
        return len(self.found.tests) >= self.rules.most

    def take(self, record: Mapping[str, Any]) -> None:
        found = self.found
        if self.full:
            found.skipped["over --max"] += 1
            return
        recorded = read_conversation(record)
        if isinstance(recorded, str):
            found.skipped[recorded] += 1
            return
        turns = [
            Turn(self.redact(t.question), t.answer and self.redact(t.answer))
            for t in recorded.turns
        ]
        turns = turns[:MAX_TURNS]
        while turns and turns[-1].answer is None:
            turns.pop()
        if not turns:
            found.skipped["no answered question"] += 1
            return
        name = pulled_name(self.bot, self.chatbot_id, recorded.id, turns[0].question)
        if name in self.known:
            found.skipped["already a test of the configuration"] += 1
            return
        asked = "\n".join(t.question for t in turns)
        if any(similarity(asked, other) >= self.rules.duplicate for other in self._kept):
            found.skipped["near-duplicate questions"] += 1
            return
        self._kept.append(asked)
        found.left_out.update(recorded.left_out)
        text = pulled_document(
            self.bot, self.chatbot_id, recorded, turns, self.rules, self.pulled_at, name
        )
        found.tests.append(Pulled(name, recorded.id, text))


def pulled_document(
    bot: str,
    chatbot_id: str,
    recorded: Recorded,
    turns: Sequence[Turn],
    rules: PullRules,
    pulled_at: str,
    name: str,
) -> str:
    """The YAML document: a header saying where it came from and what to check, then the
    test."""
    conversation = []
    for turn in turns:
        message: dict[str, Any] = {"role": "user", "content": turn.question}
        if turn.answer is not None:
            message["expect"] = {"similarTo": turn.answer, "minSimilarity": rules.min_similarity}
        conversation.append(message)
    provenance = {
        "conversationId": recorded.id,
        "chatbot": bot,
        "chatbotId": chatbot_id,
        "date": recorded.created_at or "unknown",
        "source": recorded.source or None,
        "pulled": pulled_at,
    }
    document = {
        "apiVersion": "botctl/v1",
        "kind": "ConversationTest",
        "metadata": {"name": name},
        "spec": {
            "chatbots": [bot],
            "provenance": {k: v for k, v in provenance.items() if v is not None},
            "conversation": conversation,
        },
    }
    header = [
        f"# Drawn by `botctl conversations pull` from conversation {_inline(recorded.id)} with",
        f"# {bot} ({_inline(recorded.created_at or 'date unknown')}, "
        f"source {_inline(recorded.source or 'unknown')}).",
        "# Personal data was redacted ([email], [phone], [payment-id], [name], ...): read the",
        "# questions and the recorded answers, edit what should not be kept, then commit.",
    ]
    body = yaml.dump(
        literal(document), Dumper=BlockStringDumper, sort_keys=False, allow_unicode=True, width=100
    )
    return "\n".join(header) + "\n" + body


def _inline(text: str) -> str:
    """A service's text on one comment line: no line break can end the comment early."""
    return " ".join(text.split()).encode("ascii", "backslashreplace").decode()[:80]
