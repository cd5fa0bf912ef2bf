"""`botctl test` end to end: the real CLI against the sandbox over loopback HTTP, the chatbots
answering with scripted replies that follow their settings (sandbox.scripts)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import xmlschema

from tests.e2e_support import KEY, Bench, bot_yaml

JUNIT_XSD = Path(__file__).parent / "fixtures" / "junit.xsd"
POLICY = "Follow the refund policy: refunds take 5 days."

REFUND_TEST = """
apiVersion: botctl/v1
kind: ConversationTest
metadata:
  name: refund-answer
spec:
  chatbots: [support]
  conversation:
    - role: user
      content: How long does a refund take?
      expect:
        contains: 5 days
        notContains: [cannot, Sorry]
        ignoreCase: true
        matches: '\\d+ days'
        maxSeconds: 10
        answersIn: en
"""


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", settings={"name": "Support", "instructions": POLICY})
    script(
        bench,
        "bot-1",
        {
            "pattern": "refund",
            "answer": "Refunds take 5 days from the day we receive the item.",
            "when": {"setting": "instructions", "contains": "refund policy"},
        },
        {"pattern": "refund", "answer": "Sorry, I cannot help with that."},
        {"pattern": "order", "answer": '{"order": "A-17", "status": "shipped"}'},
    )
    return bench


def script(bench: Bench, chatbot_id: str, *replies: dict[str, Any]) -> None:
    bench.admin("PUT", f"/chatbots/{chatbot_id}/replies", {"replies": list(replies)})


def chatbot(instructions: str = POLICY) -> str:
    return bot_yaml(settings=f"name: Support\ninstructions: {json.dumps(instructions)}")


def chats(bench: Bench) -> list[dict[str, Any]]:
    return [r for r in bench.requests() if r["path"].endswith("/chat")]


def test_a_passing_suite(bench: Bench) -> None:
    bench.write("support.yaml", chatbot() + "---\n" + REFUND_TEST)
    valid = bench.run("validate", str(bench.config_dir))
    assert "Configuration valid: 1 chatbot(s), 1 conversation test(s)." in valid.output
    result = bench.run("test", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "PASS  refund-answer  support (bot-1)" in result.output
    assert "Tests: 1 passed, 0 failed, 0 error(s) (1 in all)." in result.output
    (sent,) = chats(bench)
    assert sent["body"] == {
        "chatbotId": "bot-1",
        "messages": [{"role": "user", "content": "How long does a refund take?"}],
    }
    assert bench.bot_state("bot-1")["conversations"] == []  # not stored without store: true


def test_a_prompt_change_fails_the_test_with_the_answer_quoted(bench: Bench) -> None:
    bench.write("support.yaml", chatbot("Be brief.") + "---\n" + REFUND_TEST)
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    result = bench.run("test", str(bench.config_dir))
    assert result.exit_code == 3, result.output
    assert "FAIL  refund-answer  support (bot-1)" in result.output
    assert (
        'message 1: contains "5 days" (ignoring case): not in the answer '
        '"Sorry, I cannot help with that."' in result.output
    )
    assert 'notContains "cannot" (ignoring case): in the answer' in result.output
    assert "Tests: 0 passed, 1 failed" in result.output


def test_several_turns_take_each_answer_into_the_conversation(bench: Bench) -> None:
    bench.write(
        "support.yaml",
        chatbot()
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: order-then-refund}
spec:
  selector: {matchLabels: {}}
  model: gpt-4.1
  temperature: 0.5
  store: true
  conversation:
    - {role: user, content: Where is my order?}
    - {role: assistant, content: Which order?}
    - role: user
      content: My order A-17
      expect:
        json:
          type: object
          required: [order, status]
          properties: {status: {enum: [shipped, delivered]}}
    - role: user
      content: Can I get a refund?
      expect: {contains: 5 days}
""",
    )
    result = bench.run("test", str(bench.config_dir), "--format", "json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["summary"] == {"passed": 1, "failed": 0, "errors": 0, "total": 1}
    first, second = chats(bench)
    assert [m["content"] for m in first["body"]["messages"]] == [
        "Where is my order?",
        "Which order?",
        "My order A-17",
    ]
    assert second["body"]["messages"][-2] == {
        "role": "assistant",
        "content": '{"order": "A-17", "status": "shipped"}',
    }
    assert first["body"]["model"] == "gpt-4.1"
    assert first["body"]["temperature"] == 0.5
    conversation_id = first["body"]["conversationId"]
    assert second["body"]["conversationId"] == conversation_id
    (stored,) = bench.bot_state("bot-1")["conversations"]
    assert stored["id"] == conversation_id
    turns = document["cases"][0]["runs"][0]["turns"]
    assert [t["message"] for t in turns] == [3, 4]


def test_json_schema_and_language_failures(bench: Bench) -> None:
    bench.write(
        "support.yaml",
        chatbot()
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: order-status}
spec:
  chatbots: [support]
  conversation:
    - role: user
      content: order A-17?
      expect:
        json: {type: object, properties: {status: {enum: [delivered]}}}
        answersIn: de
""",
    )
    result = bench.run("test", str(bench.config_dir))
    assert result.exit_code == 3, result.output
    assert "json: at status: fails the schema's 'enum'" in result.output
    assert "answersIn de (German): the answer reads as" in result.output


def test_a_streamed_test_measures_the_time_to_first_event(
    sandbox_factory: Any, tmp_path: Path
) -> None:
    running = sandbox_factory(latency_ms=150)
    bench = Bench(url=running.url, api_url=running.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", settings={"name": "Support", "instructions": POLICY})
    script(bench, "bot-1", {"pattern": "refund", "answer": "Refunds take\n5 days."})
    bench.write(
        "support.yaml",
        chatbot()
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: streamed}
spec:
  chatbots: [support]
  stream: true
  conversation:
    - role: user
      content: refund?
      expect: {contains: "take\\n5 days", maxSecondsToFirstEvent: 30}
---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: too-slow}
spec:
  chatbots: [support]
  stream: true
  conversation:
    - role: user
      content: refund?
      expect: {maxSecondsToFirstEvent: 0.05}
""",
    )
    result = bench.run("test", str(bench.config_dir), "--format", "json")
    assert result.exit_code == 3, result.output
    cases = {c["test"]: c for c in json.loads(result.stdout)["cases"]}
    (turn,) = cases["streamed"]["runs"][0]["turns"]
    assert cases["streamed"]["status"] == "passed"
    assert turn["firstEventSeconds"] >= 0.15  # the sandbox's latency, before the first event
    assert turn["seconds"] >= turn["firstEventSeconds"]
    assert turn["answer"] == "Refunds take 5 days."  # on one line
    (failure,) = cases["too-slow"]["failures"]
    assert failure.startswith("message 1: maxSecondsToFirstEvent 0.05: the first event came after")
    (sent, _) = chats(bench)
    assert sent["body"]["stream"] is True


