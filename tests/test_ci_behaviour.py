"""The pull-request flow of the CI templates (docs/ci/): the behaviour job's own steps run as
the runner runs them (GitHub: each `run` in a shell of its own, `if: always()` after a failure;
GitLab: the script, then after_script in a new shell), against the sandbox over loopback
HTTP. The lease is released whether the tests pass or fail; the comment carries its marker."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import launch
from tests.e2e_support import KEY, Bench
from tests.stages_support import stages

ROOT = Path(__file__).parents[1]
WORKFLOW: dict[Any, Any] = yaml.safe_load((ROOT / "docs/ci/github-workflow.yml").read_text())
GITLAB: dict[str, Any] = yaml.safe_load((ROOT / "docs/ci/gitlab-ci.yml").read_text())
PROD = "Refunds take 5 days, back to the card you paid with."


def configuration(bench: Bench, preview_sentence: str) -> None:
    test = (
        "apiVersion: botctl/v1\nkind: ConversationTest\nmetadata: {name: refund}\n"
        "spec:\n  chatbots: [support]\n  conversation:\n"
        "    - {role: user, content: How long does a refund take?, expect: {contains: 5 days}}\n"
    )
    bench.write("bots.yaml", stages(PROD, preview_sentence, test))


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path / "repo")
    bench.create_bot("bot-prod", settings={"model": "gpt-4o-mini", "instructions": PROD})
    bench.create_bot("bot-preview", settings={"model": "gpt-4o-mini"})
    return bench


def shell_env(bench: Bench, **more: str) -> dict[str, str]:
    assert shutil.which("botctl", path=os.environ["PATH"]), "botctl on PATH, as the job has it"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "BOTCTL_"))}
    return {
        **env,
        **launch.TEST_ENV,
        "BOTCTL_API_URL": bench.api_url,
        "BOTCTL_API_KEY": KEY,
        "BOTCTL_PATH": "config/",
        **more,
    }


def sh(script: str, bench: Bench, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-ec", script],
        cwd=bench.workdir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def github_job(bench: Bench) -> tuple[list[str], list[subprocess.CompletedProcess[str]]]:
    """The behaviour job's `run` steps in order (its install step aside: botctl is on PATH):
    after a failure only `if: always()` steps run. Returns the steps run and their results."""
    job = WORKFLOW["jobs"]["behaviour"]
    env = shell_env(bench, STATE=str(bench.state_path), OWNER="github:org/repo#7")
    failed = False
    ran, results = [], []
    for step in job["steps"]:
        if "run" not in step or step.get("name") == "Install botctl":
            continue
        assert "${{" not in step["run"]  # no expression pasted into a shell line
        if failed and step.get("if") != "always()":
            continue
        done = sh(step["run"], bench, env)
        ran.append(step["name"])
        results.append(done)
        failed = failed or done.returncode != 0
    return ran, results


def leases(bench: Bench) -> dict[str, Any]:
    return dict(json.loads(bench.state_path.read_text()).get("previews", {}))


def test_the_github_job_leases_compares_comments_and_releases(bench: Bench) -> None:
    """The pull request's preview fails a test (exit 3): the comment is written, and the
    stage released all the same."""
    configuration(bench, "Refunds take 10 days.")
    ran, results = github_job(bench)
    assert ran == [
        "Lease the preview stage",
        "Apply the pull request to the preview stage",
        "Compare the preview's answers with production's",
        "Release the preview stage",
    ]
    assert [r.returncode for r in results] == [0, 0, 3, 0], [r.stderr for r in results]
    assert "leased stage=preview to github:org/repo#7" in results[0].stderr
    comment = (bench.workdir / "botctl-behaviour.md").read_text()
    assert comment.startswith("<!-- botctl:behaviour -->\n")
    assert (bench.workdir / "botctl-behaviour.xml").is_file()
    assert "released bot-preview (stage=preview) of github:org/repo#7" in results[-1].stderr
    assert leases(bench) == {}
    # The comment steps look for the marker the comment carries.
    steps = {s.get("name"): s for s in WORKFLOW["jobs"]["behaviour"]["steps"]}
    assert steps["Find the behaviour comment"]["with"]["body-includes"] in comment


def test_the_gitlab_job_releases_in_after_script_when_the_tests_fail(bench: Bench) -> None:
    configuration(bench, "Refunds take 10 days.")
    job = GITLAB["botctl-behaviour"]
    env = shell_env(
        bench,
        BOTCTL_STATE=str(bench.state_path),
        BOTCTL_PREVIEW_OWNER="gitlab:group/repo!7",
        CI_MERGE_REQUEST_IID="7",
    )
    script = sh("\n".join(job["script"]), bench, env)
    assert script.returncode == 3, script.stderr
    assert leases(bench)["bot-preview"]["owner"] == "gitlab:group/repo!7"
    # after_script: a shell of its own; `uv tool dir --bin` is where the job installed botctl.
    after = [line for line in job["after_script"] if not line.startswith("export PATH=")]
    released = sh("\n".join(after), bench, env)
    assert released.returncode == 0, released.stderr
    assert leases(bench) == {}
    for kept in job["artifacts"]["paths"]:
        assert (bench.workdir / kept).is_file()
    assert job["artifacts"]["reports"]["junit"] in job["artifacts"]["paths"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
