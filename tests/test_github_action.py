"""The GitHub Action (action.yml) and the CI templates in docs/ci/.

The action's steps run as a runner would run them, with a faked GitHub environment
(GITHUB_OUTPUT, GITHUB_STEP_SUMMARY, RUNNER_TEMP, GITHUB_ACTION_PATH as files and directories
in tmp), from a configuration repository that is not botctl's checkout, against the sandbox
over HTTP. Their output is read by an independent model of the runner."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest
import xmlschema
import yaml

from botctl.cli import cli
from botctl.github_action import InputError, Inputs, botctl_argv, set_outputs, stream_inert
from botctl.render import COMMENT_LIMIT
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.github_runner import executed, names

ROOT = Path(__file__).parents[1]
ACTION: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text(encoding="utf-8"))
WORKFLOW: dict[Any, Any] = yaml.safe_load(
    (ROOT / "docs" / "ci" / "github-workflow.yml").read_text(encoding="utf-8")
)
GITLAB: dict[str, Any] = yaml.safe_load(
    (ROOT / "docs" / "ci" / "gitlab-ci.yml").read_text(encoding="utf-8")
)
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
ATTRS = "- {name: plan_tier, type: text, label: Plan tier}"


def read_outputs(path: Path) -> dict[str, str]:
    """$GITHUB_OUTPUT as the runner reads it: name=value, or name<<DELIMITER ... DELIMITER."""
    outputs: dict[str, str] = {}
    lines = iter(path.read_text(encoding="utf-8").splitlines()) if path.exists() else iter([])
    for line in lines:
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            value: list[str] = []
            for body in lines:
                if body == delimiter:
                    break
                value.append(body)
            outputs[name] = "\n".join(value)
        else:
            name, _, outputs[name] = line.partition("=")
    return outputs


@dataclass
class StepRun:
    returncode: int
    stdout: str
    stderr: str
    outputs: dict[str, str]  # the action's outputs, as the workflow sees them
    summary: str


@dataclass
class Runner:
    """Runs action.yml's steps the way a GitHub runner does, for one job."""

    workspace: Path  # the configuration repository's checkout
    temp: Path
    env: dict[str, str]

    def evaluate(self, text: str, inputs: dict[str, str], steps: dict[str, Any]) -> str:
        def value(match: re.Match[str]) -> str:
            expression = match[1]
            if expression.startswith("inputs."):
                name = expression.removeprefix("inputs.")
                declared = ACTION["inputs"][name]  # KeyError: an input action.yml lacks
                return inputs.get(name, str(declared.get("default", "")))
            if expression == "runner.temp":
                return str(self.temp)
            step = re.fullmatch(r"steps\.([\w-]+)\.outputs\.([\w-]+)", expression)
            if step:
                return str(steps[step[1]].get(step[2], ""))
            raise AssertionError(f"an expression this test runner does not know: {expression}")

        return EXPRESSION.sub(value, text)

    def run(self, **inputs: str) -> StepRun:
        for name, spec in ACTION["inputs"].items():
            assert name in inputs or not spec.get("required"), f"input {name} is required"
        output_file = self.temp / "github_output"
        summary_file = self.temp / "step_summary"
        output_file.write_text("", encoding="utf-8")
        summary_file.write_text("", encoding="utf-8")
        steps: dict[str, dict[str, str]] = {}
        result = subprocess.CompletedProcess[str]([], 0, "", "")
        for step in ACTION["runs"]["steps"]:
            if "uses" in step:
                assert step["uses"].startswith("astral-sh/setup-uv@")  # uv is here already
                continue
            env = {
                **self.env,
                "GITHUB_ACTION_PATH": str(ROOT),
                "GITHUB_OUTPUT": str(output_file),
                "GITHUB_STEP_SUMMARY": str(summary_file),
                "RUNNER_TEMP": str(self.temp),
            }
            env.update({k: self.evaluate(v, inputs, steps) for k, v in step["env"].items()})
            script = self.temp / "step.sh"
            script.write_text(self.evaluate(step["run"], inputs, steps), encoding="utf-8")
            assert step["shell"] == "bash"
            result = subprocess.run(
                ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                cwd=self.workspace,
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            steps[step["id"]] = read_outputs(output_file)
            if result.returncode != 0:
                break
        outputs = {
            name: self.evaluate(spec["value"], inputs, steps)
            for name, spec in ACTION["outputs"].items()
        }
        summary = summary_file.read_text(encoding="utf-8")
        return StepRun(result.returncode, result.stdout, result.stderr, outputs, summary)


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path / "repo")
    b.create_bot("bot-1", settings={"name": "Old name"})
    return b


