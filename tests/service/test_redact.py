"""Secrets leave as masks in every form they take, and keys no header can carry are refused
by the name of their variable, never by value."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from urllib.parse import quote, quote_plus

import pytest

from botctl.errors import BotctlError
from botctl.service.redact import (
    NOTHING_SECRET,
    Redactor,
    api_key_problem,
    check_api_key,
    redact,
    secret_forms,
)

KEY = 'sk-live/0dd+"key"\\x=%41'
SECRET = "tök€n with 'quotes'\n\tand more"


@pytest.mark.parametrize(
    "spell",
    [
        lambda s: s,
        lambda s: json.dumps(s)[1:-1],
        lambda s: json.dumps(s, ensure_ascii=False)[1:-1],
        lambda s: repr(s)[1:-1],
        lambda s: ascii(s)[1:-1],
        lambda s: repr(s.encode())[2:-1],
        lambda s: quote(s, safe=""),
        lambda s: quote(s),
        lambda s: quote_plus(s),
        lambda s: quote(json.dumps(s)[1:-1], safe=""),
        lambda s: quote_plus(repr(s)[1:-1]),
    ],
)
@pytest.mark.parametrize("secret", [KEY, SECRET])
def test_every_spelling_is_masked(spell: Callable[[str], str], secret: str) -> None:
    text = f"before {spell(secret)} after"
    masked = redact(text, keys=[secret]) if secret == KEY else redact(text, secrets=[secret])
    assert masked == f"before {'***' if secret == KEY else '(secret)'} after"


def test_keys_and_secrets_are_masked_together_longest_first() -> None:
    text = f"{KEY} and {KEY}-suffix and {SECRET}"
    assert redact(text, keys=[KEY], secrets=[SECRET, KEY + "-suffix"]) == (
        "*** and (secret) and (secret)"
    )


def test_an_empty_secret_masks_nothing() -> None:
    assert secret_forms("") == ()
    assert redact("text", keys=[""], secrets=[""]) == "text"


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("abc\n", "contains a line break"),
        ("a\rb", "contains a line break"),
        (" abc", "starts or ends with whitespace"),
        ("abc\u00a0", "starts or ends with whitespace"),
        ("a b", "contains a space or a tab"),
        ("a\x1bb", "contains a control character"),
        ("a\x7fb", "contains a control character"),
        ("clé", "contains a character outside ASCII"),
        ("key-€", "contains a character outside ASCII"),
        ("eyJhbGciOi.J9-_~+/=", ""),
        (KEY, ""),
    ],
)
def test_api_key_problems(value: str, problem: str) -> None:
    assert api_key_problem(value) == problem


def test_check_api_key_names_the_variable_never_the_value() -> None:
    with pytest.raises(BotctlError) as info:
        check_api_key("SUPPORT_BOT_KEY", "sk-visible-part\n")
    assert "$SUPPORT_BOT_KEY contains a line break" in str(info.value)
    assert "visible" not in str(info.value)


def test_a_redactor_masks_what_it_was_given_and_never_shows_it() -> None:
    redactor = Redactor(secrets=frozenset({SECRET}))
    keyed = redactor.with_key(KEY)
    text = f"{json.dumps(SECRET)} sent with Bearer {KEY!r}"
    assert keyed(text) == redact(text, keys=[KEY], secrets=[SECRET])
    assert SECRET not in keyed(text)
    assert "***" in keyed(text)
    assert redactor(f"Bearer {KEY}") == f"Bearer {KEY}"  # the key was added to a new one only
    assert SECRET not in repr(keyed)
    assert KEY not in repr(keyed)
    with pytest.raises(dataclasses.FrozenInstanceError):
        redactor.secrets = frozenset()  # type: ignore[misc]
    assert NOTHING_SECRET("anything") == "anything"
