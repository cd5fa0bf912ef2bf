"""The preview lease (``botctl preview``) under two concurrent pull-request jobs: real botctl
processes on one state, each job as the CI templates run it (acquire, apply the pull
request's configuration to the preview stage, compare with production, release)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests import launch
from tests.e2e_support import KEY, Bench
from tests.stages_support import stages

PROD = "Refunds take 5 days, back to the card you paid with."
PULL_A = "Refunds are handled by a person from billing, who writes back within a day."
PULL_B = "Refunds take 10 days, sent as store credit to your account."


def configuration(bench: Bench, name: str, refund_sentence: str, expected: str) -> Path:
    """A pull request's checkout: production as on main, the preview with its change, and a
    test that its answer must pass."""
    root = bench.workdir / name
    root.mkdir()
    test = (
        "apiVersion: botctl/v1\nkind: ConversationTest\nmetadata: {name: refund}\n"
        "spec:\n  chatbots: [support]\n  conversation:\n    - role: user\n"
        "      content: How long does a refund take?\n"
        f"      expect: {{contains: {json.dumps(expected)}}}\n"
    )
    text = stages(PROD, refund_sentence, test, model="gpt-4o-mini")
    (root / "bots.yaml").write_text(text, encoding="utf-8")
    return root


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    bench.create_bot("bot-prod", settings={"model": "gpt-4o-mini", "instructions": PROD})
    bench.create_bot("bot-preview", settings={"model": "gpt-4o-mini"})
    return bench


def env(bench: Bench) -> dict[str, str]:
    return {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url}


def botctl(bench: Bench, *args: str) -> subprocess.CompletedProcess[str]:
    return launch.run(*args, env=env(bench), cwd=bench.workdir, timeout=120)


def acquire_args(bench: Bench, root: Path, owner: str, *more: str) -> list[str]:
    return [
        "preview", "acquire", str(root), "--state", str(bench.state_path),
        "--stage", "stage=preview", "--owner", owner, *more,
    ]  # fmt: skip


def job_body(bench: Bench, root: Path, owner: str) -> subprocess.CompletedProcess[str]:
    """What a job does while it holds the stage: apply, then compare with production."""
    state = ("--state", str(bench.state_path))
    applied = botctl(bench, "apply", str(root), "-l", "stage=preview", "--auto-approve", *state)
    assert applied.returncode == 0, applied.stderr
    return botctl(
        bench, "test", str(root), "-l", "stage=preview", "--baseline", "stage=production",
        "--format", "json",
    )  # fmt: skip


def release(bench: Bench, owner: str) -> subprocess.CompletedProcess[str]:
    done = botctl(bench, "preview", "release", "--state", str(bench.state_path), "--owner", owner)
    assert done.returncode == 0, done.stderr
    return done


def wait_for(process: subprocess.Popen[str], text: str, seconds: float = 60) -> str:
    """Read the process's standard error until ``text`` shows (bounded)."""
    assert process.stderr is not None
    seen = ""
    deadline = time.monotonic() + seconds
    while text not in seen:
        assert time.monotonic() < deadline, f"{text!r} never came: {seen}"
        line = process.stderr.readline()
        assert line or process.poll() is None, f"exited before {text!r}: {seen}"
        seen += line
    return seen


