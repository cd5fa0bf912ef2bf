"""``botctl agent``'s usage errors: clear, located, exit 1, no traceback, nothing started."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner

from botctl.cli import cli


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["agent", *args], env=env or {})
    assert "Traceback" not in result.output
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("nowhere",), "source 'nowhere': not a directory"),
        (("{dir}", "--listen", "nope"), "give HOST:PORT"),
        (("{dir}", "--listen", "127.0.0.1:99999"), "give HOST:PORT"),
        (("{dir}", "--self-heal"), "add --auto-apply"),
        (("{dir}", "--reassert-every", "1h", "--auto-apply"), "add --self-heal"),
        (("{dir}", "--webhook-secret-env", "BOTCTL_TEST_UNSET"), "empty or unset"),
        (("{dir}", "--state", "ftp://x"), "no state backend for ftp://"),
        (("{dir}", "--notify-on", "bogus"), "choose from failed, test_failed, drift"),
        (("{dir}", "--notify", "ftp://user:pw@host/x"), "give an http:// or https:// URL"),
        (("{dir}", "--interval", "soon"), "not a duration"),
        (("{dir}", "--watchdog", "soon"), "not a duration"),
        (("{dir}", "--max-connections", "1"), "1 is not in the range x>=2"),
        (("git+file:///x.git#main",), "expected git+<repository URL>#<branch>:<path"),
        (("{dir}", "--test"), "--test gates what the agent applies: add --auto-apply"),
        (("{dir}", "--stages", "stage=a,stage=b"), "--stages gates what the agent applies"),
        (("{dir}", "--auto-apply", "--rollback-on-failure"), "add --test"),
        (("{dir}", "--auto-apply", "--test", "--soak", "1m"), "--soak is the wait between"),
        (("{dir}", "--auto-apply", "--stages", "stage=a"), "names one stage"),
        (("{dir}", "--auto-apply", "--stages", "stage=a,stage=a"), "stage=a is named twice"),
        (("{dir}", "--auto-apply", "--stages", "stage in (a"), "--stages"),
    ],
)
def test_usage_errors(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    code, output = run(*(a.replace("{dir}", str(tmp_path)) for a in args))
    assert code == 1
    assert said in output
    assert "pw@" not in output


def test_a_taken_listen_address_is_a_clear_error(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        code, output = run(
            str(tmp_path), "--listen", f"127.0.0.1:{port}", "--state", str(tmp_path / "s.json")
        )
    assert code == 1
    assert f"--listen 127.0.0.1:{port}: cannot listen: Address already in use" in output
