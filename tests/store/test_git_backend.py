"""The git backend against bare repositories on disk: one commit per state write with the
operations as its message, the lock as commits, the user's own repository never touched,
credentials never shown, URLs parsed with located errors."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from botctl.errors import StateError
from botctl.models import State
from botctl.plan import BotRef
from botctl.store.backends import describe, open_backend
from botctl.store.backends.git import parse_git_url
from botctl.store.lock import StateLock
from botctl.store.state import StateWriter, read_state
from tests.factories import operation
from tests.store.conftest import bare_repository


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "--git-dir", str(repo), *args], capture_output=True, text=True, check=True
    ).stdout


def test_every_write_and_the_lock_are_commits_on_the_branch(tmp_path: Path) -> None:
    repo = bare_repository(tmp_path / "bots.git")
    url = f"git+file://{repo}#botctl-state:env/prod/state.json"
    ref = BotRef("support", "bot-1", "K")
    with open_backend(url) as backend, StateLock(backend, command="apply"):
        stored = read_state(backend)
        writer = StateWriter(stored.state, backend, interval=3600, version=stored.version)
        writer.record(operation("update_settings", "settings", {"name": "A"}, ref=ref))
        for name in ("tier", "plan"):
            record = {"name": name, "type": "text"}
            writer.record(operation("create_attribute", name, record, ref=ref))
        writer.flush()
    log = git(repo, "log", "--format=%s%n%b--", "botctl-state")
    commits = log.split("--\n")[:-1]
    subjects = [c.splitlines()[0] for c in commits]
    assert subjects == [
        "botctl apply: lock released",
        "botctl apply: 2 operations recorded (serial 2)",
        "botctl apply: 1 operation recorded (serial 1)",
        "botctl apply: lock taken",
    ]
    assert "support: create_attribute tier\nsupport: create_attribute plan" in commits[1]
    assert "support: update_settings settings" in commits[2]
    assert git(repo, "ls-tree", "-r", "--name-only", "botctl-state").split() == [
        "env/prod/state.json"
    ]
    assert '"serial": 2' in git(repo, "show", "botctl-state:env/prod/state.json")


def test_the_users_repository_is_never_touched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """botctl runs in a configuration repository, maybe with GIT_DIR set (as in a hook): its
    work tree, index and refs stay as they were; only the remote branch moves."""
    work = tmp_path / "config-repo"
    subprocess.run(["git", "init", "--quiet", str(work)], check=True)
    (work / "bot.yaml").write_text("kind: Chatbot\n")
    subprocess.run(["git", "-C", str(work), "add", "bot.yaml"], check=True)
    before = {
        "status": subprocess.run(
            ["git", "-C", str(work), "status", "--porcelain"], capture_output=True, text=True
        ).stdout,
        "refs": sorted(p.name for p in (work / ".git" / "refs" / "heads").iterdir()),
        "index": (work / ".git" / "index").read_bytes(),
    }
    remote = bare_repository(tmp_path / "state.git")
    monkeypatch.chdir(work)
    monkeypatch.setenv("GIT_DIR", str(work / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(work / ".git" / "index"))
    with open_backend(f"git+file://{remote}#botctl-state:state.json") as backend:
        state = read_state(backend)
        writer = StateWriter(state.state, backend, version=state.version)
        writer.record(operation("update_settings", "settings", {"name": "A"}))
        writer.flush()
        private = backend._git_dir()  # type: ignore[attr-defined]
        assert private.stat().st_mode & 0o077 == 0  # the private clone is the user's alone
    assert not private.exists()  # and removed when done
    monkeypatch.delenv("GIT_DIR")
    monkeypatch.delenv("GIT_INDEX_FILE")
    assert (
        subprocess.run(
            ["git", "-C", str(work), "status", "--porcelain"], capture_output=True, text=True
        ).stdout
        == before["status"]
    )
    assert sorted(p.name for p in (work / ".git" / "refs" / "heads").iterdir()) == before["refs"]
    assert (work / ".git" / "index").read_bytes() == before["index"]
    assert "botctl-state" in git(remote, "branch", "--list")


def test_credentials_in_the_url_are_never_shown(tmp_path: Path) -> None:
    url = "git+https://deploy:s3cr3t-t0ken@127.0.0.1:9/bots.git#botctl-state:state.json"
    assert describe(url) == "git+https://***@127.0.0.1:9/bots.git#botctl-state:state.json"
    with pytest.raises(StateError) as failed, open_backend(url) as backend:
        backend.read()
    message = str(failed.value)
    assert "s3cr3t" not in message
    assert "git ls-remote failed" in message
    assert "https://***@127.0.0.1:9/bots.git" in message


def test_a_missing_repository_is_a_clear_error(tmp_path: Path) -> None:
    url = f"git+file://{tmp_path}/nowhere.git#botctl-state:state.json"
    with pytest.raises(StateError, match=r"git ls-remote failed: .*nowhere\.git"):
        open_backend(url).read()


@pytest.mark.parametrize(
    "url",
    [
        "git+file:///srv/bots.git",
        "git+file:///srv/bots.git#botctl-state",
        "git+file:///srv/bots.git#:state.json",
        "git+file:///srv/bots.git#botctl-state:",
        "git+#b:state.json",
        "git+file:///srv/bots.git#-x:state.json",
    ],
)
def test_malformed_git_urls_are_refused_with_an_example(url: str) -> None:
    with pytest.raises(
        StateError, match=re.escape("git+file:///srv/bots.git#botctl-state:state.json")
    ):
        open_backend(url)


def test_url_parts() -> None:
    assert parse_git_url("git+ssh://git@host/org/repo.git#state/prod:a/b.json") == (
        "ssh://git@host/org/repo.git",
        "state/prod",
        "a/b.json",
    )
    assert parse_git_url("git+git@github.com:org/repo.git#s:x.json")[0] == (
        "git@github.com:org/repo.git"
    )


def test_a_state_written_elsewhere_on_the_branch_is_read(tmp_path: Path) -> None:
    """The branch is ordinary git: a state committed by hand (or by an older botctl) reads."""
    repo = bare_repository(tmp_path / "bots.git")
    with open_backend(f"git+file://{repo}#botctl-state:state.json") as backend:
        backend.write('{"format_version": 1, "lineage": "L", "serial": 4, "bots": {}}', None, "v1")
        stored = read_state(backend)
    assert (stored.state.lineage, stored.state.serial) == ("L", 4)
    assert stored.version == git(repo, "rev-parse", "botctl-state").strip()
    assert os.environ.get("GIT_DIR") is None
    assert isinstance(stored.state, State)
