"""Scripted chat replies: what a chatbot answers, steered by a test, without a language model.

A chatbot's script is an ordered list of replies set through the admin API
(``PUT /_sandbox/chatbots/{id}/replies``)::

    {"replies": [{"pattern": "refund", "answer": "Refunds take 5 days.",
                  "when": {"setting": "instructions", "contains": "refund policy"}},
                 {"pattern": "refund", "answer": "I cannot help with that."}]}

The first reply whose ``pattern`` (a regular expression, searched case-insensitively in the
last user message) matches, and whose ``when`` holds for the chatbot's settings *at the time of
the chat*, answers. ``when`` names a settings field by its dotted camelCase path (``model``,
``styles.theme``) and either ``equals`` (any JSON value) or ``contains`` (a phrase the text
value must contain, case-insensitively). With no reply matching, the chatbot gives the
sandbox's default answer, which follows the instructions too (``instructed``: the sentence of
them that shares the most words with the question). Deterministic: the same settings and
question, the same text - so a settings change (a new prompt) can be shown to change an answer.
"""

from __future__ import annotations

import re
from typing import Any

from botctl.sandbox import validation as v

JSON = dict[str, Any]
MAX_REPLIES = 100
MAX_TEXT = 100_000


def _pattern(value: Any, where: str) -> str:
    text = v.string(value, where)
    if not text:
        raise v.Invalid(f"{where}: must not be empty")
    try:
        re.compile(text)
    except re.error as exc:
        raise v.Invalid(f"{where}: not a regular expression ({exc})") from None
    return text


def _answer(value: Any, where: str) -> str:
    text = v.string(value, where)
    if len(text) > MAX_TEXT:
        raise v.Invalid(f"{where}: longer than {MAX_TEXT} characters")
    return text


def _setting(value: Any, where: str) -> str:
    text = v.string(value, where)
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9]*)*", text):
        raise v.Invalid(f"{where}: must be a settings field's dotted path, e.g. instructions")
    return text


def _any(value: Any, where: str) -> Any:
    return value


def _when(value: Any, where: str) -> JSON:
    fields = v.obj(value, where, {"setting": _setting, "equals": _any, "contains": v.string})
    if "setting" not in fields:
        raise v.Invalid(f"{where}.setting: required")
    if ("equals" in fields) == ("contains" in fields):
        raise v.Invalid(f"{where}: needs exactly one of equals or contains")
    return fields


def _reply(value: Any, where: str) -> JSON:
    fields = v.obj(value, where, {"pattern": _pattern, "answer": _answer, "when": _when})
    for required in ("pattern", "answer"):
        if required not in fields:
            raise v.Invalid(f"{where}.{required}: required")
    return fields


def validate_script(body: Any) -> list[JSON]:
    """The admin body ``{"replies": [...]}`` as the list of replies; ``Invalid`` otherwise."""
    fields = v.obj(body, "", {"replies": _any})
    replies = fields.get("replies")
    if not isinstance(replies, list):
        raise v.Invalid("replies: required, an array of replies")
    if len(replies) > MAX_REPLIES:
        raise v.Invalid(f"replies: at most {MAX_REPLIES}")
    return [_reply(r, f"replies[{i}]") for i, r in enumerate(replies)]


def _setting_value(settings: JSON, path: str) -> Any:
    value: Any = settings
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            return None
        value = value[part]
    return value


def _holds(when: JSON | None, settings: JSON) -> bool:
    if when is None:
        return True
    value = _setting_value(settings, when["setting"])
    if "equals" in when:
        return bool(value == when["equals"])
    return isinstance(value, str) and when["contains"].casefold() in value.casefold()


def scripted_answer(script: list[JSON], settings: JSON, question: str) -> str | None:
    """The answer of the first reply that matches ``question`` under ``settings``; None when
    none does."""
    for reply in script:
        if re.search(reply["pattern"], question, re.IGNORECASE) and _holds(
            reply.get("when"), settings
        ):
            return str(reply["answer"])
    return None


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"[^\W\d_]{4,}")  # words of 4 letters or more: "the", "and" never count
_STEM = 5  # letters a word is compared by: "refund" and "refunds" are one word


def _words(text: str) -> set[str]:
    return {w.casefold()[:_STEM] for w in _WORD.findall(text)}


def instructed(instructions: str, question: str) -> str | None:
    """The sentence of ``instructions`` that shares the most words (of four letters or more,
    any case, compared by their first five letters) with ``question``, the first of equals;
    None when none shares one. How the
    sandbox's unscripted answers follow the instructions: edit the sentence, and the answer
    to a question about it changes."""
    asked = _words(question)
    best, score = None, 0
    for sentence in _SENTENCE_END.split(instructions):
        shared = len(asked & _words(sentence))
        if shared > score:
            best, score = sentence.strip(), shared
    return best
