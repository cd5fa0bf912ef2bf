"""Secret hygiene: the API key appears in no output, error, debug trace, plan, state or lock
file, whatever the command and however it fails. Values marked ${secret:VAR} are masked in
every output and never written to any file: the state and plan files hold fingerprints. Every
file botctl writes is readable by its owner only."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests import launch
from tests.e2e_support import Bench, bot_yaml

SECRET_KEY = "sk-live-5up3r-s3cr3t-key-0123456789"
SECRET_VALUE = "hunter2-prompt-token"


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(api_keys={SECRET_KEY: "standard"})
    b = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    b.env = {"BOTCTL_API_KEY": SECRET_KEY, "PROMPT_TOKEN": SECRET_VALUE}
    b.create_bot("bot-1", account=SECRET_KEY, settings={"name": "Old"})
    return b


def botctl_files(bench: Bench) -> list[Path]:
    # What botctl wrote (state, plans, locks); not the configuration, nor the sandbox's own
    # database beside them.
    return [
        p
        for p in bench.workdir.rglob("*")
        if p.is_file() and "config" not in p.parts and ".db" not in p.name
    ]


def everything_written(bench: Bench) -> str:
    return "\n".join(p.read_text(errors="replace") for p in botctl_files(bench))


def assert_private(files: list[Path]) -> None:
    modes = {str(p): oct(p.stat().st_mode & 0o777) for p in files}
    assert set(modes.values()) == {oct(0o600)}, modes


def test_key_never_appears_anywhere(bench: Bench) -> None:
    settings = "name: Support\ninstructions: 'Use token ${secret:PROMPT_TOKEN} carefully'"
    bench.write("bot.yaml", bot_yaml(settings=settings, attributes="- {name: t, type: text}"))
    cfg = str(bench.config_dir)
    plan_file = str(bench.workdir / "plan.json")
    outputs = []
    runs: list[tuple[str, ...]] = [
        ("validate", cfg),
        ("plan", "--debug", cfg),
        ("plan", "--format", "json", cfg),
        ("plan", "--format", "markdown", "--out", plan_file, cfg),
        ("apply", "--plan", plan_file, "--debug"),
        ("drift", "--debug", cfg),
        ("drift", "--format", "json", cfg),
        ("apply", "--auto-approve", "--debug", cfg),
    ]
    # export writes what the service holds: a secret value sent earlier comes back in clear
    # (it has no ${secret:...} to mask); only the key is checked there.
    exported = bench.run("export", "bot-1")
    assert exported.exit_code == 0, exported.output
    for args in runs:
        result = bench.run(*args)
        assert result.exit_code in (0, 2), (args, result.output)
        outputs.append(result.output)
    # Failures: a service error with --debug, an unreachable URL, a 401.
    httpx.post(
        f"{bench.url}/_sandbox/faults",
        json={"method": "*", "path": "/api/v1/*", "count": 20, "status": 500},
    ).raise_for_status()
    failing = bench.run("plan", "--debug", cfg)
    assert failing.exit_code == 1
    outputs.append(failing.output)
    httpx.delete(f"{bench.url}/_sandbox/faults")
    outputs.append(
        bench.run(
            "plan", "--debug", cfg, env={"BOTCTL_API_URL": "http://127.0.0.1:9/api/v1"}
        ).output
    )
    wrong = bench.run(
        "apply", "--auto-approve", "--debug", cfg, env={"BOTCTL_API_KEY": SECRET_KEY + "x"}
    )
    assert wrong.exit_code == 1
    outputs.append(wrong.output)

    combined = "\n".join(outputs) + exported.output + everything_written(bench)
    assert "Bearer ***" in combined  # the debug trace ran, masked
    assert SECRET_KEY not in combined
    assert SECRET_VALUE not in "\n".join(outputs)
    assert "(secret)" in "\n".join(outputs)
    # The files: the state and the plan hold the secret's fingerprint, never the value.
    written = everything_written(bench)
    assert SECRET_VALUE not in written
    # The key of the fingerprints: beside the local state, never in it.
    names = sorted(p.name for p in botctl_files(bench))
    assert names == ["plan.json", "state.json", "state.json.key"]
    state = json.loads((bench.workdir / "state.json").read_text())
    assert state["bots"]["bot-1"]["settings"]["instructions"]["$sealed"].startswith("hmac-")
    plan = json.loads((bench.workdir / "plan.json").read_text())
    assert plan["operations"][0]["body"]["instructions"]["$secret"][1]["variable"] == (
        "PROMPT_TOKEN"
    )
    assert_private(botctl_files(bench))


def test_a_rotated_secret_refuses_a_saved_plan_naming_the_variable(bench: Bench) -> None:
    settings = "instructions: 'Use token ${secret:PROMPT_TOKEN} carefully'"
    bench.write("bot.yaml", bot_yaml(settings=settings))
    plan_file = str(bench.workdir / "plan.json")
    assert bench.run("plan", "--out", plan_file, str(bench.config_dir)).exit_code == 0
    bench.clear_log()
    rotated = bench.run("apply", "--plan", plan_file, env={"PROMPT_TOKEN": "n3w-hunter3"})
    assert rotated.exit_code == 1
    assert "the secret $PROMPT_TOKEN changed since the plan was made" in rotated.stderr
    assert "n3w-hunter3" not in rotated.output
    assert bench.writes() == []
    unset = bench.run("apply", "--plan", plan_file, env={"PROMPT_TOKEN": ""})
    assert unset.exit_code == 1
    assert "the plan needs secrets that are not set: $PROMPT_TOKEN" in unset.stderr
    applied = bench.run("apply", "--plan", plan_file)
    assert applied.exit_code == 0, applied.output
    sent = [w["body"] for w in bench.writes()]
    assert sent == [{"chatbotId": "bot-1", "instructions": f"Use token {SECRET_VALUE} carefully"}]
    # Converged: the state's fingerprint is the declared value's (assumed in sync).
    assert bench.plan_json(str(bench.config_dir))["changes"] == []
    assert SECRET_VALUE not in everything_written(bench)


def test_a_state_of_the_previous_format_is_rewritten_without_its_secrets(bench: Bench) -> None:
    bench.write("bot.yaml", bot_yaml(settings="ipLimitMessage: '${secret:PROMPT_TOKEN}'"))
    bench.state_path.write_text(
        json.dumps(
            {
                "format_version": 2,
                "lineage": "L",
                "serial": 7,
                "bots": {
                    "bot-1": {
                        "bot": "support",
                        "settings": {"ipLimitMessage": SECRET_VALUE},
                        "verified_settings": [],
                        "attributes": {},
                        "verified_attributes": [],
                    }
                },
            }
        )
    )
    bench.state_path.chmod(0o644)
    assert SECRET_VALUE in bench.state_path.read_text()
    result = bench.run("apply", str(bench.config_dir))  # nothing to do: no terminal needed
    assert result.exit_code == 0, result.output
    assert bench.writes() == []
    state = json.loads(bench.state_path.read_text())
    assert (state["format_version"], state["lineage"], state["serial"]) == (4, "L", 8)
    assert SECRET_VALUE not in bench.state_path.read_text()
    assert_private([bench.state_path])


def test_the_lock_file_is_private_and_names_no_secret(sandbox_factory: Any, tmp_path: Path) -> None:
    """Seen from outside while a real apply holds it."""
    server = sandbox_factory(api_keys={SECRET_KEY: "standard"}, latency_ms=150)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    bench.create_bot("bot-1", account=SECRET_KEY)
    bench.write("bot.yaml", bot_yaml(settings="instructions: '${secret:PROMPT_TOKEN}'"))
    env = {
        "BOTCTL_API_KEY": SECRET_KEY,
        "BOTCTL_API_URL": server.api_url,
        "PROMPT_TOKEN": SECRET_VALUE,
    }
    lock = tmp_path / "state.json.lock"
    args = ["apply", "--auto-approve", "--state", str(bench.state_path), str(bench.config_dir)]
    with launch.start(*args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        # The lock is created (O_EXCL), then its holder written: read it once it has one.
        while not (lock.exists() and lock.stat().st_size) and proc.poll() is None:
            time.sleep(0.01)
        assert lock.exists(), "the apply ended before its lock was seen"
        mode, text = lock.stat().st_mode & 0o777, lock.read_text()
        output = proc.communicate(timeout=60)[0].decode()
    assert proc.returncode == 0, output
    assert mode == 0o600
    assert json.loads(text)["command"].endswith("apply")
    assert SECRET_KEY not in text
    assert SECRET_VALUE not in text
    assert SECRET_KEY not in output
    assert SECRET_VALUE not in output
    assert not lock.exists()


def test_sandbox_never_stores_a_real_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--sandbox keeps a database on disk: the key in the environment never reaches it."""
    from click.testing import CliRunner

    from botctl.cli import cli

    monkeypatch.chdir(tmp_path)
    Path("bots").mkdir()
    Path("bots/bot.yaml").write_text(bot_yaml(settings="name: '${secret:PROMPT_TOKEN}'"))
    env = {"BOTCTL_API_KEY": SECRET_KEY, "PROMPT_TOKEN": SECRET_VALUE, "NO_COLOR": "1"}
    runner = CliRunner()
    for args in (["apply", "--sandbox", "--auto-approve", "bots"], ["plan", "--sandbox", "bots"]):
        result = runner.invoke(cli, args, env=env, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        assert SECRET_KEY not in result.output
    stored = b"".join(p.read_bytes() for p in Path(".botctl").iterdir() if p.is_file())
    assert Path(".botctl/sandbox.db").exists()
    assert SECRET_KEY.encode() not in stored
    assert SECRET_VALUE.encode() not in Path(".botctl/state.json").read_bytes()