@pytest.fixture
def runner(bench: Bench, tmp_path: Path) -> Runner:
    (tmp_path / "temp").mkdir()
    bench.write("support.yaml", bot_yaml(attributes=ATTRS))
    assert shutil.which("uv"), "the action installs botctl with uv"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "BOTCTL_"))}
    env.update(launch.TEST_ENV)  # the steps run botctl: with the test environment
    env.update(
        {"BOTCTL_API_URL": bench.api_url, "BOTCTL_API_KEY": KEY, "NO_COLOR": "1", "CI": "true"}
    )
    return Runner(workspace=bench.workdir, temp=tmp_path / "temp", env=env)


def test_the_action_plans_applies_and_catches_drift(runner: Runner, bench: Bench) -> None:
    plan = runner.run(command="plan", path="config/", state=".botctl/state.json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert plan.outputs["exitcode"] == "2"
    assert plan.outputs["has-changes"] == "true"
    comment = Path(plan.outputs["comment-file"]).read_text(encoding="utf-8")
    assert comment.startswith("<!-- botctl:plan -->\n### botctl plan\n\n**Plan: 1 to create")
    assert plan.summary == comment + "\n"
    # stderr is relayed inert after the report: the plan's "no state at ...: starting fresh".
    assert names(plan.stdout) == ["group", "stop-commands", "endgroup", "notice", "stop-commands"]
    assert "no state at .botctl/state.json: starting fresh" in plan.stdout
    assert bench.writes() == []  # a plan only reads

    apply = runner.run(command="apply", path="config/", state=".botctl/state.json")
    assert apply.returncode == 0, apply.stdout + apply.stderr
    assert (apply.outputs["exitcode"], apply.outputs["has-changes"]) == ("0", "true")
    assert "Apply complete: 2 applied" in apply.stdout
    assert names(apply.stdout) == ["stop-commands"]  # the log, relayed inert
    assert bench.bot_state("bot-1")["settings"]["name"] == "Support Bot"
    assert (bench.workdir / ".botctl" / "state.json").exists()
    assert (
        Path(apply.outputs["comment-file"])
        .read_text(encoding="utf-8")
        .startswith("<!-- botctl:apply -->\n### botctl apply\n\nApply complete: 2 applied")
    )

    again = runner.run(command="plan", path="config/", state=".botctl/state.json")
    assert (again.returncode, again.outputs["exitcode"], again.outputs["has-changes"]) == (
        0,
        "0",
        "false",
    )

    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"name": "Edited in the dashboard"}})
    drift = runner.run(command="drift", path="config/", state=".botctl/state.json")
    assert drift.returncode == 0, drift.stdout + drift.stderr
    assert (drift.outputs["exitcode"], drift.outputs["has-changes"]) == ("2", "true")
    assert "Edited in the dashboard" in drift.summary
    assert drift.summary.startswith("<!-- botctl:drift -->")


def test_the_action_annotates_errors_and_fails(runner: Runner, bench: Bench) -> None:
    bench.write("support.yaml", bot_yaml(settings="modle: x\ntemp: 2"))
    run = runner.run(command="validate", path="config/support.yaml")
    assert run.returncode == 1
    assert run.outputs["exitcode"] == "1"
    assert run.outputs["has-changes"] == "false"
    errors = [c for c in executed(run.stdout) if c.name == "error"]
    assert [(e.properties.get("file"), e.properties.get("line")) for e in errors] == [
        ("config/support.yaml", "8"),
        ("config/support.yaml", "9"),
        (None, None),
    ]
    assert "**botctl validate failed** (exit code 1)." in run.summary
    assert "- error: `config/support.yaml:8:5` unknown key 'modle'" in run.summary
    # A plan that fails says so in its comment too: an old plan comment is never left standing.
    plan = runner.run(command="plan", path="config/")
    assert plan.returncode == 1
    comment = Path(plan.outputs["comment-file"]).read_text(encoding="utf-8")
    assert comment.startswith("<!-- botctl:plan -->\n### botctl plan\n\n**botctl plan failed**")