def test_a_free_plan_gets_the_clear_403_message(bench: Bench) -> None:
    bench.add_account("free-key", plan="free")
    bench.create_bot("bot-free", account="free-key")
    bench.write(
        "support.yaml",
        bot_yaml(chatbot_id="bot-free", settings="name: Free") + "---\n" + REFUND_TEST,
    )
    result = bench.run("test", str(bench.config_dir), env={"BOTCTL_API_KEY": "free-key"})
    assert result.exit_code == 1, result.output
    assert "ERROR refund-answer  support (bot-free)" in result.output
    assert (
        "the service refused the chat operation (HTTP 403): it needs a paid plan" in result.output
    )
    assert "free-key" not in result.output


def test_repeat_and_pass_rate(bench: Bench) -> None:
    bench.write(
        "support.yaml",
        chatbot()
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: flaky}
spec:
  chatbots: [support]
  repeat: 3
  passRate: 0.5
  conversation:
    - {role: user, content: refund?, expect: {contains: "5 days"}}
""",
    )
    result = bench.run("test", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    assert "3/3 runs passed (needs 50%)" in result.output
    assert len(chats(bench)) == 3


def test_junit_report_is_valid_and_quotes_the_failure(bench: Bench) -> None:
    bench.write("support.yaml", chatbot("Be brief.") + "---\n" + REFUND_TEST)
    bench.run("apply", "--auto-approve", str(bench.config_dir))
    report = bench.workdir / "reports" / "junit.xml"
    result = bench.run("test", str(bench.config_dir), "--junit", str(report))
    assert result.exit_code == 3, result.output
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(report))
    root = ET.parse(report).getroot()
    assert root.get("tests") == "1"
    assert root.get("failures") == "1"
    (case,) = root.iter("testcase")
    assert case.get("classname") == "refund-answer"
    assert case.get("name") == "support (bot-1)"
    failure = case.find("failure")
    assert failure is not None
    assert '"Sorry, I cannot help with that."' in (failure.get("message") or "")


def test_markdown_and_comment_of_a_failed_test(bench: Bench) -> None:
    bench.write("support.yaml", chatbot("Be brief.") + "---\n" + REFUND_TEST)
    bench.run("apply", "--auto-approve", str(bench.config_dir))
    comment = bench.workdir / "out" / "test.md"
    result = bench.run(
        "test", str(bench.config_dir), "--format", "markdown", "--comment-out", str(comment)
    )
    assert result.exit_code == 3, result.output
    assert result.stdout.startswith("### botctl test\n\n**Tests: 0 passed, 1 failed")
    assert "| support (`bot-1`) | `refund-answer` | **failed** | 0/1 |" in result.stdout
    assert 'not in the answer "Sorry, I cannot help with that."' in result.stdout
    assert comment.read_text() == "<!-- botctl:test -->\n" + result.stdout


def test_secrets_and_key_never_appear_in_output_or_junit(bench: Bench) -> None:
    """An answer that echoes the API key or a ${secret:} value is quoted with both masked."""
    secret = "s3cr3t-Phrase-42"
    script(bench, "bot-1", {"pattern": ".", "answer": f"Your key is {KEY} and the code {secret}"})
    bench.write(
        "support.yaml",
        bot_yaml(settings="name: Support\ninstructions: ${secret:CODE}")
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: leak}
spec:
  chatbots: [support]
  conversation:
    - {role: user, content: "tell me", expect: {contains: nothing-like-this}}
""",
    )
    report = bench.workdir / "junit.xml"
    for fmt in ("text", "json"):
        result = bench.run(
            "test",
            str(bench.config_dir),
            "--format",
            fmt,
            "--junit",
            str(report),
            env={"CODE": secret},
        )
        assert result.exit_code == 3, result.output
        assert secret not in result.output
        assert KEY not in result.output
        assert "(secret)" in result.output
        text = report.read_text()
        assert secret not in text
        assert KEY not in text


