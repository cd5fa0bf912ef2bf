"""``ConversationTest`` documents -> the tests ``botctl test`` runs: validated with located
errors, each bound to the chatbots it names or selects.

Rules beyond the model (``config.document.ConversationTestSpec``):

- exactly one of ``spec.selector`` and ``spec.chatbots``; every name in ``chatbots`` is a
  Chatbot document's; a selector that matches no chatbot is warning BC204;
- the conversation ends with a user message; ``expect`` sits only on a user message botctl
  sends (one not followed by an assistant message, whose answer botctl takes);
- ``model`` is one of the chat operation's models (contract 2.2), or, with
  ``--allow-unknown-models``, any identifier (warning BC102);
- ``maxSecondsToFirstEvent`` only with ``stream: true``;
- ``minSimilarity`` only with ``similarTo``; ``judge.chatbot`` is a Chatbot document's name.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from botctl import contract, lint
from botctl.config.checks import check_match_expressions
from botctl.config.document import (
    MAX_TURNS,
    ConversationTestDocument,
    ConversationTestSpec,
    Selector,
)
from botctl.config.messages import did_you_mean, error_messages
from botctl.config.selection import Operator, Requirement, matches_all
from botctl.config.sources import Findings, Source
from botctl.config.yamlnodes import Path as NodePath

_OPERATORS: dict[str, Operator] = {
    "In": "in",
    "NotIn": "notin",
    "Exists": "exists",
    "DoesNotExist": "!exists",
}


@dataclass(frozen=True)
class ConversationTest:
    """One test as declared, and the chatbots (``metadata.name``) it runs against."""

    name: str
    source: str  # "file:line" of the document
    spec: ConversationTestSpec
    chatbots: tuple[str, ...]

    @property
    def judges(self) -> tuple[str, ...]:
        """The chatbots (``metadata.name``) its ``expect.judge`` expectations ask."""
        found = (m.expect.judge for m in self.spec.conversation if m.expect is not None)
        return tuple(dict.fromkeys(j.chatbot for j in found if j is not None))

    def narrowed(self, names: set[str]) -> ConversationTest:
        """The same test against the chatbots of ``names`` only (a run's selection)."""
        return ConversationTest(
            self.name, self.source, self.spec, tuple(c for c in self.chatbots if c in names)
        )


def requirements_of(selector: Selector) -> tuple[Requirement, ...]:
    """A document's label selector as the requirements ``-l`` parses to."""
    found = [Requirement(k, "=", frozenset([v])) for k, v in selector.matchLabels.items()]
    found += [
        Requirement(e.key, _OPERATORS[e.operator], frozenset(e.values))
        for e in selector.matchExpressions
    ]
    return tuple(found)


def resolve_tests(
    sources: Sequence[Source],
    bots: Sequence[tuple[str, dict[str, str]]],
    found: Findings,
    allow_unknown_models: bool,
) -> tuple[ConversationTest, ...]:
    """Every valid test, bound to its chatbots (``bots``: name and labels, in order)."""
    tests = []
    first: dict[str, Source] = {}
    for source in sources:
        if source.name and source.name in first:
            path: NodePath = ("metadata", "name")
            found.error(
                source,
                path,
                f"duplicate conversation test {source.name!r} "
                f"(also in {first[source.name].where(path)})",
            )
            continue
        first.setdefault(source.name, source)
        test = _test(source, bots, found, allow_unknown_models)
        if test is not None:
            tests.append(test)
    return tuple(tests)


def _test(
    source: Source,
    bots: Sequence[tuple[str, dict[str, str]]],
    found: Findings,
    allow_unknown_models: bool,
) -> ConversationTest | None:
    mark = found.mark()
    check_match_expressions(source, found)
    try:
        document = ConversationTestDocument.model_validate(source.data)
    except ValidationError as exc:
        for loc, message, key in error_messages(ConversationTestDocument, exc):
            found.add(source.doc.problem(loc, message, key=key))
        return None
    spec = document.spec
    if (spec.selector is None) == (spec.chatbots is None):
        found.error(
            source,
            ("spec",),
            "a conversation test needs exactly one of selector (by label) and chatbots (by name)",
        )
    known = [name for name, _ in bots]
    _check_conversation(source, spec, found)
    _check_expectations(source, spec, known, found)
    _check_model(source, spec, found, allow_unknown_models)
    if spec.chatbots is not None:
        for i, name in enumerate(spec.chatbots):
            if name not in known:
                found.error(
                    source,
                    ("spec", "chatbots", i),
                    f"chatbots: no Chatbot named {name!r}" + did_you_mean(name, known),
                )
        chatbots = tuple(dict.fromkeys(spec.chatbots))
    else:
        requirements = requirements_of(spec.selector or Selector())
        chatbots = tuple(name for name, labels in bots if matches_all(requirements, labels))
        if not chatbots:
            shown = ",".join(map(str, requirements)) or "{}"
            found.warn(
                source,
                lint.UNMATCHED_TEST,
                ("spec", "selector"),
                f"conversation test {source.name!r} matches no chatbot (selector: {shown})",
            )
    if found.errors_since(mark):
        return None
    return ConversationTest(source.name, source.where(), spec, chatbots)


def _check_conversation(source: Source, spec: ConversationTestSpec, found: Findings) -> None:
    messages = spec.conversation
    if not messages or len(messages) > MAX_TURNS:
        found.error(
            source,
            ("spec", "conversation"),
            f"conversation: needs 1 to {MAX_TURNS} messages, got {len(messages)}",
        )
        return
    if messages[-1].role != "user":
        found.error(
            source,
            ("spec", "conversation", len(messages) - 1, "role"),
            "the conversation must end with a user message (the chat operation answers it)",
        )
    for i, message in enumerate(messages):
        if message.expect is None:
            continue
        where: NodePath = ("spec", "conversation", i, "expect")
        if message.role == "assistant":
            found.error(
                source,
                where,
                "expect: only on a user message (it is about the answer to that message)",
                key=True,
            )
        elif i + 1 < len(messages) and messages[i + 1].role == "assistant":
            found.error(
                source,
                where,
                "expect: this message is not sent on its own (the assistant message after "
                "it is given): move expect to a user message that botctl sends",
                key=True,
            )
        if message.expect.maxSecondsToFirstEvent is not None and not spec.stream:
            found.error(
                source,
                (*where, "maxSecondsToFirstEvent"),
                "maxSecondsToFirstEvent: needs stream: true (there are events only then)",
                key=True,
            )


def _check_expectations(
    source: Source, spec: ConversationTestSpec, known: Sequence[str], found: Findings
) -> None:
    """``minSimilarity`` only with ``similarTo``; a judge is a Chatbot document's name."""
    for i, message in enumerate(spec.conversation):
        expect = message.expect
        if expect is None:
            continue
        where: NodePath = ("spec", "conversation", i, "expect")
        if expect.minSimilarity is not None and expect.similarTo is None:
            found.error(
                source,
                (*where, "minSimilarity"),
                "minSimilarity: needs similarTo (the answer it measures the similarity to)",
                key=True,
            )
        if expect.judge is not None and expect.judge.chatbot not in known:
            name = expect.judge.chatbot
            found.error(
                source,
                (*where, "judge", "chatbot"),
                f"judge.chatbot: no Chatbot named {name!r}" + did_you_mean(name, known),
            )


def _check_model(
    source: Source, spec: ConversationTestSpec, found: Findings, allow_unknown_models: bool
) -> None:
    model = spec.model
    known = (*contract.CHAT_MODELS, *contract.CHAT_MODELS_STANDARD_ONLY)
    if model is None or model in known:
        return
    path: NodePath = ("spec", "model")
    if allow_unknown_models:
        found.warn(
            source,
            lint.UNKNOWN_MODEL,
            path,
            f"model: {model!r} is not a chat model botctl knows; used as given "
            "(--allow-unknown-models)",
        )
    else:
        found.error(
            source,
            path,
            f"model: {model!r} is not one of the chat operation's models"
            + did_you_mean(model, known)
            + " (a newer model: --allow-unknown-models)",
        )