@pytest.mark.parametrize(
    ("inputs", "message"),
    [
        (
            {"command": "destroy"},
            "must be one of validate, plan, apply, drift, test, got 'destroy'",
        ),
        ({"command": "plan", "args": "--format=json"}, "must not set --format=json"),
        ({"command": "drift", "args": "--comment-out x.md"}, "must not set --comment-out"),
        ({"command": "test", "args": "--format=json"}, "must not set --format=json"),
        ({"command": "plan", "args": "--target 'unclosed"}, "split like a shell line"),
    ],
)
def test_bad_inputs_are_an_error_annotation(
    runner: Runner, bench: Bench, inputs: dict[str, str], message: str
) -> None:
    run = runner.run(path="config/", **inputs)
    assert run.returncode == 1
    (error,) = executed(run.stdout)
    assert error.name == "error"
    assert message in error.data
    assert bench.requests() == []


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.org",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.org",
        "GIT_CONFIG_GLOBAL": os.devnull,
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def pull_request(runner: Runner, bench: Bench) -> str:
    """A configuration repository with two chatbots applied on main, and a pull request
    branch checked out that changes one: the event says where it branched from."""
    bench.create_bot("bot-2")
    bench.write("other.yaml", bot_yaml(name="other", chatbot_id="bot-2"))
    applied = runner.run(command="apply", path="config/", state=".botctl/state.json")
    assert applied.returncode == 0, applied.stdout
    (bench.workdir / ".gitignore").write_text(".botctl/\n")
    git(bench.workdir, "init", "-q", "-b", "main")
    git(bench.workdir, "add", "-A")
    git(bench.workdir, "commit", "-qm", "base")
    base = git(bench.workdir, "rev-parse", "HEAD")
    git(bench.workdir, "checkout", "-qb", "warmer")
    bench.write("other.yaml", bot_yaml(name="other", chatbot_id="bot-2", settings="temp: 0.9"))
    git(bench.workdir, "commit", "-qam", "warmer")
    event = runner.temp / "event.json"
    event.write_text(json.dumps({"pull_request": {"base": {"sha": base}}}), encoding="utf-8")
    runner.env.update({"GITHUB_EVENT_NAME": "pull_request", "GITHUB_EVENT_PATH": str(event)})
    bench.clear_log()
    return base


