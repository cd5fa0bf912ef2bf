"""`sandbox serve`: port 0 prints the port it serves on; expected failures are one line."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from tests import launch

from botctl.sandbox.cli import sandbox


def test_serve_port_zero_prints_the_url(tmp_path: Path) -> None:
    args = ["serve", "--port", "0", "--db", str(tmp_path / "s.db"), "--api-key", "dev"]
    proc = launch.start(
        *args,
        module="botctl.sandbox.cli",
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("Sandbox serving http://127.0.0.1:"), line
        url = line.split()[2]
        assert not url.endswith(":0")
        response = httpx.get(f"{url}/api/v1/get-chatbots", headers={"Authorization": "Bearer dev"})
        assert response.json() == {"chatbots": []}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--host", "0.0.0.0"], "--allow-non-loopback"),
        (["--api-key", "dev:gold"], "invalid --api-key"),
        (["--api-key", ":standard"], "API key"),
        (["--seed", "/nonexistent/seed.yaml"], "cannot read seed file"),
        (["--extra-model", "gpt 9"], "invalid extra model 'gpt 9'"),
        (["--extra-model", ""], "invalid extra model"),
        (["--extra-source", "WhatsApp,Slack"], "invalid extra source"),
        (["--extra-source", " Slack"], "invalid extra source"),
    ],
)
def test_expected_failures_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(sandbox, ["serve", "--db", str(tmp_path / "s.db"), *args])
    assert result.exit_code == 1
    assert needle in result.output
    assert "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(
            sandbox, ["serve", "--port", str(port), "--db", str(tmp_path / "s.db")]
        )
    assert result.exit_code == 1
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
    assert "Traceback" not in result.output
