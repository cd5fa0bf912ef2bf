"""#23: a pull request or a pushed commit is untrusted input. Every case of the hostile
corpus (``tests/hostile_repository.py``) is run twice, with real processes:

- as CI runs ``botctl plan`` on a pull request: the GitHub Action's step
  (``python -m botctl.github_action``, ``CI=true``, the pull request's merge base, the
  operator's URL, key and state from the job's settings) in a checkout of the pull request;
- as the agent meets it on a pushed commit (``botctl agent`` on a git remote, the operator's
  flags and environment), one commit after another, the last good revision healed meanwhile.

Each asserts: the error, located; no command ran (the marker); no connection reached the
attacker; no secret in any output, file, comment, notification or request body; memory
(peak RSS) and disk bounded.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.agent.support import GIT_ENV, AgentProcess, Receiver
from tests.e2e_support import Bench
from tests.hostile_repository import (
    CORPUS,
    GOOD_BOT,
    KEY,
    PROJECT,
    SECRETS,
    Attacker,
    Case,
    Content,
    World,
    disk_usage,
    every_byte,
    gitlinks,
    write_files,
)
from tests.launch import run_measured

MAX_RSS_MB = 400  # botctl's own peak, whatever the repository holds (about 100 MB today)
MAX_WRITTEN = 8 << 20  # bytes botctl writes for a run: comment, summary, state, cache


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={KEY: "standard"})
    found = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    found.create_bot("bot-1", account=KEY, settings={"name": "Old name"})
    return found


@pytest.fixture
def attacker() -> Any:
    found = Attacker()
    yield found
    found.close()


def git(repo: Path, *args: str) -> str:
    env = {**os.environ, **GIT_ENV, "GIT_CONFIG_GLOBAL": os.devnull}
    env.pop("GIT_DIR", None)
    done = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def commit(repo: Path, files: dict[str, Content], message: str) -> str:
    """``files`` written in the working tree ``repo`` and committed; the commit."""
    for name in files:
        git(repo, "rm", "-r", "-q", "--cached", "--ignore-unmatch", "--", name)
    write_files(repo, files)
    git(repo, "add", "-A")
    for name in gitlinks(files):  # a submodule at some commit (this repository's own)
        head = git(repo, "rev-parse", "HEAD")
        git(repo, "update-index", "--add", "--cacheinfo", f"160000,{head},{name}")
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def secrets_in(text: str | bytes) -> list[str]:
    data = text.encode() if isinstance(text, str) else text
    return [name for name, value in SECRETS.items() if value.encode() in data]


def large_files(root: Path) -> set[Path]:
    """The case's own large files (zeros): nothing botctl wrote, and not worth reading."""
    return {
        Path(d, n)
        for d, _, names in os.walk(root)
        for n in names
        if not Path(d, n).is_symlink() and Path(d, n).stat().st_size > 4 << 20
    }


# --- CI: the action's plan on a pull request -----------------------------------------------


def pull_request(tmp: Path, case: Case, world: World) -> tuple[Path, str]:
    """A checkout of the pull request: the good configuration on main, the case's files on
    the branch; the base commit."""
    repo = tmp / "checkout"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    base = commit(repo, {"botctl.yaml": PROJECT, "bots/support.yaml": GOOD_BOT}, "base")
    git(repo, "checkout", "-qb", "attack")
    commit(repo, case.files(world), case.name)
    return repo, base


