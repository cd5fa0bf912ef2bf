"""A state is never written weaker than it was while a state key is available (issue 24,
finding 5): whoever can write the state's storage but does not hold the key swaps an encrypted
state for one in clear (format 3, fingerprints keyed with the salt beside them, or format 4);
the next `apply` with BOTCTL_STATE_KEY refuses, names what changed, and writes nothing: not
the state, not the service. Through the real CLI against the sandbox."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from botctl.sealing import FingerprintKey, new_salt
from tests.e2e_support import Bench, bot_yaml

SECRET = "482913"  # six digits: salt-only fingerprints would give it away in a second
SETTINGS = "name: Support\ninstructions: 'PIN ${secret:SUPPORT_PIN}'"
KEY = {"BOTCTL_STATE_KEY": "correct horse battery staple"}


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.env = {"SUPPORT_PIN": SECRET, **KEY}
    b.create_bot("bot-1", settings={"name": "Old"})
    b.write("bot.yaml", bot_yaml(settings=SETTINGS))
    return b


def encrypted_state(bench: Bench) -> None:
    applied = bench.run(
        "apply", "--auto-approve", "--state-encryption", "passphrase", str(bench.config_dir)
    )
    assert applied.exit_code == 0, applied.output
    assert json.loads(bench.state_path.read_text())["kind"] == "botctl-encrypted"


def plaintext_state(format_version: int, *, fingerprint: bool) -> str:
    """What the attacker writes: a state in clear of a lineage of their own; with
    ``fingerprint``, the secret's place holds a salt-only fingerprint (format 3)."""
    salt = new_salt()
    settings: dict[str, Any] = {"name": "Support"}
    if fingerprint:
        settings["instructions"] = {"$sealed": FingerprintKey(salt).fingerprint("PIN 000000")}
    document: dict[str, Any] = {
        "format_version": format_version,
        "lineage": str(uuid.uuid4()),
        "serial": 9,
        "salt": salt,
        "bots": {"bot-1": {"bot": "support", "settings": settings, "verified_settings": []}},
    }
    if format_version == 4:
        document["key_check"] = None
    return json.dumps(document)


@pytest.mark.parametrize(
    ("format_version", "fingerprint"), [(3, True), (3, False), (4, False)], ids=str
)
def test_a_swapped_state_in_clear_is_refused_and_nothing_is_written(
    bench: Bench, format_version: int, fingerprint: bool
) -> None:
    encrypted_state(bench)
    swapped = plaintext_state(format_version, fingerprint=fingerprint)
    bench.state_path.write_text(swapped)
    bench.clear_log()

    refused = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert refused.exit_code == 1, refused.output
    error = refused.stderr
    assert f"refusing to write the state at {bench.state_path} weaker than it was" in error
    assert "it was kept encrypted at rest, and is now in clear (lineage " in error
    if fingerprint:
        assert "keyed with the salt stored in it (format 3)" in error
    assert "Nothing was written" in error
    assert "state migrate --state-encryption passphrase" in error
    assert SECRET not in refused.output
    assert bench.state_path.read_text() == swapped  # not rewritten, not "repaired"
    assert bench.requests() == []  # refused before the service was asked anything
    # A plan saved to a file would carry the state's fingerprints: refused too.
    saved = bench.run("plan", "--out", str(bench.workdir / "plan.json"), str(bench.config_dir))
    assert saved.exit_code == 1
    assert "weaker than it was" in saved.stderr
    assert not (bench.workdir / "plan.json").exists()


def test_a_state_in_clear_on_purpose_and_a_deleted_one(bench: Bench) -> None:
    encrypted_state(bench)
    state = ["--state", str(bench.state_path)]
    # Deleted (by whoever can write the storage): made again encrypted, not in clear.
    bench.state_path.unlink()
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    assert json.loads(bench.state_path.read_text())["kind"] == "botctl-encrypted"
    # In clear on purpose: `state migrate --state-encryption none`; then it stays so.
    clear = bench.run("state", "migrate", "--state-encryption", "none", *state)
    assert clear.exit_code == 0, clear.output
    assert json.loads(bench.state_path.read_text())["format_version"] == 4
    bench.write("bot.yaml", bot_yaml(settings=SETTINGS + "\ntemp: 0.4"))
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    assert json.loads(bench.state_path.read_text())["format_version"] == 4


def test_a_state_of_format_3_is_refused_while_a_key_is_set_and_works_without_one(
    bench: Bench,
) -> None:
    """No memory needed: with a state key set, botctl writes no salt-only fingerprint."""
    applied = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert applied.exit_code == 0, applied.output
    legacy = plaintext_state(3, fingerprint=True)
    bench.state_path.write_text(legacy)
    refused = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert refused.exit_code == 1
    assert "keyed with the salt stored in it (format 3)" in refused.stderr
    assert "`botctl state rekey --state" in refused.stderr
    assert "was kept encrypted" not in refused.stderr  # it never was
    assert bench.state_path.read_text() == legacy
    # Without a state key the old format keeps working as it is (with its warning BC305).
    no_key = {"BOTCTL_STATE_KEY": ""}
    kept = bench.run("apply", "--auto-approve", str(bench.config_dir), env=no_key)
    assert kept.exit_code == 0, kept.output
    assert "warning[BC305]" in kept.output
    assert json.loads(bench.state_path.read_text())["format_version"] == 3


def test_a_state_in_clear_pushed_where_an_encrypted_one_was_is_refused(bench: Bench) -> None:
    encrypted_state(bench)
    before = bench.state_path.read_text()
    upload = bench.workdir / "upload.json"
    upload.write_text(plaintext_state(4, fingerprint=False))
    pushed = bench.run("state", "push", "--force", "--state", str(bench.state_path), str(upload))
    assert pushed.exit_code == 1, pushed.output
    assert "it was kept encrypted at rest, and is now in clear" in pushed.stderr
    assert bench.state_path.read_text() == before
