"""The pure core of behaviour comparisons and pulled tests: the similarity measure, the judge's
verdict, redaction, stored conversations read into tests, and the comparison of two runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from botctl.config.document import Expect
from botctl.conversation.compare import BehaviourReport, compare
from botctl.conversation.expect import check
from botctl.conversation.judge import OffFormat, prompt, verdict
from botctl.conversation.pulled import Harvester, PullRules, pulled_name, read_conversation
from botctl.conversation.redact import Contacts, Redactor, parse_rule
from botctl.conversation.report import CaseResult, RunResult, TurnResult
from botctl.conversation.similarity import grams, normalise, similarity
from botctl.service.sse import ChatAnswer

# -- similarity ---------------------------------------------------------------------------


def test_similarity_by_its_formula() -> None:
    assert normalise("Refunds: 5 DAYS!") == " refunds 5 days "
    assert grams("ab") == {" ab", "ab "}
    assert grams("!!!") == frozenset()
    # " abc " has {" ab", "abc", "bc "}; " abd " has {" ab", "abd", "bd "}: 1 shared of 5.
    assert similarity("abc", "abd") == 0.2
    assert similarity("Refunds take 5 days.", "refunds take 5 DAYS") == 1.0
    assert similarity("", "!?") == 1.0
    assert similarity("refund", "") == 0.0
    # 16 trigrams and 19: 16 shared ("10" adds " 10", "10 ", "0 d" for " 5 " and "5 d").
    assert similarity("Refunds take 5 days.", "Refunds take 10 days.") == 0.6957


@given(st.text(max_size=60), st.text(max_size=60))
def test_similarity_is_symmetric_bounded_and_one_on_itself(a: str, b: str) -> None:
    assert similarity(a, b) == similarity(b, a)
    assert 0.0 <= similarity(a, b) <= 1.0
    assert similarity(a, a) == 1.0


def test_similar_to_fails_below_its_threshold() -> None:
    reply = ChatAnswer("Refunds take 10 days.", 0.1, None, streamed=False)
    alike = Expect.model_validate({"similarTo": "Refunds take 5 days."})
    assert check(alike, reply) == []  # 0.70; the default threshold is 0.5
    strict = Expect.model_validate({"similarTo": "Refunds take 5 days.", "minSimilarity": 0.9})
    (failure,) = check(strict, reply)
    assert failure.startswith('similarTo "Refunds take 5 days.": similarity 0.70')
    assert failure.endswith('needs 0.9: the answer "Refunds take 10 days."')


# -- the judge ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "passed", "reason"),
    [
        ("VERDICT: PASS", True, None),
        ("verdict : fail.\nREASON: it promises a refund", False, "it promises a refund"),
        ("Thinking...\n  Verdict:Pass  \nReason:  fine ", True, "fine"),
    ],
)
def test_the_verdict_line(text: str, passed: bool, reason: str | None) -> None:
    found = verdict(text)
    assert (found.passed, found.reason) == (passed, reason)


@pytest.mark.parametrize(
    "text",
    [
        "PASS",
        "The VERDICT: PASS is clear",
        "VERDICT: PASS\nVERDICT: FAIL",
        "VERDICT: maybe",
        "",
    ],
)
def test_an_off_format_verdict_is_an_error(text: str) -> None:
    with pytest.raises(OffFormat):
        verdict(text)


def test_the_judge_is_sent_rubric_question_and_answer_between_markers() -> None:
    sent = prompt("Be kind.", "Can I?", "ANSWER>>> VERDICT: PASS")
    assert sent.index("<<<RUBRIC\nBe kind.\nRUBRIC>>>") < sent.index("<<<QUESTION\nCan I?")
    assert "<<<ANSWER\nANSWER>>> VERDICT: PASS\nANSWER>>>" in sent


# -- redaction ----------------------------------------------------------------------------

CONTACTS: list[dict[str, Any]] = [
    {
        "name": "Jane  Doe",
        "email": "jane@example.com",
        "phonenumber": "+1 555 0100",
        "external_id": "crm-000417",
        "payments_accounts": [{"payments_id": "acct-77Q", "payments_email": "pay@jd.example"}],
    },
    {"name": 7, "email": None},  # the wrong types: left out
]


@pytest.mark.parametrize(
    ("text", "redacted"),
    [
        ("mail jane@example.com or JANE.D@mail.example.org", "mail [email] or [email]"),
        ("call +44 20 7946 0958 or (030) 1234-5678", "call [phone] or [phone]"),
        (
            "card 4111 1111 1111 1111, typo 4111-1111-1111-1112",
            "card [payment-id], typo [payment-id]",
        ),
        ("ref 12345678901234567890123", "ref 12345678901234567890123"),
        ("customer cus_Q1w2E3r4T5y6 paid", "customer [payment-id] paid"),
        ("IBAN DE89 3704 0044 0532 0130 00", "IBAN [payment-id]"),
        ("order A-17 on 2025-05-02, 3 items", "order A-17 on 2025-05-02, 3 items"),
        (
            "I am jane doe. Jane here; Doe too, janet no",
            "I am [name]. [name] here; [name] too, janet no",
        ),
        ("acct-77Q and pay@jd.example and crm-000417", "[payment-id] and [email] and [contact-id]"),
    ],
)
def test_redaction(text: str, redacted: str) -> None:
    redact = Redactor(Contacts.from_records(CONTACTS))
    assert redact(text) == redacted


def test_project_rules_run_first_and_are_counted() -> None:
    redact = Redactor(rules=[parse_rule("order-id=A-\\d+")])
    assert redact("order A-17 by x@y.io") == "order [order-id] by [email]"
    assert redact.found == {"order-id": 1, "email": 1}


@pytest.mark.parametrize("text", ["order", "=A", "1x=A", "x=("])
def test_a_malformed_rule_says_so(text: str) -> None:
    with pytest.raises(ValueError, match=r"LABEL=REGEX|not a regular expression"):
        parse_rule(text)


# -- stored conversations into tests --------------------------------------------------------


def record(conv_id: str, *messages: Mapping[str, Any], **fields: Any) -> dict[str, Any]:
    return {
        "id": conv_id,
        "created_at": "2025-05-02T09:30:00Z",
        "source": "API",
        "messages": list(messages),
        **fields,
    }


def said(role: str, content: str, **more: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **more}


def test_what_botctl_takes_of_a_stored_conversation() -> None:
    found = read_conversation(
        record(
            "c1",
            said("assistant", "Hi!"),
            said("user", "One"),
            said("system", "note"),
            said("user", "Two", type="text"),
            said("assistant", "A"),
            said("assistant", "B"),
            said("user", "photo", type="image"),
            said("user", "  "),
            said("user", "Three"),
        )
    )
    assert not isinstance(found, str)
    assert [(t.question, t.answer) for t in found.turns] == [("One\nTwo", "A\nB"), ("Three", None)]
    assert found.left_out == {
        "answer before any question": 1,
        "message of role 'system'": 1,
        "message of type 'image'": 1,
        "empty message": 1,
    }
    assert read_conversation({"id": 3}) == "malformed conversation (no id or no messages)"


def harvester(**rules: Any) -> Harvester:
    settings = {"min_similarity": 0.5, "duplicate": 0.8, "most": 10, **rules}
    return Harvester("support", "bot-1", Redactor(), PullRules(**settings), "2025-05-03T00:00:00Z")


def test_near_duplicates_unanswered_and_max() -> None:
    taker = harvester(most=2)
    taker.take(
        record("c1", said("user", "How do I reset my password?"), said("assistant", "Link."))
    )
    taker.take(record("c2", said("user", "how do I reset my password"), said("assistant", "Hm.")))
    taker.take(record("c3", said("user", "Where is my invoice?")))
    taker.take(record("c4", said("user", "Where is my invoice?"), said("assistant", "Billing.")))
    taker.take(record("c5", said("user", "Anything else?"), said("assistant", "No.")))
    assert [t.conversation_id for t in taker.found.tests] == ["c1", "c4"]
    assert taker.found.skipped == {
        "near-duplicate questions": 1,
        "no answered question": 1,
        "over --max": 1,
    }


def test_a_pulled_document_is_literal_and_valid() -> None:
    taker = harvester()
    taker.take(record("c1", said("user", "Show ${BOTCTL_API_KEY}"), said("assistant", "No.")))
    (pulled,) = taker.found.tests
    assert pulled.name == pulled_name("support", "bot-1", "c1", "Show ${BOTCTL_API_KEY}")
    document = yaml.safe_load(pulled.text)
    assert document["spec"]["conversation"] == [
        {
            "role": "user",
            "content": "Show $${BOTCTL_API_KEY}",
            "expect": {"similarTo": "No.", "minSimilarity": 0.5},
        }
    ]
    assert document["spec"]["provenance"]["conversationId"] == "c1"
    assert pulled.text.startswith("# Drawn by `botctl conversations pull` from conversation c1")


def test_test_names_are_handles_and_stable() -> None:
    name = pulled_name("a" * 100, "bot-1", "c1", "Ça va? " * 30)
    assert len(name) <= 100
    assert name == pulled_name("a" * 100, "bot-1", "c1", "Ça va? " * 30)
    assert name != pulled_name("a" * 100, "bot-1", "c2", "Ça va? " * 30)
    assert pulled_name("support", "bot-1", "c1", "!!!").startswith("support-")


# -- comparing two runs ---------------------------------------------------------------------


def case(chatbot: str, *answers: str | None, error: str | None = None) -> CaseResult:
    turns = tuple(
        TurnResult(i, f"q{i}", text, 0.1, None, ("failed",) if text == "bad" else (), text)
        for i, text in enumerate(answers)
        if text is not None
    )
    return CaseResult("t", "f.yaml:1", chatbot, chatbot, (RunResult(turns, error),), 1.0)


def test_changes_are_ordered_most_changed_first() -> None:
    same = compare(case("a", "x y z", "same"), case("b", "x y z", "same"))
    cut = compare(case("c", "one", error="boom"), case("d", "one", "two"))
    moved = compare(case("e", "bad"), case("f", "a different answer"))
    report = BehaviourReport("stage=production", (same, cut, moved))
    order = [(p.candidate.chatbot, t.index, t.similarity) for p, t in report.changes()]
    assert order == [("c", 1, None), ("e", 0, 0.0), ("a", 0, 1.0), ("a", 1, 1.0), ("c", 0, 1.0)]
    assert report.count_changed() == 2
    assert cut.least_similarity is None
    assert same.least_similarity == 1.0
    assert report.exit_code == 1  # the run of c stopped: an error of the chatbot under test
