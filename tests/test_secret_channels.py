"""No other channel (#20): every place a value derived from a ``${secret:VAR}`` can go, checked
with a secret of distinctive text and a low-entropy one: plans in every format, the drift
report, the GitHub Action's comment file, job summary and outputs, ``--debug`` traces, the
files botctl writes, and the embedded sandbox's database. In none does the value appear (in
any spelling a message may quote it), nor a fingerprint that what is shown lets anyone check.
Short secrets (BC103) are masked where they stand, without mangling other text."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from botctl.values import secret_forms
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.hostile_support import hostile_server, run_botctl

DISTINCT = "Zq9-distinctive-s3cret-Xy"
LOW = "qwerty"  # a dictionary word, and short: warned about (BC103)
SETTINGS = (
    "name: Support 1\n"
    "instructions: 'Use ${secret:DISTINCT} with care'\n"
    "ipLimitMessage: '${secret:LOW}'"
)
ATTRIBUTES = "- {name: code, type: text, label: 'Code ${secret:LOW}'}"
# The values a fingerprint could be of: each secret, and each value built from one.
DERIVED = (DISTINCT, LOW, f"Use {DISTINCT} with care", f"Code {LOW}")


def assert_hidden(text: str) -> None:
    """Neither secret in any spelling, nor a fingerprint checkable from ``text`` itself."""
    for secret in (DISTINCT, LOW):
        for form in secret_forms(secret):
            assert form not in text, f"{secret!r} shows as {form!r}"
    fingerprints = set(re.findall(r"[0-9a-f]{64}", text))
    keys = {bytes.fromhex(t) for t in fingerprints} | {t.encode() for t in fingerprints}
    for value in DERIVED:
        message = json.dumps(value, ensure_ascii=False).encode()
        assert hashlib.sha256(message).hexdigest() not in fingerprints
        for key in keys:
            assert hmac.new(key, message, "sha256").hexdigest() not in fingerprints


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.env = {"DISTINCT": DISTINCT, "LOW": LOW}
    b.create_bot("bot-1", settings={"name": "Support 10"})
    b.write("bot.yaml", bot_yaml(settings=SETTINGS, attributes=ATTRIBUTES))
    return b


def applied_then_edited(bench: Bench) -> None:
    """Applied, then edited in the dashboard: the service holds other secret-bearing text."""
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 0, result.output
    edited = {"instructions": f"Use {DISTINCT} quickly", "ipLimitMessage": f"{LOW}!"}
    bench.admin("PATCH", "/chatbots/bot-1", {"settings": edited})


def test_plans_in_every_format(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    before = [bench.run("plan", "--format", fmt, cfg) for fmt in ("text", "json")]
    applied_then_edited(bench)
    for fmt in ("text", "json", "markdown", "github"):
        result = bench.run("plan", "--format", fmt, cfg)
        assert result.exit_code == 0, result.output
        assert "(secret)" in result.output
        assert_hidden(result.output)
    for result in before:
        assert_hidden(result.output)
    text = before[0].output
    assert "warning[BC103]" in text  # the short one, named by its variable only
    assert "${secret:LOW} is shorter than 8 characters" in text
    # Masked where it stands: the short secret does not mangle the rest of the text.
    assert '"Support 10" -> "Support 1"' in text or "Support 10 -> Support 1" in text


def test_the_drift_report_in_every_format(bench: Bench) -> None:
    applied_then_edited(bench)
    for fmt in ("text", "json", "markdown", "github"):
        result = bench.run("drift", "--format", fmt, str(bench.config_dir))
        assert result.exit_code == 2, result.output
        assert "(secret)" in result.output
        assert_hidden(result.output)


def test_debug_traces(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    plan_file = str(bench.workdir / "plan.json")
    outputs = [bench.run("plan", "--debug", "--out", plan_file, cfg)]
    saved = bench.run("apply", "--plan", plan_file, "--debug")  # secrets from the environment
    assert saved.exit_code == 0, saved.output
    assert '"ipLimitMessage": "(secret)"' in saved.output  # the short one, where it stands
    assert '"name": "Support 1"' in saved.output  # and nothing else mangled
    outputs += [saved, bench.run("apply", "--auto-approve", "--debug", cfg)]
    trace = "\n".join(r.output for r in outputs)
    assert "debug: " in trace
    assert_hidden(trace)


def test_the_files_botctl_writes(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    plan_file = bench.workdir / "plan.json"
    assert bench.run("plan", "--out", str(plan_file), cfg).exit_code == 0
    assert bench.run("apply", "--plan", str(plan_file)).exit_code == 0
    applied_then_edited(bench)
    files = [p for p in bench.workdir.iterdir() if p.is_file() and ".db" not in p.name]
    assert sorted(p.name for p in files) == ["plan.json", "state.json", "state.json.key"]
    stored = "\n".join(p.read_text() for p in files if p.suffix != ".key")
    assert "hmac-sha256:" in stored  # fingerprints there are, checkable by nothing shown
    assert_hidden(stored)


def test_the_action_comment_file_job_summary_and_outputs(bench: Bench) -> None:
    applied_then_edited(bench)
    temp = bench.workdir / "runner"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("BOTCTL_")}
    env.update(
        {
            "BOTCTL_API_URL": bench.api_url,
            "BOTCTL_API_KEY": KEY,
            "DISTINCT": DISTINCT,
            "LOW": LOW,
            "NO_COLOR": "1",
            "RUNNER_TEMP": str(temp),
            "GITHUB_STEP_SUMMARY": str(temp / "summary.md"),
            "GITHUB_OUTPUT": str(temp / "output"),
            "INPUT_PATH": "config/",
            "INPUT_STATE": "state.json",
        }
    )
    seen = []
    for command in ("plan", "drift"):
        done = launch.run(
            module="botctl.github_action",
            env={**env, "INPUT_COMMAND": command},
            inherit_env=False,  # env: this environment without BOTCTL_*
            cwd=bench.workdir,
        )
        assert done.returncode == 0, done.stdout + done.stderr
        seen += [done.stdout, done.stderr]
    comments = [p.read_text() for p in temp.glob("botctl-*.md")]
    assert len(comments) == 2
    summary = (temp / "summary.md").read_text()
    assert "(secret)" in summary
    for text in (*seen, *comments, summary, (temp / "output").read_text()):
        assert_hidden(text)


def test_the_embedded_sandbox_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--sandbox's database stands in for the service: it holds what was sent, as the service
    does, and never a fingerprint or the state key."""
    from click.testing import CliRunner

    from botctl.cli import cli

    monkeypatch.chdir(tmp_path)
    Path("bots").mkdir()
    Path("bots/bot.yaml").write_text(bot_yaml(settings=SETTINGS, attributes=ATTRIBUTES))
    env = {"DISTINCT": DISTINCT, "LOW": LOW, "NO_COLOR": "1"}
    result = CliRunner().invoke(cli, ["apply", "--sandbox", "--auto-approve", "bots"], env=env)
    assert result.exit_code == 0, result.output
    assert_hidden(result.output)
    database = Path(".botctl/sandbox.db").read_bytes()
    state_key = Path(".botctl/state.json.key").read_text().strip()
    state = Path(".botctl/state.json").read_text()
    assert state_key.encode() not in database
    for fingerprint in re.findall(r"hmac-sha256:[0-9a-f]{64}", state):
        assert fingerprint.encode() not in database
    assert_hidden(state)


def test_a_short_secret_does_not_mangle_a_message(tmp_path: Path) -> None:
    """Tried with PIN=1, a redirect error read `http://(secret)27.0.0.(secret):42529/...`:
    the substring net now leaves a short secret alone in text."""
    (tmp_path / "bots").mkdir()
    config = bot_yaml(settings="instructions: 'PIN ${secret:PIN}'")
    (tmp_path / "bots" / "bot.yaml").write_text(config)
    with hostile_server() as server:
        env = {
            "BOTCTL_API_KEY": KEY,
            "BOTCTL_API_URL": server.api_url("redirect-away", "list"),
            "PIN": "1",
        }
        run = run_botctl(["plan", "bots", "--state", "state.json"], env=env, cwd=tmp_path)
    assert run.code == 1, run.output
    assert "redirected to http://127.0.0.2:9/api/v1/" in run.stderr
    assert "(secret)" not in run.stderr
    assert "Traceback" not in run.output