def test_selection_and_no_tests(bench: Bench) -> None:
    bench.create_bot("bot-2", settings={"name": "Other"})
    bench.write(
        "support.yaml",
        chatbot()
        + "---\n"
        + bot_yaml(name="other", chatbot_id="bot-2", settings="name: Other")
        + "---\n"
        + REFUND_TEST,
    )
    only_other = bench.run("test", str(bench.config_dir), "--target", "other")
    assert only_other.exit_code == 0, only_other.output
    assert "No conversation test covers: other" in only_other.output
    assert chats(bench) == []
    typo = bench.run("test", str(bench.config_dir), "--test", "refund-anwser")
    assert typo.exit_code == 1
    assert "--test refund-anwser: matches no conversation test" in typo.output


def test_invalid_test_is_a_located_error(bench: Bench) -> None:
    bench.write(
        "support.yaml",
        chatbot()
        + """---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: broken}
spec:
  chatbots: [suport]
  conversation:
    - {role: user, content: hi, expect: {matches: "("}}
""",
    )
    result = bench.run("test", str(bench.config_dir))
    assert result.exit_code == 1
    assert "support.yaml:17:51: matches: not a regular expression" in result.output
    assert "Traceback" not in result.output
    assert chats(bench) == []


def test_apply_test_rollback_restores_the_previous_instructions(bench: Bench) -> None:
    """The prompt change breaks the scripted answer: the apply's tests fail, the previous
    instructions are put back, the run exits 3 with both reports, and the test passes again."""
    renamed = bot_yaml(settings=f"name: Support Bot\ninstructions: {json.dumps(POLICY)}")
    bench.write("support.yaml", renamed + "---\n" + REFUND_TEST)
    first = bench.run("apply", "--auto-approve", "--test", str(bench.config_dir))
    assert first.exit_code == 0, first.output
    assert "PASS  refund-answer  support (bot-1)" in first.output

    bench.write(
        "support.yaml",
        bot_yaml(
            settings='name: Support Bot\ninstructions: "Be brief."\ntemp: 0.3',
            attributes="- {name: plan_tier, type: text, label: Plan}",
        )
        + "---\n"
        + REFUND_TEST,
    )
    result = bench.run(
        "apply", "--auto-approve", "--test", "--rollback-on-failure", str(bench.config_dir)
    )
    assert result.exit_code == 3, result.output
    assert "FAIL  refund-answer  support (bot-1)" in result.output
    assert '"Sorry, I cannot help with that."' in result.output
    assert "restored   support: settings instructions (as before the apply)" in result.output
    # The documented chatbot list does not show temp: what it was is not known.
    assert (
        "not restorable  support: settings temp: its previous value was never read nor "
        "recorded by botctl" in result.output
    )
    assert "kept       support: create_attribute plan_tier\n" in result.output
    assert "(attributes are never rolled back" in result.output
    live = bench.bot_state("bot-1")
    assert live["settings"]["instructions"] == POLICY
    assert [a["name"] for a in live["attributes"]] == ["plan_tier"]

    again = bench.run("test", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    # The configuration still asks for the change: the plan shows it again, from the state.
    plan = bench.plan_json(str(bench.config_dir))
    assert {c["key"] for c in plan["changes"]} >= {"instructions"}


def test_rollback_names_values_botctl_never_knew(sandbox_factory: Any, tmp_path: Path) -> None:
    """A deployment without reads, no state: the previous instructions were never known, so
    they cannot be restored, and the report says so."""
    running = sandbox_factory(reads="none")
    bench = Bench(url=running.url, api_url=running.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", settings={"name": "Support", "instructions": POLICY})
    script(bench, "bot-1", {"pattern": "refund", "answer": "Sorry, no."})
    bench.write("support.yaml", chatbot("Be brief.") + "---\n" + REFUND_TEST)
    result = bench.run(
        "apply",
        "--no-reads",
        "--auto-approve",
        "--test",
        "--rollback-on-failure",
        str(bench.config_dir),
    )
    assert result.exit_code == 3, result.output
    assert (
        "not restorable  support: settings instructions: its previous value was never read "
        "nor recorded by botctl" in result.output
    )
    assert bench.bot_state("bot-1")["settings"]["instructions"] == "Be brief."


def test_apply_test_runs_the_changed_chatbots_and_the_untested(bench: Bench) -> None:
    """The changed chatbots' tests run, and those of chatbots whose tests have not passed at
    their current revision (so the state can tell promote); not those of the others."""
    bench.create_bot("bot-2", settings={"name": "Other"})
    other_test = REFUND_TEST.replace("refund-answer", "other-refund").replace(
        "[support]", "[other]"
    )
    tests = "---\n" + REFUND_TEST + "---\n" + other_test

    def other(name: str) -> str:
        return bot_yaml(name="other", chatbot_id="bot-2", settings=f"name: {name}")

    bench.write("support.yaml", chatbot() + "---\n" + other("Other") + tests)
    first = bench.run("apply", "--auto-approve", "--test", str(bench.config_dir))
    assert first.exit_code == 3, first.output  # bot-2 has no refund script
    assert "PASS  refund-answer  support (bot-1)" in first.output  # never tested before
    assert "FAIL  other-refund  other (bot-2)" in first.output

    bench.write("support.yaml", chatbot() + "---\n" + other("Other Bot") + tests)
    bench.clear_log()
    result = bench.run("apply", "--auto-approve", "--test", str(bench.config_dir))
    assert result.exit_code == 3, result.output
    assert "other-refund  other (bot-2)" in result.output
    assert "refund-answer  support" not in result.output  # passed at its revision already
    assert [c["body"]["chatbotId"] for c in chats(bench)] == ["bot-2"]
    assert "--rollback-on-failure would have put the previous ones back" in result.output
    assert bench.bot_state("bot-2")["settings"]["name"] == "Other Bot"


def test_rollback_needs_test(bench: Bench) -> None:
    bench.write("support.yaml", chatbot())
    result = bench.run("apply", "--auto-approve", "--rollback-on-failure", str(bench.config_dir))
    assert result.exit_code == 1
    assert "--rollback-on-failure needs --test" in result.output


STAGED = """
apiVersion: botctl/v1
kind: Defaults
metadata: {name: support}
spec:
  selector: {matchLabels: {app: support}}
  settings:
    instructions: INSTRUCTIONS
---
apiVersion: botctl/v1
kind: Chatbot
metadata: {name: support-staging, labels: {app: support, stage: staging}}
spec:
  chatbotId: bot-s
  settings: {name: Support (staging)}
---
apiVersion: botctl/v1
kind: Chatbot
metadata: {name: support, labels: {app: support, stage: production}}
spec:
  chatbotId: bot-p
  settings: {name: Support}
---
apiVersion: botctl/v1
kind: ConversationTest
metadata: {name: refund-answer}
spec:
  selector: {matchLabels: {app: support}}
  conversation:
    - {role: user, content: How long does a refund take?, expect: {contains: 5 days}}
"""


def test_staged_rollout_promotes_only_what_passed_on_staging(bench: Bench) -> None:
    refund: list[dict[str, Any]] = [
        {
            "pattern": "refund",
            "answer": "Refunds take 5 days.",
            "when": {"setting": "instructions", "contains": "refund policy"},
        },
        {"pattern": "refund", "answer": "Sorry, I cannot help with that."},
    ]
    for chatbot_id in ("bot-s", "bot-p"):
        bench.create_bot(chatbot_id, settings={"name": "New"})
        script(bench, chatbot_id, *refund)

    def configure(instructions: str) -> None:
        bench.write("support.yaml", STAGED.replace("INSTRUCTIONS", json.dumps(instructions)))

    config = str(bench.config_dir)
    promote = ("promote", config, "--from", "stage=staging", "--to", "stage=production")
    promote_args = (*promote, "--auto-approve", "--state", str(bench.state_path))

    configure(POLICY)
    early = bench.run(*promote_args)
    assert early.exit_code == 1, early.output
    assert "support-staging (bot-s): no `apply --test` is recorded for it" in early.output
    assert "Nothing was applied." in early.output
    assert bench.bot_state("bot-p")["settings"]["name"] == "New"

    staged = bench.run("apply", "-l", "stage=staging", "--test", "--auto-approve", config)
    assert staged.exit_code == 0, staged.output
    assert "PASS  refund-answer  support-staging (bot-s)" in staged.output
    assert bench.bot_state("bot-p")["settings"]["name"] == "New"  # production untouched

    promoted = bench.run(*promote_args, "--test")
    assert promoted.exit_code == 0, promoted.output
    assert "stage=staging: support-staging run this revision and passed its tests" in (
        promoted.output
    )
    assert "PASS  refund-answer  support (bot-p)" in promoted.output
    production = bench.bot_state("bot-p")["settings"]
    assert (production["name"], production["instructions"]) == ("Support", POLICY)

    # A prompt change: not promotable until staging ran it, and not once its tests failed.
    configure("Be brief.")
    moved = bench.run(*promote_args)
    assert moved.exit_code == 1, moved.output
    assert "support-staging (bot-s): its last apply was revision sha256:" in moved.output
    broken = bench.run(
        "apply", "-l", "stage=staging", "--test", "--rollback-on-failure", "--auto-approve", config
    )
    assert broken.exit_code == 3, broken.output
    assert bench.bot_state("bot-s")["settings"]["instructions"] == POLICY  # rolled back
    refused = bench.run(*promote_args)
    assert refused.exit_code == 1, refused.output
    assert "support-staging (bot-s): its tests failed at revision sha256:" in refused.output
    assert bench.bot_state("bot-p")["settings"]["instructions"] == POLICY
