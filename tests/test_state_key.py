"""The state key (#20): fingerprints a reader of the state cannot check, the key kept out of
the state (BOTCTL_STATE_KEY, or a key file beside a local state), clear errors when it is
missing or another, the old salt-only format still read with a warning until `state rekey`,
`state init-key`, and the state (and saved plans) encrypted at rest, through the real CLI
against the sandbox."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from botctl.sealing import FingerprintKey
from tests.e2e_support import Bench, bot_yaml
from tests.store.conftest import bare_repository

SECRET = "hunter2-prompt-token"
SETTINGS = "name: Support\ninstructions: 'Use token ${secret:PROMPT_TOKEN} carefully'"


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.env = {"PROMPT_TOKEN": SECRET}
    b.create_bot("bot-1", settings={"name": "Old"})
    b.write("bot.yaml", bot_yaml(settings=SETTINGS))
    return b


def key_file(bench: Bench) -> Path:
    return bench.workdir / "state.json.key"


def no_traceback(result: Any) -> None:
    assert "Traceback" not in result.output


def test_a_local_state_keeps_its_key_in_a_private_file_beside_it(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    assert bench.run("apply", "--auto-approve", cfg).exit_code == 0
    key = key_file(bench).read_text().strip()
    assert key.startswith("bsk1_")
    assert key_file(bench).stat().st_mode & 0o777 == 0o600
    state = json.loads(bench.state_path.read_text())
    assert key not in bench.state_path.read_text()
    fingerprints = FingerprintKey(state["salt"], key.encode())
    assert state["key_check"] == fingerprints.check
    assert state["bots"]["bot-1"]["settings"]["instructions"] == {
        "$sealed": fingerprints.fingerprint(f"Use token {SECRET} carefully")
    }
    bench.clear_log()
    assert bench.plan_json(cfg)["changes"] == []  # with the key: in sync, nothing re-sent
    shown = bench.run("state", "show", "--state", str(bench.state_path))
    assert "fingerprints: state key (key file " in shown.output


def test_a_missing_or_other_key_is_a_clear_error_never_every_secret_changed(
    bench: Bench,
) -> None:
    cfg = str(bench.config_dir)
    assert bench.run("apply", "--auto-approve", cfg).exit_code == 0
    key = key_file(bench).read_text().strip()
    key_file(bench).unlink()
    bench.clear_log()
    for command in ("plan", "drift", "apply"):
        missing = bench.run(command, cfg)
        assert missing.exit_code == 1, missing.output
        no_traceback(missing)
        assert "holds fingerprints made under a state key, and no key is set" in missing.stderr
        assert "set BOTCTL_STATE_KEY, or put the key file back at" in missing.stderr
    other = bench.run("plan", cfg, env={"BOTCTL_STATE_KEY": "bsk1_another"})
    assert other.exit_code == 1
    assert "$BOTCTL_STATE_KEY is not the state key the fingerprints of" in other.stderr
    assert "botctl state rekey" in other.stderr
    assert bench.writes() == []
    # The key from the environment works as the file did, and no file is made again.
    again = bench.run("plan", "--format", "json", cfg, env={"BOTCTL_STATE_KEY": key})
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["changes"] == []
    assert not key_file(bench).exists()


def test_a_shared_state_needs_the_key_before_anything_is_sent(bench: Bench) -> None:
    repo = bare_repository(bench.workdir / "bots.git")
    url = f"git+file://{repo}#botctl-state:state.json"
    cfg = str(bench.config_dir)
    for command in (("plan",), ("apply", "--auto-approve")):
        refused = bench.run(*command, "--state", url, cfg)
        assert refused.exit_code == 1, refused.output
        assert "BOTCTL_STATE_KEY is required" in refused.stderr
        assert "botctl state init-key" in refused.stderr
    assert bench.writes() == []
    key = bench.run("state", "init-key").stdout.strip()
    assert key.startswith("bsk1_")
    assert len(key) > 40
    applied = bench.run(
        "apply", "--auto-approve", "--state", url, cfg, env={"BOTCTL_STATE_KEY": key}
    )
    assert applied.exit_code == 0, applied.output
    history = subprocess.run(
        ["git", "--git-dir", str(repo), "log", "-p", "botctl-state"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert key not in history
    assert SECRET not in history
    assert '"key_check"' in history


def test_init_key_writes_a_key_file_only_beside_a_local_state(bench: Bench) -> None:
    state = str(bench.state_path)
    written = bench.run("state", "init-key", "--write", "--state", state)
    assert written.exit_code == 0, written.output
    assert key_file(bench).stat().st_mode & 0o777 == 0o600
    assert key_file(bench).read_text().strip() not in written.output
    again = bench.run("state", "init-key", "--write", "--state", state)
    assert again.exit_code == 1
    assert "exists already: not replaced" in again.stderr
    shared = bench.run("state", "init-key", "--write", "--state", "s3://bucket/state.json")
    assert shared.exit_code == 1
    assert "is shared" in shared.stderr


def legacy_state(bench: Bench, value: str) -> str:
    """A state of format 3: the fingerprint keyed with the salt stored beside it."""
    salt = "7e" * 32
    document = {
        "format_version": 3,
        "lineage": "L",
        "serial": 4,
        "salt": salt,
        "bots": {
            "bot-1": {
                "bot": "support",
                "settings": {
                    "name": "Support",
                    "instructions": {"$sealed": FingerprintKey(salt).fingerprint(value)},
                },
                "verified_settings": ["name"],
                "attributes": {},
                "verified_attributes": [],
            }
        },
    }
    bench.state_path.write_text(json.dumps(document))
    return salt


def test_an_old_format_state_is_read_with_a_warning_and_written_only_once_rekeyed(
    bench: Bench,
) -> None:
    cfg = str(bench.config_dir)
    assert bench.run("apply", "--auto-approve", cfg).exit_code == 0  # the service as declared
    salt = legacy_state(bench, f"Use token {SECRET} carefully")
    bench.clear_log()
    plan = bench.run("plan", "--format", "json", cfg)
    assert plan.exit_code == 0, plan.output
    assert json.loads(plan.stdout)["changes"] == []  # the old fingerprint still compares
    assert any("warning[BC305]" in w for w in json.loads(plan.stdout)["warnings"])
    text = bench.run("plan", cfg)
    assert "warning[BC305]" in text.output
    assert "botctl state rekey" in text.output
    silenced = bench.run("plan", "--disable-warning", "salt-only-state", cfg)
    assert "BC305" not in silenced.output
    # A state key is available (the key file): no fingerprint is written salt-only again.
    before = bench.state_path.read_text()
    refused = bench.run("apply", "--auto-approve", cfg)
    assert refused.exit_code == 1, refused.output
    assert "keyed with the salt stored in it (format 3)" in refused.stderr
    assert "`botctl state rekey --state" in refused.stderr
    assert bench.state_path.read_text() == before
    assert bench.writes() == []
    rekeyed = bench.run("state", "rekey", "--state", str(bench.state_path), cfg)
    assert rekeyed.exit_code == 0, rekeyed.output
    assert "1 fingerprint(s) now under key file" in rekeyed.stdout
    assert bench.writes() == []  # sends nothing
    state = json.loads(bench.state_path.read_text())
    key = FingerprintKey(salt, key_file(bench).read_text().strip().encode())
    assert (state["format_version"], state["key_check"]) == (4, key.check)
    sealed = state["bots"]["bot-1"]["settings"]["instructions"]["$sealed"]
    assert sealed == key.fingerprint(f"Use token {SECRET} carefully")
    after = bench.run("plan", "--format", "json", cfg)
    assert json.loads(after.stdout)["changes"] == []
    assert json.loads(after.stdout)["warnings"] == []


def test_rekey_moves_from_an_old_key_and_forgets_what_matches_nothing(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    old = {"BOTCTL_STATE_KEY": "bsk1_old-key-for-this-test"}
    assert bench.run("apply", "--auto-approve", cfg, env=old).exit_code == 0
    state = ["--state", str(bench.state_path)]
    new = {"BOTCTL_STATE_KEY": "bsk1_new-key-for-this-test"}
    lost = bench.run("state", "rekey", *state, cfg, env=new)
    assert lost.exit_code == 1
    assert "set BOTCTL_OLD_STATE_KEY to that key" in lost.stderr
    both = {**new, "BOTCTL_OLD_STATE_KEY": old["BOTCTL_STATE_KEY"]}
    moved = bench.run("state", "rekey", *state, cfg, env=both)
    assert moved.exit_code == 0, moved.output
    in_sync = bench.run("plan", "--format", "json", cfg, env=new)
    assert json.loads(in_sync.stdout)["changes"] == []
    assert bench.run("plan", cfg, env=old).exit_code == 1  # the old key is not it any more
    # The key lost: --forget drops the fingerprint; that value is sent again, not trusted.
    forgot = bench.run("state", "rekey", "--forget", *state, cfg, env=old)
    assert forgot.exit_code == 0, forgot.output
    assert "forgotten (sent again at the next apply): support (bot-1): settings instructions" in (
        forgot.stderr
    )
    record = json.loads(bench.state_path.read_text())["bots"]["bot-1"]
    assert "instructions" not in record["settings"]
    # No longer recorded: compared with what the service reads now (as declared: in sync).
    plan = bench.run("plan", "--format", "json", cfg, env=old)
    assert json.loads(plan.stdout)["changes"] == []


def test_the_project_file_keeps_a_new_state_encrypted(bench: Bench) -> None:
    """stateEncryption in botctl.yaml: every command of the repository asks for it, so the
    first apply creates the state encrypted, and a clear state is named as the mismatch."""
    project = bench.workdir / "botctl.yaml"
    project.write_text("apiVersion: botctl/v1\nkind: Project\nstateEncryption: passphrase\n")
    env = {"BOTCTL_STATE_KEY": "correct horse battery staple", "BOTCTL_CONFIG": str(project)}
    cfg = str(bench.config_dir)
    applied = bench.run("apply", "--auto-approve", cfg, env=env)
    assert applied.exit_code == 0, applied.output
    assert json.loads(bench.state_path.read_text())["kind"] == "botctl-encrypted"
    # A flag overrides the file, as everywhere: a new state kept clear.
    bench.state_path.unlink()
    clear = bench.run("apply", "--auto-approve", "--state-encryption", "none", cfg, env=env)
    assert clear.exit_code == 0, clear.output
    assert json.loads(bench.state_path.read_text())["format_version"] == 4
    refused = bench.run("plan", cfg, env=env)  # the file still asks for an encrypted state
    assert refused.exit_code == 1
    assert "botctl state migrate --state-encryption passphrase" in refused.stderr


def test_an_encrypted_state_and_its_saved_plans(bench: Bench) -> None:
    cfg = str(bench.config_dir)
    env = {"BOTCTL_STATE_KEY": "correct horse battery staple"}
    new = bench.run("apply", "--auto-approve", "--state-encryption", "passphrase", cfg, env=env)
    assert new.exit_code == 0, new.output
    stored = bench.state_path.read_text()
    assert json.loads(stored)["kind"] == "botctl-encrypted"
    assert "Support" not in stored
    assert "hmac" not in stored
    shown = bench.run("state", "show", "--state", str(bench.state_path), env=env)
    assert "chatbots: 1: support (bot-1)" in shown.output
    assert "encryption: passphrase" in shown.output
    # Following the state: a saved plan is encrypted too, and applies with the key.
    bench.write("bot.yaml", bot_yaml(settings=SETTINGS.replace("Support", "Support 2")))
    plan_file = bench.workdir / "plan.json"
    saved = bench.run("plan", "--out", str(plan_file), cfg, env=env)
    assert saved.exit_code == 0, saved.output
    assert json.loads(plan_file.read_text())["content"] == "plan"
    assert "Support 2" not in plan_file.read_text()
    bench.clear_log()
    keyless = bench.run("apply", "--plan", str(plan_file))
    assert keyless.exit_code == 1
    assert "encrypted and no state key is set" in keyless.stderr
    wrong = bench.run("apply", "--plan", str(plan_file), env={"BOTCTL_STATE_KEY": "nope"})
    assert wrong.exit_code == 1
    assert "is not the key" in wrong.stderr
    assert bench.writes() == []
    applied = bench.run("apply", "--plan", str(plan_file), env=env)
    assert applied.exit_code == 0, applied.output
    assert [w["body"].get("name") for w in bench.writes()] == ["Support 2"]
    assert json.loads(bench.state_path.read_text())["kind"] == "botctl-encrypted"
    # The option chooses for a new state only: the other setting names the command.
    other = bench.run("plan", "--state-encryption", "none", cfg, env=env)
    assert other.exit_code == 1
    assert "botctl state migrate --state-encryption none" in other.stderr
    decrypted = bench.run(
        "state", "migrate", "--state", str(bench.state_path), "--state-encryption", "none", env=env
    )
    assert decrypted.exit_code == 0, decrypted.output
    assert json.loads(bench.state_path.read_text())["format_version"] == 4
    assert SECRET not in bench.state_path.read_text()


def test_a_new_state_made_by_an_encrypted_saved_plan_is_encrypted(bench: Bench) -> None:
    env = {"BOTCTL_STATE_KEY": "correct horse battery staple"}
    plan_file = str(bench.workdir / "plan.json")
    cfg = str(bench.config_dir)
    saved = bench.run("plan", "--state-encryption", "passphrase", "--out", plan_file, cfg, env=env)
    assert saved.exit_code == 0, saved.output
    assert not bench.state_path.exists()
    applied = bench.run("apply", "--plan", plan_file, env=env)
    assert applied.exit_code == 0, applied.output
    assert json.loads(bench.state_path.read_text())["kind"] == "botctl-encrypted"
