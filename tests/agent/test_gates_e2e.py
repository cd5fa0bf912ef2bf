"""``botctl agent --test --stages`` end to end, with real processes: the sandbox over loopback
HTTP, a bare git repository the test pushes to, the agent, a notification receiver.

A revision reaches production only once staging's conversation tests passed at it; a failing
test rolls staging back, the revision is never written again (counted in the sandbox's request
log over later cycles), the notification names the expectation and quotes the answer, and a
fixing commit goes through staging, then production. CI's apply and promote share the state
with a running agent (--yield-lease, --lock-timeout)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import (
    AgentProcess,
    GitRemote,
    Receiver,
    github_headers,
    idle,
    newest,
    push_body,
)
from tests.e2e_support import Bench

KEY = "sk-gates-KEY-5531-distinctive"
STAGES = "stage=staging,stage=production"
SETTINGS = "/api/v1/update-chatbot-settings"
HOOK = "hook-secret-gates-7070"


def configuration(instructions: str) -> dict[str, str | None]:
    """Staging and production chatbots of one app, their instructions from one Defaults
    document, and a test both must pass (the sandbox's answer follows the instructions)."""
    docs = [
        "apiVersion: botctl/v1\nkind: Defaults\nmetadata: {name: support}\n"
        "spec:\n  selector: {matchLabels: {app: support}}\n"
        f"  settings: {{instructions: {json.dumps(instructions)}}}\n",
        "apiVersion: botctl/v1\nkind: ConversationTest\nmetadata: {name: refund-answer}\n"
        "spec:\n  selector: {matchLabels: {app: support}}\n  conversation:\n"
        "    - {role: user, content: How long does a refund take?, expect: {contains: 5 days}}\n",
    ]
    for name, chatbot_id, stage in (
        ("support-staging", "bot-s", "staging"),
        ("support", "bot-p", "production"),
    ):
        docs.append(
            f"apiVersion: botctl/v1\nkind: Chatbot\n"
            f"metadata: {{name: {name}, labels: {{app: support, stage: {stage}}}}}\n"
            f"spec: {{chatbotId: {chatbot_id}, settings: {{name: {name}}}}}\n"
        )
    return {"bots/support.yaml": "---\n".join(docs)}


GOOD = "Refunds take 5 days. Be kind."
BAD = "Refunds take 30 days. Be kind."
FIXED = "Refunds take 5 days. Be kind and brief."


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={KEY: "standard"})
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for chatbot_id in ("bot-s", "bot-p"):
        bench.create_bot(chatbot_id, account=KEY, settings={"name": "New"})
    return bench


@pytest.fixture
def receiver() -> Any:
    found = Receiver()
    yield found
    found.close()


def start(bench: Bench, source: str, *argv: str, env: dict[str, str] | None = None) -> AgentProcess:
    env = {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url, **(env or {})}
    state = ["--state", str(bench.state_path), "--cache-dir", str(bench.workdir / "cache")]
    return AgentProcess([*state, source, *argv], env, bench.workdir)


def instructions(bench: Bench, chatbot_id: str) -> str:
    return str(bench.bot_state(chatbot_id)["settings"].get("instructions"))


def writes_to(bench: Bench, chatbot_id: str) -> list[dict[str, Any]]:
    """The settings writes sent to ``chatbot_id`` (the tests' chats are POSTs too)."""
    return [
        w
        for w in bench.writes()
        if w["path"] == SETTINGS and (w.get("body") or {}).get("chatbotId") == chatbot_id
    ]


