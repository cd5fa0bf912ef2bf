"""ConversationTest documents: bound to their chatbots, and every mistake a located error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from botctl.config.loader import load_fleet
from botctl.config.selection import Selection
from botctl.errors import ConfigError

BOTS = """\
apiVersion: botctl/v1
kind: Chatbot
metadata: {name: support, labels: {stage: staging}}
spec: {chatbotId: bot-1}
---
apiVersion: botctl/v1
kind: Chatbot
metadata: {name: support-prod, labels: {stage: production}}
spec: {chatbotId: bot-2}
"""


def document(spec: str, name: str = "t") -> str:
    body = textwrap.indent(textwrap.dedent(spec).strip(), "  ")
    return (
        f"---\napiVersion: botctl/v1\nkind: ConversationTest\nmetadata: {{name: {name}}}\n"
        f"spec:\n{body}\n"
    )


HELLO = "conversation: [{role: user, content: hi}]"


def load(tmp_path: Path, *tests: str, allow_unknown_models: bool = False) -> object:
    path = tmp_path / "bots.yaml"
    path.write_text(BOTS + "".join(tests), encoding="utf-8")
    return load_fleet([path], environ={}, allow_unknown_models=allow_unknown_models)


def errors(tmp_path: Path, *tests: str) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        load(tmp_path, *tests)
    return [f"{p.line}:{p.col}: {p.message}" for p in caught.value.problems]


def test_bound_by_name_and_by_selector(tmp_path: Path) -> None:
    fleet = load(
        tmp_path,
        document(f"chatbots: [support-prod, support]\n{HELLO}", "by-name"),
        document(f"selector: {{matchLabels: {{stage: staging}}}}\n{HELLO}", "by-label"),
        document("selector: {matchExpressions: [{key: stage, operator: Exists}]}\n" + HELLO, "all"),
    )
    tests = {t.name: t.chatbots for t in fleet.tests}  # type: ignore[attr-defined]
    assert tests == {
        "by-name": ("support-prod", "support"),
        "by-label": ("support",),
        "all": ("support", "support-prod"),
    }
    narrowed = fleet.selected(Selection(targets=("support",)))  # type: ignore[attr-defined]
    assert {t.name: t.chatbots for t in narrowed.tests} == {
        "by-name": ("support",),
        "by-label": ("support",),
        "all": ("support",),
    }


def test_spec_defaults(tmp_path: Path) -> None:
    fleet = load(tmp_path, document(f"chatbots: [support]\n{HELLO}"))
    (test,) = fleet.tests  # type: ignore[attr-defined]
    spec = test.spec
    assert (spec.stream, spec.store, spec.repeat, spec.passRate) == (False, False, 1, 1.0)
    assert (spec.model, spec.temperature) == (None, None)
    assert test.source.endswith("bots.yaml:11")


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (HELLO, "15:3: a conversation test needs exactly one of selector (by label) and chatbots"),
        (
            f"chatbots: [suport]\n{HELLO}",
            "15:14: chatbots: no Chatbot named 'suport' (did you mean 'support'?)",
        ),
        ("chatbots: [support]\nconversation: []", "16:17: conversation: needs 1 to 50 messages"),
        (
            "chatbots: [support]\nconversation: [{role: user, content: a}, "
            "{role: assistant, content: b}]",
            "16:51: the conversation must end with a user message",
        ),
        (
            "chatbots: [support]\nconversation:\n"
            "  - {role: user, content: a, expect: {contains: x}}\n"
            "  - {role: assistant, content: b}\n  - {role: user, content: c}",
            "17:32: expect: this message is not sent on its own",
        ),
        (
            "chatbots: [support]\nconversation:\n"
            "  - {role: user, content: a, expect: {maxSecondsToFirstEvent: 1}}",
            "17:41: maxSecondsToFirstEvent: needs stream: true",
        ),
        (
            f"chatbots: [support]\nmodel: gpt-5\n{HELLO}",
            "16:10: model: 'gpt-5' is not one of the chat operation's models",
        ),
        (
            f"chatbots: [support]\ntemperature: 1.5\n{HELLO}",
            "16:16: temperature: must be at most 1",
        ),
        (f"chatbots: [support]\nrepeat: 0\n{HELLO}", "16:11: repeat: must be at least 1"),
        (f"chatbots: [support]\npassRate: 2\n{HELLO}", "16:13: passRate: must be at most 1"),
        (f"chatbots: [support]\nstorage: true\n{HELLO}", "16:3: unknown key 'storage'"),
        (
            "chatbots: [support]\nconversation: [{role: system, content: a}]",
            "16:25: role: must be one of 'user' or 'assistant'",
        ),
        (
            "chatbots: [support]\nconversation: [{role: user, content: a, "
            "expect: {answersIn: xx}}]",
            "16:63: answersIn: must be one of the languages botctl recognises",
        ),
        (
            "chatbots: [support]\nconversation: [{role: user, content: a, "
            "expect: {json: {type: objekt}}}]",
            "16:58: json: not a JSON Schema",
        ),
    ],
)
def test_located_errors(tmp_path: Path, spec: str, expected: str) -> None:
    found = errors(tmp_path, document(spec))
    assert len(found) == 1, found
    assert found[0].startswith(expected), found


def test_duplicate_names(tmp_path: Path) -> None:
    found = errors(
        tmp_path,
        document(f"chatbots: [support]\n{HELLO}"),
        document(f"chatbots: [support]\n{HELLO}"),
    )
    assert len(found) == 1
    assert "duplicate conversation test 't' (also in" in found[0]


def test_selector_matching_nothing_warns(tmp_path: Path) -> None:
    fleet = load(tmp_path, document(f"selector: {{matchLabels: {{stage: qa}}}}\n{HELLO}"))
    (warning,) = fleet.warnings  # type: ignore[attr-defined]
    assert (
        "warning[BC204]: conversation test 't' matches no chatbot (selector: stage=qa)" in warning
    )


def test_unknown_chat_model_with_the_opt_out_warns(tmp_path: Path) -> None:
    fleet = load(
        tmp_path,
        document(f"chatbots: [support]\nmodel: gpt-9\n{HELLO}"),
        allow_unknown_models=True,
    )
    (warning,) = fleet.warnings  # type: ignore[attr-defined]
    assert "warning[BC102]" in warning
