"""#23: nothing a repository names runs a command through git. ``botctl.gitexec`` on its own
(what it refuses, the environment it gives git, its deadline and cancellation, streamed
blobs), and every caller of git through the CLI, as a person at a terminal runs it."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from botctl import gitexec
from botctl.errors import StateError
from botctl.store.backends.git import parse_git_url
from tests import launch


@pytest.mark.parametrize(
    ("repo", "why"),
    [
        ("--upload-pack=touch pwned;", "may not start with '-'"),
        ("-oProxyCommand=touch pwned", "may not start with '-'"),
        ("ext::sh -c touch% pwned", "transport 'ext' is not allowed"),
        ("fd::3", "transport 'fd' is not allowed"),
        ("http://example.com/bots.git", "transport 'http' is not allowed"),
        ("ftp://example.com/bots.git", "transport 'ftp' is not allowed"),
        ("https://example.com/a\nb", "control characters"),
        ("", "no repository"),
    ],
)
def test_a_repository_that_is_an_option_or_runs_a_command_is_refused(repo: str, why: str) -> None:
    problem = gitexec.check_repository(repo)
    assert problem is not None
    assert why in problem


@pytest.mark.parametrize(
    "repo",
    [
        "https://github.com/acme/bots.git",
        "ssh://git@github.com/acme/bots.git",
        "git@github.com:acme/bots.git",
        "git://example.com/bots.git",
        "file:///srv/bots.git",
        "/srv/bots.git",
        "../bots.git",
    ],
)
def test_the_four_transports_and_local_paths_are_accepted(repo: str) -> None:
    assert gitexec.check_repository(repo) is None


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("git+--upload-pack=touch pwned;#main:state.json", "may not start with '-'"),
        ("git+https://h/r.git#--orphan:state.json", "not a usable branch name"),
        ("git+https://h/r.git#main:-c:state.json", "not a usable path"),
        ("git+https://h/r.git#ma in:state.json", "not a usable branch name"),
    ],
)
def test_git_urls_refuse_options_in_every_part(url: str, why: str) -> None:
    with pytest.raises(StateError, match=why):
        parse_git_url(url)


def test_git_gets_an_environment_no_repository_can_turn_into_a_command() -> None:
    env = gitexec.environment(
        {
            "PATH": "/bin",
            "GIT_DIR": "/elsewhere",
            "GIT_CONFIG_COUNT": "1",
            "GIT_CONFIG_KEY_0": "a.b",
        }
    )
    assert "GIT_DIR" not in env
    assert env["GIT_ALLOW_PROTOCOL"] == "file:https:ssh:git"
    assert env["GIT_PROTOCOL_FROM_USER"] == "0"
    assert env["GIT_TERMINAL_PROMPT"] == "0"
    assert "BatchMode=yes" in env["GIT_SSH_COMMAND"]
    assert "ConnectTimeout=" in env["GIT_SSH_COMMAND"]
    assert "ServerAliveInterval=" in env["GIT_SSH_COMMAND"]
    config = {
        env[f"GIT_CONFIG_KEY_{i}"]: env[f"GIT_CONFIG_VALUE_{i}"]
        for i in range(1, int(env["GIT_CONFIG_COUNT"]))
    }
    assert env["GIT_CONFIG_KEY_0"] == "a.b"  # the operator's own entries come first, kept
    assert config["safe.bareRepository"] == "explicit"
    assert config["http.lowSpeedLimit"] == "1000"
    assert config["http.lowSpeedTime"] == "30"
    assert config["core.hooksPath"] == os.devnull
    # An operator's own ssh command is theirs.
    assert gitexec.environment({"GIT_SSH_COMMAND": "ssh -i k"})["GIT_SSH_COMMAND"] == "ssh -i k"


def runner(timeout: float = 30.0) -> gitexec.Git:
    return gitexec.Git(gitexec.environment(os.environ), timeout, "the test")


def test_git_itself_refuses_ext_and_options_even_when_asked_directly(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    done = runner().run(["ls-remote", "--end-of-options", f"ext::sh -c touch% {marker}"])
    assert done.returncode != 0
    assert b"transport 'ext' not allowed" in done.stderr
    done = runner().run(["ls-remote", "--end-of-options", f"--upload-pack=touch {marker};"])
    assert done.returncode != 0
    assert not marker.exists()


def test_a_bare_repository_committed_in_a_checkout_is_never_used(tmp_path: Path) -> None:
    """A pull request can commit a bare repository's files, with a config of its choosing;
    a git run inside it (``--changed-since`` starts where the configuration is) must not
    take it for the repository."""
    evil = tmp_path / "checkout" / "bots"
    subprocess.run(["git", "init", "-q", "--bare", str(evil)], check=True)
    marker = tmp_path / "pwned"
    with (evil / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {marker}"\n')
    done = runner().run(["-C", str(evil), "rev-parse", "--git-dir"])
    assert done.returncode != 0
    assert b"cannot use bare repository" in done.stderr
    assert not marker.exists()


def test_a_deadline_kills_the_whole_process_group(tmp_path: Path) -> None:
    """git runs an alias through the shell: the deadline kills git and what it started."""
    pids = tmp_path / "pids"
    git = runner(timeout=1.0)
    git.env.update(
        {
            "GIT_CONFIG_COUNT": str(int(git.env["GIT_CONFIG_COUNT"]) + 1),
            f"GIT_CONFIG_KEY_{git.env['GIT_CONFIG_COUNT']}": "alias.hang",
            f"GIT_CONFIG_VALUE_{git.env['GIT_CONFIG_COUNT']}": f"!echo $$ >{pids}; sleep 60",
        }
    )
    started = time.monotonic()
    with pytest.raises(gitexec.GitTimeout, match="git hang did not finish within 1 s"):
        git.run(["hang"])
    assert time.monotonic() - started < 30
    shell = int(pids.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{shell}").exists() and "Z" not in _state(shell):
        assert time.monotonic() < deadline, "the shell git started survived"
        time.sleep(0.05)


def _state(pid: int) -> str:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return stat[stat.rindex(")") + 2]


def test_cancel_stops_what_runs_and_refuses_what_would_start(tmp_path: Path) -> None:
    git = runner()
    git.env.update(
        {
            "GIT_CONFIG_COUNT": str(int(git.env["GIT_CONFIG_COUNT"]) + 1),
            f"GIT_CONFIG_KEY_{git.env['GIT_CONFIG_COUNT']}": "alias.hang",
            f"GIT_CONFIG_VALUE_{git.env['GIT_CONFIG_COUNT']}": "!sleep 60",
        }
    )
    failed: list[BaseException] = []

    def hang() -> None:
        try:
            git.run(["hang"])
        except gitexec.GitError as exc:
            failed.append(exc)

    thread = threading.Thread(target=hang)
    thread.start()
    deadline = time.monotonic() + 10
    while not git._running:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    git.cancel()
    thread.join(10)
    assert not thread.is_alive()
    assert isinstance(failed[0], gitexec.GitCancelled)
    with pytest.raises(gitexec.GitCancelled, match="not started"):
        git.run(["version"])


def test_blobs_are_streamed_and_cut_at_the_limit(tmp_path: Path) -> None:
    repo = tmp_path / "r.git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    big = tmp_path / "big"
    big.write_bytes(b"x" * (3 << 20))
    oids = [
        subprocess.run(
            ["git", f"--git-dir={repo}", "hash-object", "-w", "--stdin"],
            input=data,
            capture_output=True,
            check=True,
        )
        .stdout.decode()
        .strip()
        for data in (b"small\n", big.read_bytes(), b"")
    ]
    blobs = list(gitexec.read_blobs(runner(), [f"--git-dir={repo}"], oids, 1024))
    assert [(b.size, b.head) for b in blobs] == [(6, b"small\n"), (3 << 20, b"x" * 1024), (0, b"")]


# --- every git caller, through the CLI ---------------------------------------------------


def test_a_state_url_that_is_an_option_runs_nothing_at_a_terminal(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    (tmp_path / "bots").mkdir()
    for state in (f"git+--upload-pack=touch {marker};#main:s.json", f"git+ext::touch {marker}#m:s"):
        done = launch.run("state", "show", "--state", state, cwd=tmp_path, timeout=60)
        assert done.returncode == 1, done.stderr
        assert "state URL" in done.stderr
        assert "Traceback" not in done.stderr
    assert not marker.exists()


def test_an_agent_source_that_is_an_option_is_refused_at_start(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    done = launch.run(
        "agent",
        f"git+--upload-pack=touch {marker};#main:bots",
        "--sandbox",
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert "source 'git+--upload-pack=" in done.stderr
    assert "may not start with '-'" in done.stderr
    assert not marker.exists()