def test_a_pull_requests_plan_is_scoped_to_the_merge_base(runner: Runner, bench: Bench) -> None:
    base = pull_request(runner, bench)
    plan = runner.run(command="plan", path="config/", state=".botctl/state.json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert plan.outputs["exitcode"] == "2"
    assert f"> Scope: 1 of 2 chatbots changed since `{base[:12]}`" in plan.summary
    assert "`other` (`bot-2`): configuration changed" in plan.summary
    reads = [r["path"] for r in bench.requests()]
    assert reads == ["/api/v1/get-chatbots", "/api/v1/chatbots/bot-2/custom-attributes"]
    # full: every chatbot, as before
    bench.clear_log()
    full = runner.run(
        command="plan", path="config/", state=".botctl/state.json", **{"changed-since": "full"}
    )
    assert full.returncode == 0, full.stdout
    assert "Scope:" not in full.summary
    assert len(bench.requests()) == 3
    # The apply on merge and the nightly drift stay full checks.
    drift = runner.run(command="drift", path="config/", state=".botctl/state.json")
    assert "Scope:" not in drift.summary


def test_an_explicit_revision_scopes_any_command(runner: Runner, bench: Bench) -> None:
    base = pull_request(runner, bench)
    runner.env["GITHUB_EVENT_NAME"] = "push"
    drift = runner.run(
        command="drift", path="config/", state=".botctl/state.json", **{"changed-since": base}
    )
    assert drift.returncode == 0, drift.stdout
    assert f"> Scope: 1 of 2 chatbots changed since `{base[:12]}`" in drift.summary


def test_a_pull_request_without_its_base_is_planned_in_full_and_says_so(
    runner: Runner, bench: Bench
) -> None:
    pull_request(runner, bench)
    event = Path(runner.env["GITHUB_EVENT_PATH"])
    event.write_text(json.dumps({"pull_request": {"base": {"sha": "ab" * 20}}}), "utf-8")
    plan = runner.run(command="plan", path="config/", state=".botctl/state.json")
    assert plan.returncode == 0, plan.stdout
    (warning,) = [c for c in executed(plan.stdout) if c.name == "warning"]
    assert "no merge base" in warning.data
    assert "planned in full" in warning.data
    assert "Scope:" not in plan.summary


# --- conversation tests ------------------------------------------------------------------------

JUNIT_XSD = ROOT / "tests" / "fixtures" / "junit.xsd"
REFUND_TEST = """apiVersion: botctl/v1
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
"""
SECRET = "s3cr3t-Phrase-42"


def scripted(bench: Bench, answer: str) -> None:
    bench.admin(
        "PUT", "/chatbots/bot-1/replies", {"replies": [{"pattern": "refund", "answer": answer}]}
    )


def conversation_test(runner: Runner, bench: Bench) -> None:
    """The chatbot's instructions hold a ${secret:} value, its test sits in a file of its own."""
    bench.write("support.yaml", bot_yaml(settings="name: Support\ninstructions: ${secret:CODE}"))
    bench.write("tests.yaml", REFUND_TEST)
    runner.env["CODE"] = SECRET


def every_output(run: StepRun) -> str:
    files = [run.outputs["comment-file"], run.outputs["junit-file"]]
    texts = [Path(f).read_text(encoding="utf-8") for f in files if f]
    return "\n".join([run.stdout, run.stderr, run.summary, *texts])


def test_the_action_runs_the_conversation_tests(runner: Runner, bench: Bench) -> None:
    conversation_test(runner, bench)
    scripted(bench, "Refunds take 5 days from the day we receive the item.")
    run = runner.run(command="test", path="config/", state=".botctl/state.json")
    assert run.returncode == 0, run.stdout + run.stderr
    assert (run.outputs["exitcode"], run.outputs["has-changes"]) == ("0", "false")
    comment = Path(run.outputs["comment-file"]).read_text(encoding="utf-8")
    assert comment.startswith(
        "<!-- botctl:test -->\n### botctl test\n\n"
        "**Tests: 1 passed, 0 failed, 0 error(s) (1 in all).**\n"
    )
    assert run.summary == comment + "\n"
    assert "<details><summary>Passed (1)</summary>" in comment
    assert "| support (`bot-1`) | `refund-answer` | passed | 1/1 | " in comment
    # The log: the text report folded and inert, the summary a notice, stderr relayed inert.
    assert names(run.stdout) == ["group", "stop-commands", "endgroup", "notice", "stop-commands"]
    assert "PASS  refund-answer  support (bot-1)" in run.stdout
    junit = Path(run.outputs["junit-file"])
    assert junit.parent == runner.temp
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    (case,) = ET.parse(junit).getroot().iter("testcase")
    assert (case.get("classname"), case.get("name")) == ("refund-answer", "support (bot-1)")
    assert case.find("failure") is None
    assert SECRET not in every_output(run)
    assert KEY not in every_output(run)
    assert [w["path"] for w in bench.writes()] == ["/api/v1/chat"]  # only the chat


def test_a_failed_conversation_test_fails_the_step(runner: Runner, bench: Bench) -> None:
    conversation_test(runner, bench)
    hostile = (
        f"Sorry, I cannot help. ::set-output name=x::1 ##vso[task.x]1 <b>@team</b> `{KEY}` "
        f"the code is {SECRET} | and " + "blah " * 60
    )
    scripted(bench, hostile)
    run = runner.run(command="test", path="config/", state=".botctl/state.json")
    assert run.returncode == 3, run.stdout + run.stderr
    assert (run.outputs["exitcode"], run.outputs["has-changes"]) == ("3", "false")
    # The failed test is an error annotation on its document; nothing else runs.
    commands = executed(run.stdout)
    assert [c.name for c in commands] == [
        "group", "stop-commands", "endgroup", "error", "error", "stop-commands"
    ]  # fmt: skip
    failure, verdict = commands[3], commands[4]
    assert (failure.properties["file"], failure.properties["line"]) == ("config/tests.yaml", "1")
    assert failure.properties["title"] == "botctl test: refund-answer failed"
    assert 'message 1: contains "5 days": not in the answer "Sorry, I cannot help.' in failure.data
    assert verdict.data == "Tests: 0 passed, 1 failed, 0 error(s) (1 in all)."
    summary = run.summary
    assert summary.startswith(
        "<!-- botctl:test -->\n### botctl test\n\n**Tests: 0 passed, 1 failed"
    )
    assert "**Failed or not run (1)**" in summary
    (row,) = [line for line in summary.splitlines() if line.startswith("| support")]
    assert row.startswith("| support (`bot-1`) | `refund-answer` | **failed** | 0/1 | message 1")
    # The answer quoted shortened (at most 160 characters, the cut marked), shown as text.
    assert row.endswith('blah b..." |')
    assert "blah " * 40 not in row
    assert "\\<b\\>\\@team\\</b\\>" in row
    assert "<b>" not in summary
    assert "(secret)" in row
    junit = Path(run.outputs["junit-file"])
    xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(junit))
    failed = ET.parse(junit).getroot().find(".//failure")
    assert failed is not None
    assert "Sorry, I cannot help." in (failed.get("message") or "")
    everything = every_output(run)
    assert SECRET not in everything
    assert KEY not in everything
    assert "::set-output" in run.stdout  # shown, inside the stop-commands block only


