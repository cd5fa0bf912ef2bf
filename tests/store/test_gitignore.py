"""store.gitignore: the .botctl/ line merged into a .gitignore, and git asked whether it ignores
a file, through a runner that never lets git's absence, failure or hang become the run's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from botctl.errors import BotctlError
from botctl.store import gitignore
from botctl.store.gitignore import (
    ensure_ignored,
    ignored,
    unignored_key_warning,
    work_tree_top,
)


@pytest.fixture(autouse=True)
def _hermetic_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("HOME", str(tmp_path))


def repository(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "--quiet", str(path)], check=True)
    return path


def test_merging_keeps_every_line_and_adds_one_once(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").write_text("# mine\n.env")
    first = ensure_ignored(tmp_path)
    assert (first.added, first.created) == ((".botctl/",), False)
    text = (tmp_path / ".gitignore").read_text()
    assert text.startswith("# mine\n.env\n")
    assert text.endswith(".botctl/\n")
    assert ensure_ignored(tmp_path).added == ()
    assert (tmp_path / ".gitignore").read_text() == text


@pytest.mark.parametrize("written", [".botctl", "/.botctl/", "  .botctl/  ", ".botctl/*"])
def test_a_line_that_means_the_same_is_enough(tmp_path: Path, written: str) -> None:
    (tmp_path / ".gitignore").write_text(f"{written}\n")
    assert ensure_ignored(tmp_path).added == ()


def test_an_ignore_file_that_is_no_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / ".gitignore").mkdir()
    with pytest.raises(BotctlError, match=r"cannot read the ignore file .*\.gitignore"):
        ensure_ignored(tmp_path)


def test_git_tells_what_it_ignores_and_where_the_work_tree_is(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    (repo / "sub").mkdir()
    assert work_tree_top(repo / "sub" / "not-yet") == repo.resolve()
    assert ignored(repo / "sub" / "k.key") is False
    (repo / ".gitignore").write_text("*.key\n")
    assert ignored(repo / "sub" / "k.key") is True
    assert ignored(tmp_path / "k.key") is None  # no work tree: cannot tell
    assert work_tree_top(tmp_path) is None


def test_no_git_is_cannot_tell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = repository(tmp_path / "repo")
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert ignored(repo / "k.key") is None
    assert unignored_key_warning(repo / "k.key") is None


def test_a_git_that_hangs_is_cannot_tell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A git that never answers (a network file system) is given up after the deadline."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "git"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(gitignore, "GIT_TIMEOUT", 0.2)
    assert ignored(tmp_path / "k.key") is None
    assert work_tree_top(tmp_path) is None


def test_git_gets_no_shell_and_the_name_after_the_options(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What git is given: its arguments as a list, `--` before the file's name, fsmonitor
    off in its environment (a repository's configuration could name a program)."""
    seen: list[tuple[list[str], dict[str, str]]] = []
    real = subprocess.Popen

    def popen(args: list[str], **kwargs: Any) -> subprocess.Popen[bytes]:
        assert "shell" not in kwargs
        seen.append((list(args), dict(kwargs["env"])))
        return real(args, **kwargs)

    repo = repository(tmp_path / "repo")
    monkeypatch.setattr(subprocess, "Popen", popen)
    assert ignored(repo / "--exclude-standard") is False
    [(args, env)] = seen
    assert args[-2:] == ["--", "--exclude-standard"]
    config = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(int(env["GIT_CONFIG_COUNT"]))
    }
    assert config["core.fsmonitor"] == "false"
