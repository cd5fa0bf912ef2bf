"""Shell completion: `botctl completion SHELL` prints click's script, and --target completes
the chatbot names of the configuration typed so far, from the YAML alone."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from botctl.cli import cli
from botctl.config.yamlnodes import MAX_FILE_BYTES
from tests import launch
from tests.e2e_support import Bench, bot_yaml

ROOT = Path(__file__).parents[1]


def complete(words: str, cwd: Path | None = None, shell: str = "bash") -> list[str]:
    """What botctl answers when the shell asks for completions of ``words`` (the last one,
    possibly empty, being completed), through click's own machinery."""
    # bash and zsh pass the words and the index of the one being completed; fish passes the
    # line and the word itself.
    index = str(len(words.split(" ")) - 1)
    cword = words.split(" ")[-1] if shell == "fish" else index
    env = {"_BOTCTL_COMPLETE": f"{shell}_complete", "COMP_WORDS": words, "COMP_CWORD": cword}
    runner = CliRunner()
    previous = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        result = runner.invoke(cli, [], env=env, prog_name="botctl")
    finally:
        os.chdir(previous)
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


@pytest.fixture
def config(tmp_path: Path) -> Path:
    bots = tmp_path / "bots"
    (bots / "eu").mkdir(parents=True)
    (bots / "support.yaml").write_text(bot_yaml("support", "bot-1"), encoding="utf-8")
    (bots / "eu" / "sales.yaml").write_text(
        bot_yaml("sales-eu", "bot-2") + "---\n" + bot_yaml("sales-de", "bot-3"), encoding="utf-8"
    )
    # Half-written configuration still completes; what cannot be read is skipped.
    (bots / "draft.yaml").write_text("kind: Chatbot\nmetadata: {name: [oops\n", encoding="utf-8")
    (bots / "other.yaml").write_text("kind: Something\nmetadata: {name: nope}\n", encoding="utf-8")
    (bots / ".hidden").mkdir()
    (bots / ".hidden" / "x.yaml").write_text(bot_yaml("hidden", "bot-9"), encoding="utf-8")
    return tmp_path


def test_target_completes_the_names_of_the_paths_typed(config: Path) -> None:
    assert complete(f"botctl plan {config / 'bots'} --target ") == [
        "plain,sales-de",
        "plain,sales-eu",
        "plain,support",
    ]
    assert complete(f"botctl drift {config / 'bots'} --target sa") == [
        "plain,sales-de",
        "plain,sales-eu",
    ]
    # Only the files given; names already chosen are not offered again.
    sales = config / "bots" / "eu" / "sales.yaml"
    assert complete(f"botctl apply --target sales-eu {sales} --target ") == ["plain,sales-de"]


def test_a_fifo_or_a_huge_file_among_the_configuration_is_skipped(config: Path) -> None:
    """A FIFO named *.yaml blocked the Tab press until something wrote to it."""
    os.mkfifo(config / "bots" / "pipe.yaml")
    with (config / "bots" / "huge.yaml").open("w") as handle:
        handle.write(bot_yaml("huge", "bot-8") + "# " + "x" * (MAX_FILE_BYTES + 1) + "\n")
    result: list[list[str]] = []
    worker = threading.Thread(
        target=lambda: result.append(complete(f"botctl plan {config / 'bots'} --target s")),
        daemon=True,
    )
    worker.start()
    worker.join(timeout=60)
    assert result == [["plain,sales-de", "plain,sales-eu", "plain,support"]]


def test_without_paths_the_current_directory_is_searched(config: Path) -> None:
    assert complete("botctl validate --target s", cwd=config) == [
        "plain,sales-de",
        "plain,sales-eu",
        "plain,support",
    ]


def test_zsh_and_fish_get_the_same_names(config: Path) -> None:
    zsh = complete(f"botctl plan {config / 'bots'} --target sales-e", shell="zsh")
    assert zsh == ["plain", "sales-eu", "_"]
    fish = complete(f"botctl plan {config / 'bots'} --target sales-e", shell="fish")
    assert fish == ["plain,sales-eu"]


def test_completing_never_contacts_the_service(config: Path, sandbox: Any) -> None:
    bench = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=config)
    env = {
        **os.environ,
        "_BOTCTL_COMPLETE": "bash_complete",
        "COMP_WORDS": f"botctl plan {config / 'bots'} --target ",
        "COMP_CWORD": "4",
        "BOTCTL_API_URL": sandbox.api_url,
        "BOTCTL_API_KEY": "test-key",
    }
    done = launch.run(env=env, script=True)
    assert done.returncode == 0, done.stderr
    assert "plain,support" in done.stdout.splitlines()
    assert bench.requests() == []


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_the_script_for_each_shell(shell: str) -> None:
    result = CliRunner().invoke(cli, ["completion", shell])
    assert result.exit_code == 0, result.output
    assert "_BOTCTL_COMPLETE" in result.stdout
    assert f"{shell}_complete" in result.stdout


def test_completion_help_says_how_to_install_it() -> None:
    result = CliRunner().invoke(cli, ["completion", "--help"])
    assert 'eval "$(botctl completion bash)"' in result.stdout
    assert "~/.config/fish/completions/botctl.fish" in result.stdout
    bad = CliRunner().invoke(cli, ["completion", "tcsh"], standalone_mode=False)
    assert bad.exit_code != 0


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_bash_script_completes_in_a_real_bash(config: Path) -> None:
    """The script as a user installs it, sourced into bash, asked as bash asks on Tab."""
    script = (
        'eval "$(botctl completion bash)"\n'
        f"COMP_WORDS=(botctl plan {config / 'bots'} --target sales)\n"
        "COMP_CWORD=4\n"
        "_botctl_completion botctl\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    env = launch.environment(
        {"PATH": f"{launch.entry_point().parent}{os.pathsep}{os.environ['PATH']}"}
    )
    done = subprocess.run(
        ["bash", "--norc", "-c", script], env=env, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["sales-de", "sales-eu"]
