"""The ``test_failed`` notification (``agent.testnews``): it names the failing expectation and
quotes the answer, bounded."""

from __future__ import annotations

from botctl.agent.notify import chat_text
from botctl.agent.testnews import chatbot_errors, failed_news
from botctl.conversation.report import CaseResult, RunResult, TestReport, TurnResult


def _case(chatbot: str, failures: tuple[str, ...], error: str | None = None) -> CaseResult:
    turn = TurnResult(0, "hi", "<!channel> we never refund", 0.1, None, failures)
    run = RunResult((turn,), error) if error is None else RunResult((), error)
    return CaseResult("refunds", "tests.yaml:3", chatbot, f"id-{chatbot}", (run,), 1.0)


FAILURE = 'contains "refund policy": not in the answer "<!channel> we never refund"'


def test_names_the_expectation_and_quotes_the_answer() -> None:
    report = TestReport((_case("support-staging", (FAILURE,)), _case("other", ())))
    text, fields = failed_news(
        report, source="git+x", revision="a" * 40, short="aaaaaaa", rolled_back={"support-staging"}
    )
    assert "conversation tests failed at revision aaaaaaa of git+x on support-staging" in text
    assert "rolled back: support-staging" in text
    assert f"test refunds (tests.yaml:3): message 1: {FAILURE}" in text
    assert "other" not in text  # it passed
    assert fields["chatbots"] == ["support-staging"]
    assert fields["rolledBack"] == ["support-staging"]
    assert fields["tests"][0]["failures"] == [f"message 1: {FAILURE}"]
    assert "&lt;!channel&gt;" in chat_text(text)  # escaped as every notification is


def test_an_error_is_said_and_not_rolled_back_says_so() -> None:
    report = TestReport((_case("support", (), error="chat: HTTP 503"),))
    text, _fields = failed_news(report, source="s", revision="r", short="r", rolled_back=set())
    assert "not rolled back" in text
    assert "could not run: chat: HTTP 503" in text
    assert chatbot_errors(report) == {
        "id-support": "test refunds failed: could not run: chat: HTTP 503"
    }


def test_bounded() -> None:
    many = tuple(f"failure {i}" for i in range(10))
    report = TestReport(tuple(_case(f"bot{i}", many) for i in range(30)))
    text, fields = failed_news(report, source="s", revision="r", short="r", rolled_back=())
    assert "(and 7 more)" in text
    assert "and 25 more failing test(s)" in text
    assert len(fields["tests"]) == 20