def test_bad_test_input_is_annotated_on_the_file(runner: Runner, bench: Bench) -> None:
    conversation_test(runner, bench)
    bench.write("tests.yaml", REFUND_TEST.replace("contains: 5 days", "contains: [5 days"))
    run = runner.run(command="test", path="config/")
    assert run.returncode == 1
    assert (run.outputs["exitcode"], run.outputs["junit-file"]) == ("1", "")
    errors = [c for c in executed(run.stdout) if c.name == "error"]
    assert errors[0].properties["file"] == "config/tests.yaml"
    assert errors[0].properties["line"] == "12"
    assert run.summary.startswith(
        "<!-- botctl:test -->\n### botctl test\n\n**botctl test failed** (exit code 1)."
    )
    assert "- error: `config/tests.yaml:12:" in run.summary
    assert bench.requests() == []


def test_a_test_that_cannot_run_fails_the_step_and_says_why(runner: Runner, bench: Bench) -> None:
    bench.add_account("free-key", plan="free")
    bench.create_bot("bot-free", account="free-key")
    bench.write("support.yaml", bot_yaml(chatbot_id="bot-free", settings="name: Free"))
    bench.write("tests.yaml", REFUND_TEST)
    runner.env["BOTCTL_API_KEY"] = "free-key"
    run = runner.run(command="test", path="config/")
    assert run.returncode == 1, run.stdout + run.stderr
    assert run.outputs["exitcode"] == "1"
    assert "**Tests: 0 passed, 0 failed, 1 error(s) (1 in all).**" in run.summary
    (row,) = [line for line in run.summary.splitlines() if line.startswith("| support")]
    assert "| **error** (not run) | 0/1 | the service refused the chat operation (HTTP 403)" in row
    errors = [c for c in executed(run.stdout) if c.name == "error"]
    assert errors[0].properties["title"] == "botctl test: refund-answer could not run"
    junit = ET.parse(run.outputs["junit-file"]).getroot()
    assert junit.get("errors") == "1"
    assert "free-key" not in every_output(run)