def run_action(
    tmp: Path, repo: Path, base: str, bench: Bench, case: Case, *, pinned: bool = True
) -> dict[str, Any]:
    """The action's plan step; ``pinned``: the job's settings give the API URL and the state
    (else only the key: the README's shortest setup, botctl.yaml naming the rest)."""
    temp = tmp / "runner-temp"
    temp.mkdir()
    event = temp / "event.json"
    event.write_text(json.dumps({"pull_request": {"base": {"sha": base}}}))
    env = {
        **SECRETS,
        **case.extra,
        "CI": "true",
        "GITHUB_ACTIONS": "true",
        "GITHUB_EVENT_NAME": "pull_request",
        "GITHUB_EVENT_PATH": str(event),
        "GITHUB_OUTPUT": str(temp / "output"),
        "GITHUB_STEP_SUMMARY": str(temp / "summary"),
        "RUNNER_TEMP": str(temp),
        "HOME": str(tmp),
        "GIT_CONFIG_GLOBAL": os.devnull,
        "INPUT_COMMAND": "plan",
        "INPUT_CHANGED_SINCE": "auto",
    }
    if pinned:
        env["BOTCTL_API_URL"] = bench.api_url
        env["INPUT_STATE"] = str(tmp / "operator" / "state.json")
    run = run_measured([], env=env, cwd=repo, module="botctl.github_action")
    outputs = (temp / "output").read_text() if (temp / "output").exists() else ""
    comment = ""
    for line in outputs.splitlines():
        if line.startswith("comment-file="):
            comment = Path(line.split("=", 1)[1]).read_text(encoding="utf-8")
    summary = (temp / "summary").read_text() if (temp / "summary").exists() else ""
    return {"run": run, "text": "\n".join([run.stdout, run.stderr, comment, summary, outputs])}


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_a_hostile_pull_request_planned_in_ci(
    case: Case, bench: Bench, attacker: Attacker, tmp_path: Path
) -> None:
    world = World(attacker.url, tmp_path / "pwned")
    ci = tmp_path / "ci"  # the runner's files (the sandbox's database beside it holds the key)
    ci.mkdir()
    repo, base = pull_request(ci, case, world)
    big = large_files(repo)
    before = disk_usage(ci)
    bench.clear_log()
    done = run_action(ci, repo, base, bench, case)
    run, text = done["run"], done["text"]
    if case.ci_error is None:
        assert run.code == 0, text
    else:
        assert run.code == 1, text
        assert case.ci_error in text, text
    assert not world.marker.exists(), "a command ran"
    assert attacker.connections == [], "a connection reached the attacker"
    assert "\u202e" not in text, "a bidirectional control reached the output"
    assert secrets_in(text) == [], text
    requests = json.dumps(bench.requests())
    assert secrets_in(requests) == [], requests
    for path, data in every_byte(ci, big):
        assert secrets_in(data) == [], path
    assert run.max_rss_mb < MAX_RSS_MB, run.max_rss_mb
    assert disk_usage(ci) - before < MAX_WRITTEN


UNPINNED = [c for c in CORPUS if c.name.endswith(("-in-state-url", "api-url-of-the-attacker"))]


@pytest.mark.parametrize("case", UNPINNED, ids=[c.name for c in UNPINNED])
def test_in_ci_a_url_only_the_repository_names_is_refused_with_how_to_pin_it(
    case: Case, bench: Bench, attacker: Attacker, tmp_path: Path
) -> None:
    """Attacks 1 and 3 as the README's shortest CI setup meets them: the job gives the key
    and nothing else, botctl.yaml names the URL and the state."""
    world = World(attacker.url, tmp_path / "pwned")
    ci = tmp_path / "ci"
    ci.mkdir()
    repo, base = pull_request(ci, case, world)
    done = run_action(ci, repo, base, bench, case, pinned=False)
    run, text = done["run"], done["text"]
    assert run.code == 1, text
    assert "is named only by the repository's botctl.yaml; in CI (CI=true)" in text, text
    assert "botctl.yaml:4:" in text  # located at the field
    assert "set BOTCTL_" in text  # how to pin it
    assert "input" in text
    assert not world.marker.exists(), "a command ran"
    assert attacker.connections == [], "a connection reached the attacker"
    assert secrets_in(text) == []


# --- the agent: one pushed commit after another -------------------------------------------


