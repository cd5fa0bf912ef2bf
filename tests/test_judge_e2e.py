"""``expect.judge`` end to end: a judge chatbot of the configuration grades answers through the
sandbox's chat operation (its scripted replies play the judge), over loopback HTTP."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e_support import Bench

RUBRIC = "The answer hands refunds to a person and promises no refund itself."


def documents(question: str = "Can I get a refund?", judge: str = "grader") -> str:
    return f"""
        apiVersion: botctl/v1
        kind: Chatbot
        metadata: {{name: support}}
        spec: {{chatbotId: bot-1}}
        ---
        apiVersion: botctl/v1
        kind: Chatbot
        metadata: {{name: grader, labels: {{role: judge}}}}
        spec: {{chatbotId: judge-1, apiKeyEnv: JUDGE_KEY}}
        ---
        apiVersion: botctl/v1
        kind: ConversationTest
        metadata: {{name: refund-judged}}
        spec:
          chatbots: [support]
          conversation:
            - role: user
              content: {json.dumps(question)}
              expect:
                judge: {{chatbot: {judge}, rubric: {json.dumps(RUBRIC)}}}
        """


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.add_account("judge-key")
    bench.env["JUDGE_KEY"] = "judge-key"
    bench.create_bot("bot-1", settings={"model": "gpt-4o-mini"})
    bench.admin(
        "PUT",
        "/chatbots/bot-1/replies",
        {
            "replies": [
                {"pattern": "refund", "answer": "A person from billing will look at it."},
                {"pattern": "money back", "answer": "Your refund is on its way!"},
                {"pattern": "weather", "answer": "Sunny."},
            ]
        },
    )
    bench.create_bot("judge-1", account="judge-key", settings={"model": "gpt-4o-mini"})
    bench.admin(
        "PUT",
        "/chatbots/judge-1/replies",
        {
            "replies": [
                {
                    "pattern": "(?s)<<<ANSWER\\s+A person from billing",
                    "answer": "VERDICT: PASS\nREASON: it hands the refund to a person.",
                },
                {
                    "pattern": "(?s)<<<ANSWER\\s+Your refund is on its way",
                    "answer": "Verdict: fail.\nReason: it promises the refund itself.",
                },
                {"pattern": "(?s)<<<ANSWER\\s+Sunny", "answer": "Looks fine to me!"},
            ]
        },
    )
    return bench


def judge_requests(bench: Bench) -> list[dict[str, Any]]:
    return [
        r
        for r in bench.requests()
        if r["path"].endswith("/chat") and r["body"]["chatbotId"] == "judge-1"
    ]


def test_a_judge_that_passes_the_answer(bench: Bench) -> None:
    bench.write("bots.yaml", documents())
    result = bench.run("test", str(bench.config_dir), "--target", "support")
    assert result.exit_code == 0, result.output
    assert "PASS  refund-judged  support (bot-1)" in result.output
    (sent,) = judge_requests(bench)
    (message,) = sent["body"]["messages"]
    assert message["role"] == "user"
    prompt = message["content"]
    for part in (RUBRIC, "Can I get a refund?", "A person from billing will look at it."):
        assert part in prompt
    assert "VERDICT: PASS" in prompt
    assert "VERDICT: FAIL" in prompt
    assert sent["body"]["temperature"] == 0
    assert "conversationId" not in sent["body"]


def test_a_judge_that_fails_the_answer(bench: Bench) -> None:
    bench.write("bots.yaml", documents("I want my money back"))
    result = bench.run("test", str(bench.config_dir), "--target", "support")
    assert result.exit_code == 3, result.output
    assert "FAIL  refund-judged  support (bot-1)" in result.output
    assert 'judge grader: FAIL: "it promises the refund itself."' in result.output
    assert '"Your refund is on its way!"' in result.output


def test_a_judge_answering_off_format_is_an_error_never_a_pass(bench: Bench) -> None:
    bench.write("bots.yaml", documents("What is the weather?"))
    result = bench.run("test", str(bench.config_dir), "--target", "support", "--format", "json")
    assert result.exit_code == 1, result.output
    (case,) = json.loads(result.stdout)["cases"]
    assert case["status"] == "error"
    (error,) = case["errors"]
    assert error.startswith("judge grader (judge-1): answered off-format: no line 'VERDICT: PASS'")
    assert error.endswith('"Looks fine to me!"')


def test_an_unknown_judge_is_a_located_error(bench: Bench) -> None:
    path = bench.write("bots.yaml", documents(judge="gradr"))
    result = bench.run("validate", str(bench.config_dir))
    assert result.exit_code == 1
    lines = path.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "judge:" in text)
    column = lines[line - 1].index("gradr") + 1
    assert f"{path}:{line}:{column}: judge.chatbot: no Chatbot named 'gradr'" in result.output
    assert "did you mean 'grader'?" in result.output