def test_apply_with_tests_fails_the_step_when_a_test_fails(runner: Runner, bench: Bench) -> None:
    conversation_test(runner, bench)
    scripted(bench, "Sorry, I cannot help with that.")
    args = "--test --junit reports/apply.xml"  # a path of the workflow's own: the output
    run = runner.run(command="apply", path="config/", state=".botctl/state.json", args=args)
    assert run.returncode == 3, run.stdout + run.stderr
    assert (run.outputs["exitcode"], run.outputs["has-changes"]) == ("3", "true")
    assert names(run.stdout) == ["stop-commands"]  # the log, relayed inert
    assert run.summary.startswith(
        "<!-- botctl:apply -->\n### botctl apply\n\nApply complete: 1 applied, 0 failed, "
        "0 not attempted. **Conversation tests failed** (exit code 3).\n\n"
        "**Tests: 0 passed, 1 failed, 0 error(s) (1 in all).**\n\nFailed or not run:\n"
    )
    assert "FAIL  refund-answer  support (bot-1)" in run.summary
    assert '"Sorry, I cannot help with that."' in run.summary
    assert run.outputs["junit-file"] == str(bench.workdir / "reports" / "apply.xml")
    junit = ET.parse(run.outputs["junit-file"]).getroot()
    assert junit.get("failures") == "1"
    assert SECRET not in every_output(run)
    assert KEY not in every_output(run)
    # A run that fails before its tests: the report of the run before is not this one's.
    bench.write("tests.yaml", "kind: [")
    again = runner.run(command="apply", path="config/", state=".botctl/state.json", args=args)
    assert again.returncode == 1, again.stdout
    assert (again.outputs["exitcode"], again.outputs["junit-file"]) == ("1", "")
    assert (bench.workdir / "reports" / "apply.xml").exists()


# --- the step's parts ---------------------------------------------------------------------------


def test_command_lines_for_each_command(tmp_path: Path) -> None:
    comment = tmp_path / "c.md"

    def argv(command: str, path: str = "bots/", state: str = "", args: str = "") -> list[str]:
        inputs = Inputs.from_environ(
            {"INPUT_COMMAND": command, "INPUT_PATH": path, "INPUT_STATE": state, "INPUT_ARGS": args}
        )
        return botctl_argv(inputs, comment)[3:]

    assert argv("validate", state="s.json") == ["validate", "bots/", "--format", "github"]
    assert argv("plan", "bots/ 'more bots/'", "s.json", "--target support") == [
        "plan", "bots/", "more bots/", "--state", "s.json", "--format", "github",
        "--comment-out", str(comment), "--detailed-exitcode", "--target", "support",
    ]  # fmt: skip
    assert argv("apply", "", args="--plan plan.json") == [
        "apply", "--auto-approve", "--plan", "plan.json"
    ]  # fmt: skip
    assert argv("drift")[-2:] == ["--comment-out", str(comment)]
    # The api-url input is the operator's URL: a flag, which botctl.yaml may not change in CI.
    url = "https://chat.example/api/v1"
    for command, given in (("plan", True), ("validate", False)):
        inputs = Inputs.from_environ({"INPUT_COMMAND": command, "INPUT_API_URL": f" {url} "})
        assert (["--api-url", url] == botctl_argv(inputs, comment)[4:6]) is given
    junit = tmp_path / "j.xml"
    inputs = Inputs.from_environ(
        {"INPUT_COMMAND": "test", "INPUT_PATH": "bots/", "INPUT_ARGS": "--test 'refund-*'"}
    )
    assert botctl_argv(inputs, comment, "abc123", junit)[3:] == [
        "test",
        "bots/",
        "--format",
        "github",
        "--comment-out",
        str(comment),
        "--junit",
        str(junit),
        "--test",
        "refund-*",
    ]  # fmt: skip (never scoped: every test of the selected chatbots runs)
    inputs = Inputs.from_environ({"INPUT_COMMAND": "apply", "INPUT_ARGS": "--test"})
    assert botctl_argv(inputs, comment, None, junit)[3:] == [
        "apply", "--junit", str(junit), "--auto-approve", "--test"
    ]  # fmt: skip
    for plain in ("", "--test --junit=r.xml"):  # no tests; a report path of the workflow's
        inputs = Inputs.from_environ({"INPUT_COMMAND": "apply", "INPUT_ARGS": plain})
        assert str(junit) not in botctl_argv(inputs, comment, None, junit)
    assert Inputs.from_environ({"INPUT_COMMAND": "test", "INPUT_ARGS": "--junit r.xml"}).junit == (
        "r.xml"
    )
    inputs = Inputs.from_environ({"INPUT_COMMAND": "plan", "INPUT_PATH": "bots/"})
    assert botctl_argv(inputs, comment, "abc123")[3:6] == ["plan", "bots/", "--changed-since"]
    with pytest.raises(InputError, match="give it as the input 'changed-since'"):
        Inputs.from_environ({"INPUT_COMMAND": "plan", "INPUT_ARGS": "--changed-since=main"})


