"""Expectations on one answer, the quote of it, the language heuristic and the event stream:
the pure core of conversation tests."""

from __future__ import annotations

from typing import Any

import pytest

from botctl import language
from botctl.config.document import Expect
from botctl.conversation.expect import check, quote
from botctl.service.sse import ChatAnswer, parse_events


def answer(text: str, seconds: float = 0.1, first: float | None = None) -> ChatAnswer:
    return ChatAnswer(text, seconds, first, streamed=first is not None)


def expect(**fields: Any) -> Expect:
    return Expect.model_validate(fields)


@pytest.mark.parametrize(
    ("fields", "text", "failed"),
    [
        ({"contains": "5 days"}, "Refunds take 5 days.", []),
        ({"contains": "5 Days"}, "Refunds take 5 days.", ['contains "5 Days"']),
        ({"contains": "5 Days", "ignoreCase": True}, "Refunds take 5 days.", []),
        ({"contains": ("a", "b")}, "a only", ['contains "b"']),
        ({"notContains": ("sorry", "cannot")}, "Sorry, I cannot", ['notContains "cannot"']),
        ({"notContains": "sorry", "ignoreCase": True}, "Sorry!", ['notContains "sorry"']),
        ({"matches": r"\d+ days"}, "in 5 days", []),
        ({"matches": r"^\d+$"}, "five", [r'matches "^\\d+$"']),
        ({"maxSeconds": 1}, "x", []),
        ({"json": {"type": "object", "required": ["a"]}}, '{"a": 1}', []),
        ({"json": {"type": "object", "required": ["a"]}}, '{"b": 1}', ["json: at (the whole"]),
        ({"json": {"type": "object"}}, "not json", ["json: the answer is not JSON"]),
        ({"answersIn": "en"}, "Your refund will arrive within five days of the return.", []),
        ({"answersIn": "de"}, "Ihre Erstattung kommt in fünf Tagen, bitte haben Sie Geduld.", []),
        ({"answersIn": "fr"}, "Your refund is on the way to you.", ["answersIn fr (French)"]),
    ],
)
def test_expectations(fields: dict[str, Any], text: str, failed: list[str]) -> None:
    failures = check(expect(**fields), answer(text))
    assert len(failures) == len(failed), failures
    for failure, start in zip(failures, failed, strict=True):
        assert failure.startswith(start), failure


def test_a_failure_quotes_the_answer_shortened_inert_and_masked() -> None:
    text = "Key sk-LIVE-123\x1b[31m red\n::error::x " + "word " * 100
    (failure,) = check(expect(contains="refund"), answer(text), secrets=["sk-LIVE-123"])
    assert "sk-LIVE-123" not in failure
    assert "(secret)" in failure
    assert "\x1b" not in failure
    assert "\n" not in failure
    assert "\\x1b[31m" in failure
    assert failure.endswith('..."')
    assert len(failure) < 250


def test_timings() -> None:
    slow = check(expect(maxSeconds=0.5), answer("x", seconds=0.75))
    assert slow == ["maxSeconds 0.5: the answer took 0.75 s"]
    first = check(expect(maxSecondsToFirstEvent=0.2), answer("x", 1.0, first=0.3))
    assert first == ["maxSecondsToFirstEvent 0.2: the first event came after 0.30 s"]
    assert check(expect(maxSecondsToFirstEvent=0.5), answer("x", 1.0, first=0.3)) == []
    unstreamed = check(expect(maxSecondsToFirstEvent=0.5), answer("x"))
    assert unstreamed == [
        "maxSecondsToFirstEvent 0.5: the service did not stream the answer (no events)"
    ]


def test_quote() -> None:
    assert quote('say "hi"\tnow') == '"say \\"hi\\" now"'
    assert quote("x" * 10, limit=6) == '"xxx..."'
    assert quote("a long-secret b", ["long-secret"]) == '"a (secret) b"'


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("The refund takes five days and you will get an email.", "en"),
        ("Die Erstattung dauert fünf Tage und Sie bekommen eine E-Mail.", "de"),
        ("Le remboursement prend cinq jours et vous recevrez un courriel.", "fr"),
        ("El reembolso tarda cinco días y usted recibirá un correo.", "es"),
        ("Il rimborso richiede cinque giorni e lei riceverà una email.", "it"),
        ("O reembolso leva cinco dias e você vai receber um email.", "pt"),
        ("De terugbetaling duurt vijf dagen en je krijgt een e-mail.", "nl"),
        ("Возврат занимает пять дней.", "ru"),
        ("Повернення триває п'ять днів \u0456 гроші надійдуть.", "uk"),
        ("返金には5日かかります。", "ja"),
        ("退款需要五天。", "zh"),
        ("환불은 5일 걸립니다.", "ko"),
        ("\u0397 επιστροφή χρημάτων διαρκεί πέντε ημέρες.", "el"),
        ("OK", None),
        ("12345", None),
    ],
)
def test_language_heuristic(text: str, code: str | None) -> None:
    assert language.detect(text) == code


@pytest.mark.parametrize(
    ("body", "text"),
    [
        ("data: Hello\n\ndata:  world\n\ndata: [DONE]\n\n", "Hello world"),
        ("data: a\ndata: b\n\ndata: [DONE]\n\n", "a\nb"),
        (": comment\r\nevent: x\r\ndata: hi\r\n\r\ndata: [DONE]", "hi"),
        ("data: [DONE]\n\n", ""),
    ],
)
def test_event_stream(body: str, text: str) -> None:
    assert parse_events(body) == text


def test_a_stream_cut_short_is_refused() -> None:
    with pytest.raises(ValueError, match=r"no data: \[DONE\] at the end \(1 event"):
        parse_events("data: Hello\n\n")
