"""``test --baseline``'s reports: the changed answers first, within the comment's budget, with
its marker; the JSON document is the test report's with fields added."""

from __future__ import annotations

import json

from botctl.conversation.compare import BehaviourReport, compare
from botctl.conversation.report import CaseResult, RunResult, TurnResult
from botctl.render.behaviour import (
    BEHAVIOUR_MARKER,
    render_behaviour_comment,
    render_behaviour_json,
    render_behaviour_text,
)
from botctl.render.tests import tests_document as plain_document


def case(test: str, chatbot: str, answer: str, failures: tuple[str, ...] = ()) -> CaseResult:
    turn = TurnResult(0, "How long does a refund take?", answer[:160], 0.1, None, failures, answer)
    return CaseResult(test, "t.yaml:1", chatbot, f"id-{chatbot}", (RunResult((turn,)),), 1.0)


def report(count: int, *, long: int = 100) -> BehaviourReport:
    pairs = []
    for n in range(count):
        now = f"Refunds take {n} days. " + "x" * long
        before = "Refunds take five days. " + "x" * long if n % 2 else now
        pairs.append(compare(case(f"t{n}", "preview", now), case(f"t{n}", "prod", before)))
    return BehaviourReport("stage=production", tuple(pairs))


def test_the_comment_lists_changed_answers_first_under_its_budget() -> None:
    big = report(400, long=500)
    comment = render_behaviour_comment(big)
    assert comment.startswith(BEHAVIOUR_MARKER + "\n### botctl test --baseline stage=production")
    assert len(comment) <= 60_000
    assert "**Changed answers (200)**" in comment
    assert "_... " in comment
    assert "more changed answers not shown" in comment
    assert "Unchanged answers" not in comment or comment.index("Changed") < comment.index("Unch")


def test_markdown_in_an_answer_is_shown_as_written() -> None:
    hostile = compare(
        case("t", "preview", "<script>x</script> | **bold** @team [a](http://x)"),
        case("t", "prod", "plain"),
    )
    comment = render_behaviour_comment(BehaviourReport("stage=production", (hostile,)))
    assert "\\<script\\>" in comment
    assert "\\| \\*\\*bold\\*\\* \\@team \\[a\\]" in comment


def test_json_adds_fields_to_the_test_report() -> None:
    found = report(2)
    document = json.loads(render_behaviour_json(found))
    plain = plain_document(found.tests)
    for key, value in plain.items():
        if key != "summary":
            assert document[key] == value
    assert document["summary"] == {**plain["summary"], "changed": 1}
    assert document["baseline"]["selector"] == "stage=production"
    changed = document["comparisons"][1]
    assert changed["baselineChatbot"] == "prod"
    assert changed["changed"] is True
    (message,) = changed["messages"]
    assert set(message) == {
        "message", "question", "similarity", "changed", "answer", "passed", "failures",
        "baselineAnswer", "baselinePassed", "baselineFailures",
    }  # fmt: skip
    assert message["similarity"] < 1


def test_text_shows_both_answers_of_a_changed_message() -> None:
    text = render_behaviour_text(report(2))
    assert "1 of 2 answer(s) changed" in text
    assert 'baseline  PASS    "Refunds take five days.' in text
    assert 'now       PASS    "Refunds take 1 days.' in text
    assert "SAME    t0  preview (id-preview) vs prod (id-prod)  message 1  PASS" in text
