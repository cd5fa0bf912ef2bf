"""Secret hygiene: the API key appears in no output, error, debug trace, plan file or state
file, whatever the command and however it fails. Values marked ${secret:VAR} are masked."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

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


def everything_written(bench: Bench) -> str:
    # What botctl wrote (state, plan, lock); not the sandbox's own database beside them.
    files = [
        p
        for p in bench.workdir.rglob("*")
        if p.is_file() and "config" not in p.parts and ".db" not in p.name
    ]
    return "\n".join(p.read_text(errors="replace") for p in files)


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
    state = json.loads((bench.workdir / "state.json").read_text())
    assert SECRET_KEY not in json.dumps(state)