def test_relayed_output_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "print('::set-output name=x::1'); print('a\\r::add-mask::k'); print('##vso[task.x]1')"
    code, output = stream_inert([sys.executable, "-c", hostile])
    assert code == 0
    assert "::set-output name=x::1" in output
    assert names(capsys.readouterr().out) == ["stop-commands"]


def test_outputs_with_line_breaks_use_the_delimiter_form(tmp_path: Path) -> None:
    path = tmp_path / "out"
    set_outputs(str(path), {"a": "1", "b": "two\nlines", "c": "x=y"})
    assert read_outputs(path) == {"a": "1", "b": "two\nlines", "c": "x=y"}


# --- action.yml and the templates agree ---------------------------------------------------------


def test_action_declares_what_the_issue_asks_for() -> None:
    assert set(ACTION["inputs"]) == {"command", "path", "state", "api-url", "args", "changed-since"}
    assert ACTION["inputs"]["changed-since"]["default"] == "auto"
    assert ACTION["inputs"]["command"]["required"] is True
    assert set(ACTION["outputs"]) == {"exitcode", "has-changes", "comment-file", "junit-file"}
    assert ACTION["runs"]["using"] == "composite"
    step_ids = {step.get("id") for step in ACTION["runs"]["steps"]}
    for spec in ACTION["outputs"].values():
        (expression,) = EXPRESSION.findall(spec["value"])
        assert expression.split(".")[1] in step_ids
    # Inputs reach the script through the environment, never pasted into its shell line.
    for step in ACTION["runs"]["steps"]:
        assert "${{" not in step.get("run", "")


def botctl_steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    return [s for s in job["steps"] if re.search(r"/botctl@", s.get("uses", ""))]


def test_github_workflow_uses_only_what_the_action_declares() -> None:
    jobs = WORKFLOW["jobs"]
    assert set(jobs) == {"plan", "test", "behaviour", "apply", "drift"}
    triggers = WORKFLOW[True]  # YAML 1.1 reads the key `on` as true
    assert {"pull_request", "push", "schedule"} <= set(triggers)
    for name, job in jobs.items():
        if name == "behaviour":  # botctl's preview commands, run as plain steps
            continue
        steps = botctl_steps(job)
        assert len(steps) == 1
        (step,) = steps
        assert set(step["with"]) <= set(ACTION["inputs"])
        assert step["with"]["command"] in {"validate", "plan", "apply", "drift", "test"}
        ids = {s.get("id") for s in job["steps"]}
        text = yaml.safe_dump(job)
        for step_id, output in re.findall(r"steps\.([\w-]+)\.outputs\.([\w-]+)", text):
            assert step_id in ids, step_id
            if step_id == step.get("id"):
                assert output in ACTION["outputs"], output
    assert jobs["apply"]["concurrency"]["cancel-in-progress"] is False
    uses = {s.get("uses", "").split("@")[0] for job in jobs.values() for s in job["steps"]}
    assert {"peter-evans/find-comment", "peter-evans/create-or-update-comment"} <= uses
    # Tests on pull requests: their comment found by its marker, their JUnit to a report.
    test = jobs["test"]
    assert test["if"] == "github.event_name == 'pull_request'"
    (step,) = botctl_steps(test)
    assert step["with"]["command"] == "test"
    found = next(s for s in test["steps"] if s.get("uses", "").startswith("peter-evans/find"))
    assert found["with"]["body-includes"] == "<!-- botctl:test -->"
    report = next(s for s in test["steps"] if "junit-report" in s.get("uses", ""))
    assert report["with"]["report_paths"] == "${{ steps.test.outputs.junit-file }}"
    assert "!cancelled()" in report["if"]  # a failed test fails the step: report it anyway