def test_the_agent_meets_every_hostile_commit_and_keeps_its_last_good_revision(
    bench: Bench, attacker: Attacker, tmp_path: Path
) -> None:
    world = World(attacker.url, tmp_path / "pwned")
    repo = tmp_path / "clone"
    remote = tmp_path / "remote.git"
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(remote)], check=True)
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    good_files: dict[str, Content] = {"botctl.yaml": PROJECT, "bots/support.yaml": GOOD_BOT}
    good = commit(repo, good_files, "good")
    git(repo, "push", "-q", str(remote), "HEAD:main")
    receiver = Receiver()
    env = {**SECRETS, "BOTCTL_API_URL": bench.api_url, "GIT_CONFIG_GLOBAL": os.devnull}
    for case in CORPUS:
        env.update(case.extra)
    argv = [
        f"git+file://{remote}#main:.",
        "--state",
        str(tmp_path / "operator" / "state.json"),
        "--cache-dir",
        str(tmp_path / "cache"),
        "--auto-apply",
        "--self-heal",
        "--interval",
        "1s",
        "--webhook-secret-env",
        "HOOK_SECRET",
        "--notify",
        receiver.url,
    ]
    agent = AgentProcess(argv, env, tmp_path)
    try:
        agent.wait_for(lambda d: d["appliedRevision"] == good, 60, "the good revision")
        previous: dict[str, Content] = {}
        for case in CORPUS:
            files = case.files(world)
            restored = {name: good_files.get(name) for name in previous}
            pushed = commit(repo, {**restored, **files}, case.name)
            git(repo, "push", "-q", str(remote), "HEAD:main")
            good = _meets(agent, bench, receiver, case, pushed, good)
            assert not world.marker.exists(), f"{case.name}: a command ran"
            assert attacker.connections == [], f"{case.name}: the attacker was reached"
            previous = files
        peak = _peak_rss_mb(agent.proc.pid)
        served = [agent.get(p).text for p in ("/status", "/", "/metrics")]
    finally:
        code = agent.stop(signal.SIGTERM)
        receiver.close()
    assert code == 0, agent.log_text()
    assert peak < MAX_RSS_MB, peak
    assert disk_usage(tmp_path / "cache") < MAX_WRITTEN + (1 << 20) * 4
    notifications = b"\n".join(receiver.raw)
    everything = "\n".join([*served, agent.log_text(), notifications.decode()])
    assert secrets_in(everything) == [], everything
    assert secrets_in(json.dumps(bench.requests())) == []
    assert "\u202e" not in agent.log_text()
    for path, data in every_byte(tmp_path / "cache", set()):
        assert secrets_in(data) == [], path
        assert len(data) < 1 << 20, path  # only YAML was unpacked


def _meets(
    agent: AgentProcess, bench: Bench, receiver: Receiver, case: Case, pushed: str, good: str
) -> str:
    """The agent on the commit ``pushed``: refused naming what, the good revision kept,
    drift-checked and healed; or applied. The good revision then."""
    if case.agent_error is None:
        agent.wait_for(lambda d: d["appliedRevision"] == pushed, 60, case.name)
        return pushed
    doc = agent.wait_for(
        lambda d: (d["invalidRevision"] or {}).get("revision") == pushed, 60, case.name
    )
    error = doc["invalidRevision"]["error"]
    assert case.agent_error in error, (case.name, error)
    assert doc["revision"] == good, case.name
    assert doc["appliedRevision"] == good, case.name
    # The last good revision stays in force: a dashboard edit is found and healed.
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": {"model": "gpt-5-nano"}})
    agent.wait_for(
        lambda d: (
            bench.bot_state("bot-1")["settings"]["model"] == "gpt-4o-mini"
            and d["cycles"][0]["result"] in ("healed", "invalid")
        ),
        60,
        f"{case.name}: healed",
    )
    failed = receiver.wait_for("failed", lambda b: b["event"].get("revision") == pushed)
    text = next(b["text"] for b in failed if b["event"].get("revision") == pushed)
    assert case.notified in text, text
    assert "<!" not in text, text  # no mention
    assert "<http" not in text, text  # no link
    return good


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0