def test_two_pull_request_jobs_never_share_the_preview(bench: Bench) -> None:
    first = configuration(bench, "pull-1", PULL_A, "person from billing")
    second = configuration(bench, "pull-2", PULL_B, "store credit")

    taken = botctl(bench, *acquire_args(bench, first, "pr-1"))
    assert taken.returncode == 0, taken.stderr
    assert taken.stdout == "stage=preview\n"
    # The second job starts while the first holds the stage: it waits, it does not apply.
    waiting = launch.start(
        *acquire_args(bench, second, "pr-2", "--wait", "2m", "--poll", "0.05"),
        env=env(bench),
        cwd=bench.workdir,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        said = wait_for(waiting, "waiting up to")
        assert "support-preview by pr-1 until" in said
        result = job_body(bench, first, "pr-1")
        assert result.returncode == 0, result.stdout + result.stderr
        report = json.loads(result.stdout)
        (pair,) = report["comparisons"]
        assert "person from billing" in pair["messages"][0]["answer"]
        assert "5 days" in pair["messages"][0]["baselineAnswer"]
        assert waiting.poll() is None  # still waiting while pr-1's test ran
        release(bench, "pr-1")
        out, rest = waiting.communicate(timeout=120)
    finally:
        if waiting.poll() is None:
            waiting.kill()
            waiting.communicate()
    assert waiting.returncode == 0, rest
    assert out == "stage=preview\n"
    assert "leased stage=preview to pr-2" in rest
    second_result = job_body(bench, second, "pr-2")
    assert second_result.returncode == 0, second_result.stdout + second_result.stderr
    (pair,) = json.loads(second_result.stdout)["comparisons"]
    assert "store credit" in pair["messages"][0]["answer"]
    release(bench, "pr-2")
    shown = botctl(bench, "preview", "show", "--state", str(bench.state_path))
    assert shown.stdout == "No preview lease.\n"


def test_two_jobs_racing_for_the_stage_one_wins(bench: Bench) -> None:
    roots = [configuration(bench, f"pull-{n}", PULL_A, "billing") for n in (1, 2)]
    racing = [
        launch.start(
            *acquire_args(bench, root, f"pr-{n}"),
            env=env(bench),
            cwd=bench.workdir,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n, root in enumerate(roots, 1)
    ]
    results = [(p.communicate(timeout=120), p.returncode) for p in racing]
    won = [n for n, (_, code) in enumerate(results, 1) if code == 0]
    assert len(won) == 1, results
    lost = results[2 - won[0]]
    assert lost[1] == 1
    assert f"support-preview by pr-{won[0]} until" in lost[0][1]
    held = json.loads(bench.state_path.read_text())["previews"]
    assert {k: v["owner"] for k, v in held.items()} == {"bot-preview": f"pr-{won[0]}"}


def test_a_lapsed_lease_is_taken_over_and_an_owner_renews(bench: Bench) -> None:
    root = configuration(bench, "pull-1", PULL_A, "billing")
    first = botctl(bench, *acquire_args(bench, root, "pr-1", "--ttl", "1h"))
    assert first.returncode == 0, first.stderr
    renewed = botctl(bench, *acquire_args(bench, root, "pr-1", "--ttl", "2h"))
    assert "renewed stage=preview to pr-1" in renewed.stderr
    refused = botctl(bench, *acquire_args(bench, root, "pr-2"))
    assert refused.returncode == 1
    assert "no preview stage is free" in refused.stderr
    # The job of pr-1 died without releasing: its lease lapses (here: the state says so).
    document = json.loads(bench.state_path.read_text())
    document["previews"]["bot-preview"]["expires"] = "2000-01-01T00:00:00Z"
    bench.state_path.write_text(json.dumps(document))
    lapsed = botctl(bench, "preview", "show", "--state", str(bench.state_path))
    assert "pr-1  until 2000-01-01T00:00:00Z  (lapsed)" in lapsed.stdout
    taken = botctl(bench, *acquire_args(bench, root, "pr-2"))
    assert taken.returncode == 0, taken.stderr
    assert release(bench, "pr-1").stderr.startswith("no preview lease held by pr-1")


def test_a_job_finding_the_state_locked_waits_for_the_lock(bench: Bench) -> None:
    """The state lock is held a moment by whoever writes the state (another job's acquire,
    a release): an acquire that finds it held waits for it, it never fails at the lock."""
    from botctl.store.backends import open_backend
    from botctl.store.lock import StateLock

    root = configuration(bench, "pull-1", PULL_A, "billing")
    with open_backend(bench.state_path) as backend:
        lock = StateLock(backend, timeout=0, command="a test holding the lock")
        lock.__enter__()
        try:
            waiting = launch.start(
                *acquire_args(bench, root, "pr-1"),
                env=env(bench),
                cwd=bench.workdir,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            with pytest.raises(subprocess.TimeoutExpired):
                waiting.wait(timeout=2)  # before: exit 1 at once, "state ... is locked by"
        finally:
            lock.__exit__(None, None, None)
        out, err = waiting.communicate(timeout=120)
    assert waiting.returncode == 0, err
    assert out == "stage=preview\n"