def bot(doc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(b for b in doc["chatbots"] if b["name"] == name)


def stage(doc: dict[str, Any], text: str) -> dict[str, Any]:
    return next(s for s in doc["stages"] if s["stage"] == text)


def past(cycle: int) -> Any:
    """The agent has numbered a cycle past ``cycle``."""

    def check(doc: dict[str, Any]) -> bool:
        return newest(doc) > cycle

    return check


def at(revision: str) -> Any:
    """Both stages received ``revision`` and passed there, every chatbot found Synced."""

    def check(doc: dict[str, Any]) -> bool:
        stages = all(s["revision"] == revision and s["gate"] == "passed" for s in doc["stages"])
        return stages and {b["status"] for b in doc["chatbots"]} == {"Synced"}

    return check


def test_a_failing_test_never_reaches_production_and_a_fix_goes_through_both_stages(
    bench: Bench, receiver: Receiver, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    first = remote.push(configuration(GOOD), "first")
    agent = start(
        bench,
        remote.source("bots"),
        "--auto-apply",
        "--self-heal",
        "--test",
        "--rollback-on-failure",
        "--stages",
        STAGES,
        "--interval",
        "1s",
        "--notify",
        receiver.url,
        "--notify-on",
        "test_failed,failed",
    )
    try:
        doc = agent.wait_for(at(first), 60, "the first revision through both stages")
        assert instructions(bench, "bot-s") == GOOD
        assert instructions(bench, "bot-p") == GOOD
        assert {b["status"] for b in doc["chatbots"]} == {"Synced"}

        # A revision whose test fails: staging gets it, fails, is rolled back; production
        # never receives it.
        bench.clear_log()
        bad = remote.push(configuration(BAD), "thirty days")
        doc = agent.wait_for(
            lambda d: bot(d, "support-staging")["status"] == "TestFailed", 60, "TestFailed"
        )
        assert doc["revision"] == bad
        assert stage(doc, "stage=staging")["gate"] == "failed"
        production = stage(doc, "stage=production")
        assert production["gate"] == "waiting"
        assert production["revision"] == first
        assert "waiting for stage=staging" in production["reasons"][0]
        assert 'contains "5 days"' in (bot(doc, "support-staging")["lastError"] or "")
        assert instructions(bench, "bot-s") == GOOD  # rolled back
        assert instructions(bench, "bot-p") == GOOD
        assert writes_to(bench, "bot-p") == []
        sent = writes_to(bench, "bot-s")
        assert [w["body"].get("instructions") for w in sent] == [BAD, GOOD]

        told = receiver.wait_for("test_failed", lambda e: e["event"]["revision"] == bad)[-1]
        assert 'contains \\"5 days\\"' in json.dumps(told) or 'contains "5 days"' in told["text"]
        assert "Refunds take 30 days." in told["text"]  # the answer, quoted
        assert "rolled back: support-staging" in told["text"]
        assert told["event"]["tests"][0]["chatbot"] == "support-staging"

        # Later cycles (and self-heal) never write the failed revision again.
        cycles = newest(doc)
        agent.wait_for(lambda d: newest(d) >= cycles + 3 and idle(d), 60, "three more cycles")
        assert len(writes_to(bench, "bot-s")) == 2
        assert writes_to(bench, "bot-p") == []
        assert instructions(bench, "bot-s") == GOOD

        # A fixing commit goes through staging, then production.
        fixed = remote.push(configuration(FIXED), "fix")
        doc = agent.wait_for(at(fixed), 60, "the fix through both stages")
        assert instructions(bench, "bot-s") == FIXED
        assert instructions(bench, "bot-p") == FIXED
        assert {b["status"] for b in doc["chatbots"]} == {"Synced"}
        staged = [w for w in bench.writes() if w["path"] == SETTINGS]
        order = [w["body"]["chatbotId"] for w in staged]
        assert order[-2:] == ["bot-s", "bot-p"]  # staging first
    finally:
        agent.kill()


def test_a_passing_revision_soaks_in_staging_before_production(
    bench: Bench, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    first = remote.push(configuration(GOOD), "first")
    agent = start(
        bench,
        remote.source("bots"),
        "--auto-apply",
        "--stages",
        STAGES,
        "--soak",
        "3s",
        "--interval",
        "1h",
    )
    try:
        doc = agent.wait_for(
            lambda d: bool(d["stages"]) and d["stages"][1]["gate"] == "soaking", 60, "soaking"
        )
        production = stage(doc, "stage=production")
        assert production["opensAt"] is not None
        assert "soaking: stage=staging passed" in production["reasons"][0]
        assert stage(doc, "stage=staging") | {"passingSince": None} == stage(
            doc, "stage=staging"
        ) | {
            "passingSince": None,
            "gate": "passed",
            "revision": first,
        }
        assert bot(doc, "support")["held"] is not None
        assert writes_to(bench, "bot-p") == []  # still soaking: production untouched
        assert instructions(bench, "bot-s") == GOOD
        # The soak's end wakes the loop (the interval is an hour): production follows.
        doc = agent.wait_for(at(first), 60, "production after the soak")
        assert instructions(bench, "bot-p") == GOOD
        assert bot(doc, "support")["held"] is None
        metrics = agent.get("/metrics").text
        assert 'botctl_agent_stage_gate{result="passed",stage="stage=production"} 1.0' in metrics
        assert 'botctl_agent_test_cases_total{result="passed"} 2.0' in metrics
    finally:
        agent.kill()


def ci_checkout(bench: Bench, text: str) -> Path:
    """CI's checkout of a commit: its configuration directory."""
    config = bench.workdir / "ci" / "bots"
    config.mkdir(parents=True, exist_ok=True)
    (config / "support.yaml").write_text(text)
    return config


def ci(bench: Bench, config: Path, agent: AgentProcess, *argv: str) -> None:
    """One of CI's commands on the agent's state, waiting for the lock between its cycles;
    it must succeed (the agent's log in the message if not)."""
    done = bench.run(
        *argv,
        str(config),
        "--state",
        str(bench.state_path),
        "--lock-timeout",
        "60",
        env={"BOTCTL_API_KEY": KEY},
    )
    assert done.exit_code == 0, f"{done.output}\n--- the agent's log:\n{agent.log_text()}"


def beside_ci(bench: Bench, remote: GitRemote, *argv: str, **env: str) -> AgentProcess:
    """An agent through both stages that yields the state's lease to CI between cycles."""
    yielding = ["--auto-apply", "--stages", STAGES, "--yield-lease", *argv]
    return start(bench, remote.source("bots"), *yielding, env=env)


CI_APPLY = ("apply", "-l", "stage=staging", "--test", "--auto-approve")
CI_PROMOTE = ("promote", "--from", "stage=staging", "--to", "stage=production", "--auto-approve")


def test_ci_apply_and_promote_share_the_state_with_a_running_agent(
    bench: Bench, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    first = remote.push(configuration(GOOD), "first")
    agent = beside_ci(bench, remote, "--interval", "1s")
    try:
        agent.wait_for(at(first), 60, "the first revision through both stages")
        # A new commit, and CI's pipeline on the same commit while the agent follows it:
        # its apply --test and promote wait for the state lock between the agent's cycles,
        # and whichever comes first, the other finds the tests recorded.
        fixed = remote.push(configuration(FIXED), "fix")
        config = ci_checkout(bench, str(configuration(FIXED)["bots/support.yaml"]))
        for argv in (CI_APPLY, CI_PROMOTE):
            cycles = newest(agent.status())
            ci(bench, config, agent, *argv)
            agent.wait_for(past(cycles + 1), 60, "the agent cycling on")
        agent.wait_for(at(fixed), 60, "the fix through both stages")
        log = agent.log_text()
        assert instructions(bench, "bot-s") == FIXED, log
        assert instructions(bench, "bot-p") == FIXED, log
        assert agent.proc.poll() is None, log
    finally:
        agent.kill()


def test_an_agent_behind_ci_never_writes_its_older_revision_over_what_ci_applied(
    bench: Bench, tmp_path: Path
) -> None:
    """CI applies and tests a commit the agent has not fetched yet; a cycle of the agent in
    between (a push's webhook before the branch moved, a watch slice) leaves the staging
    chatbot as CI left it: its tests at CI's revision are not "untested at the agent's"."""
    remote = GitRemote(tmp_path / "git")
    first = remote.push(configuration(GOOD), "first")
    hook = ["--webhook-secret-env", "HOOK_SECRET"]
    agent = beside_ci(bench, remote, "--interval", "1h", *hook, HOOK_SECRET=HOOK)

    def cycle(after: str, what: str) -> dict[str, Any]:
        cycles = newest(agent.status())
        body = push_body(after)
        answer = agent.hook(body, github_headers(body, HOOK))
        assert answer.status_code == 202, answer.text
        return agent.wait_for(lambda d: past(cycles)(d) and idle(d), 60, what)

    try:
        agent.wait_for(lambda d: at(first)(d) and idle(d), 60, "the first revision")
        config = ci_checkout(bench, str(configuration(FIXED)["bots/support.yaml"]))
        ci(bench, config, agent, *CI_APPLY)
        assert instructions(bench, "bot-s") == FIXED
        bench.clear_log()
        doc = cycle(first, "a cycle at the revision the agent has")
        log = agent.log_text()
        assert writes_to(bench, "bot-s") == [], log
        assert instructions(bench, "bot-s") == FIXED, log
        assert stage(doc, "stage=staging")["revision"] == first, log
        # The branch moves: the agent takes the commit CI tested through both stages.
        fixed = remote.push(configuration(FIXED), "fix")
        cycle(fixed, "the fix")
        agent.wait_for(at(fixed), 60, "the fix through both stages")
        ci(bench, config, agent, *CI_PROMOTE)
        log = agent.log_text()
        assert writes_to(bench, "bot-s") == [], log  # CI's apply stood
        assert instructions(bench, "bot-p") == FIXED, log
        assert len(writes_to(bench, "bot-p")) == 1, log
    finally:
        agent.kill()