def test_gitlab_template_calls_botctl_with_options_that_exist() -> None:
    lines = [
        line
        for job in GITLAB.values()
        if isinstance(job, dict)
        for key in ("script", "before_script", "after_script")
        for line in job.get(key, [])
    ]
    assert all(isinstance(line, str) for line in lines)  # an unquoted ": " makes a mapping
    calls = [line.split() for line in lines if line.lstrip().startswith("botctl ")]
    assert {c[1] for c in calls} == {"validate", "plan", "apply", "drift", "test", "preview"}
    for call in calls:
        command = cli.commands[call[1]]
        if isinstance(command, click.Group):  # botctl preview acquire ...
            command, call = command.commands[call[2]], call[1:]
        options = {opt for param in command.params for opt in param.opts}
        for word in call[2:]:
            if word.startswith("--"):
                assert word in options, f"botctl {call[1]} has no {word}"
    assert GITLAB["botctl-apply"]["resource_group"] == "botctl-apply"


def test_gitlab_template_scopes_merge_request_plans_to_the_merge_base() -> None:
    (option,) = [p for p in cli.commands["plan"].params if "--changed-since" in p.opts]
    assert option.envvar == "BOTCTL_CHANGED_SINCE"
    plan = "\n".join(GITLAB["botctl-plan"]["script"])
    assert 'BOTCTL_CHANGED_SINCE="$CI_MERGE_REQUEST_DIFF_BASE_SHA"' in plan
    assert '"$BOTCTL_PLAN_SCOPE" != full' in plan
    assert GITLAB["variables"]["BOTCTL_PLAN_SCOPE"] == "merge-base"
    assert GITLAB["botctl-plan"]["variables"]["GIT_DEPTH"] == 0  # the merge base is fetched
    for job in ("botctl-apply", "botctl-drift"):  # full checks
        assert "CHANGED_SINCE" not in "\n".join(GITLAB[job]["script"])
    # The same gate in a shell: scoped unless full.
    for scope, expected in (("merge-base", "abc"), ("full", "")):
        line = next(x for x in GITLAB["botctl-plan"]["script"] if x.startswith("if "))
        env = {
            "BOTCTL_PLAN_SCOPE": scope,
            "CI_MERGE_REQUEST_DIFF_BASE_SHA": "abc",
            "PATH": os.environ["PATH"],
        }
        out = subprocess.run(
            ["sh", "-c", f'{line}\nprintf %s "${{BOTCTL_CHANGED_SINCE:-}}"'],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        assert out.stdout == expected


def test_gitlab_test_job_publishes_its_junit_report(runner: Runner, bench: Bench) -> None:
    """The botctl-test job's script, run as GitLab's shell runs it, against the sandbox: the
    file it declares as its JUnit report is the one botctl writes, a failed test included."""
    job = GITLAB["botctl-test"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert job["artifacts"]["when"] == "always"
    report = job["artifacts"]["reports"]["junit"]
    assert report in job["artifacts"]["paths"]
    assert shutil.which("botctl", path=runner.env["PATH"]), "botctl on PATH, as the job has it"
    conversation_test(runner, bench)
    for answer, code in (("It takes 5 days.", 0), ("Sorry, I cannot help with that.", 3)):
        scripted(bench, answer)
        done = subprocess.run(
            ["sh", "-ec", "\n".join(job["script"])],
            cwd=bench.workdir,
            env={**runner.env, "BOTCTL_PATH": "config/"},
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == code, done.stdout + done.stderr
        xmlschema.XMLSchema(str(JUNIT_XSD)).validate(str(bench.workdir / report))
        root = ET.parse(bench.workdir / report).getroot()
        assert root.get("failures") == str(int(code == 3))
        for kept in job["artifacts"]["paths"]:
            assert SECRET not in (bench.workdir / kept).read_text(encoding="utf-8")
    assert (bench.workdir / "botctl-test.md").read_text().startswith("<!-- botctl:test -->")


def test_comment_limit_leaves_room_under_githubs() -> None:
    assert COMMENT_LIMIT <= 65_536 - 1_000
