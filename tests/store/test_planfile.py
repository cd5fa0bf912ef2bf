"""Plan files: round trip, checksum, format version; summaries and ordering."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from botctl.errors import PlanError, StalePlanError
from botctl.plan import Plan
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.freshness import resolve_secrets
from botctl.sealing import FingerprintKey, Secret
from botctl.store.planfile import (
    _checksum,
    plan_file_document,
    plan_from_document,
    read_plan_file,
    write_plan_file,
)
from tests.factories import bot, desired, live, live_bot, state
from tests.test_render import sample_plan


def test_plan_file_roundtrip_is_exact() -> None:
    plan = sample_plan()
    data = json.loads(json.dumps(plan_file_document(plan)))
    again = plan_from_document(data)
    assert again.plan == plan
    assert again.salt == data["salt"]  # made without a state that keeps a salt: its own


SECRETS = (Secret("s3cr3t-t0ken", "PROMPT_TOKEN"), Secret("fallback-pw", "OPT", defaulted=True))
SALT = "cd" * 32
STATE_KEY = b"a state key for tests"


def secret_plan(state_salt: str | None = None) -> Plan:
    spec = bot(
        settings={
            "instructions": "Use s3cr3t-t0ken carefully",
            "initialMessages": ["Hi", "pw: fallback-pw"],
        },
        attributes=[{"name": "tier", "type": "text", "label": "Tier s3cr3t-t0ken"}],
        secrets=SECRETS,
    )
    observed = live_bot(
        settings={"instructions": "Use 0ld-t0ken carefully"},  # a secret rotated since
        attributes=[{"name": "tier", "type": "text", "label": "Tier s3cr3t-t0ken"}],
    )
    st = state(settings={"initialMessages": ["Hi", "pw: 0ld-pw"]})  # recorded by botctl 2
    st.salt = state_salt
    st.state_key = STATE_KEY
    return compute_plan(desired(spec), live(observed), st)


def test_a_plan_file_never_holds_a_secret_and_applies_them_again(tmp_path: Path) -> None:
    plan = secret_plan()
    path = tmp_path / "plan.json"
    write_plan_file(plan, path)
    text = path.read_text()
    for secret in ("s3cr3t-t0ken", "fallback-pw", "0ld-t0ken", "0ld-pw"):
        assert secret not in text
    data = json.loads(text)
    ops = {op["subject"]: op for op in data["operations"]}
    instructions = ops["settings"]["body"]["instructions"]["$secret"]
    assert instructions[0] == "Use "
    assert instructions[1]["variable"] == "PROMPT_TOKEN"
    assert instructions[1]["fingerprint"].startswith("hmac-sha256:")
    assert instructions[2] == " carefully"
    assert ops["settings"]["body"]["initialMessages"][1]["$secret"][1] == {
        "variable": "OPT",
        "fingerprint": FingerprintKey(data["salt"], STATE_KEY).fingerprint("fallback-pw"),
        "default": True,
    }
    # A value read from the service where the configuration holds a secret: its fingerprint.
    relied = {(d["resource"], d["path"], d["source"]): d["value"] for d in data["depends_on"]}
    assert relied[("settings", "instructions", "service")] == {
        "$sealed": FingerprintKey(data["salt"], STATE_KEY).fingerprint("Use 0ld-t0ken carefully")
    }
    # A value taken from the state where the configuration holds a secret: likewise.
    assert relied[("settings", "initialMessages", "state")] == {
        "$sealed": FingerprintKey(data["salt"], STATE_KEY).fingerprint(["Hi", "pw: 0ld-pw"])
    }
    saved = read_plan_file(path)
    environ = {"PROMPT_TOKEN": "s3cr3t-t0ken", "OPT": "fallback-pw"}
    assert saved.salt is not None
    assert saved.key_check == FingerprintKey(saved.salt, STATE_KEY).check
    again = resolve_secrets(saved.plan, environ, FingerprintKey(saved.salt, STATE_KEY))
    assert again.operations == plan.operations
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_plan_of_a_state_with_a_salt_uses_it_and_never_writes_it() -> None:
    data = plan_file_document(secret_plan(state_salt=SALT))
    assert data["salt"] is None
    assert SALT not in json.dumps(data)
    saved = plan_from_document(json.loads(json.dumps(data)))
    assert saved.salt is None
    with pytest.raises(StalePlanError, match=r"\$PROMPT_TOKEN"):
        resolve_secrets(
            saved.plan, {"PROMPT_TOKEN": "s3cr3t-t0ken", "OPT": "x"}, FingerprintKey("ef" * 32)
        )


@pytest.mark.parametrize(
    "piece",
    [
        {"variable": "1BAD", "fingerprint": "hmac-sha256:" + "0" * 64},
        {"variable": "X", "fingerprint": "sha1:00"},
        {"variable": "X", "fingerprint": "hmac-sha256:" + "0" * 64, "value": "leak"},
        7,
    ],
)
def test_a_malformed_secret_in_a_request_is_refused(piece: Any) -> None:
    data = json.loads(json.dumps(plan_file_document(secret_plan())))
    data["operations"][0]["body"]["instructions"] = {"$secret": ["a", piece]}
    data["checksum"] = _checksum({k: v for k, v in data.items() if k != "checksum"})
    with pytest.raises(PlanError, match=r"malformed: operations\.0\.body\.instructions"):
        plan_from_document(data)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format_version=0), "format_version 0"),
        (lambda d: d["operations"][0]["body"].update(name="evil"), "checksum"),
        (lambda d: d.update(kind="other"), "not a botctl plan"),
    ],
)
def test_plan_file_refused(mutate: Any, message: str) -> None:
    data = json.loads(json.dumps(plan_file_document(sample_plan())))
    mutate(data)
    with pytest.raises(PlanError, match=message):
        plan_from_document(data)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["operations"][0].update(kind="delete_bot"), "operations.0.kind: Input"),
        (lambda d: d["operations"][1]["bot"].pop("api_key_env"), "operations.1.bot.api_key_env"),
        (lambda d: d.update(state={"serial": "3", "lineage": None}), "state.serial"),
        (lambda d: d.pop("depends_on"), "depends_on: Field required"),
    ],
)
def test_a_malformed_plan_file_names_the_place(mutate: Any, message: str) -> None:
    """Even with a matching checksum (a tool wrote it), the content is checked field by field."""
    data = json.loads(json.dumps(plan_file_document(sample_plan())))
    mutate(data)
    data["checksum"] = _checksum({k: v for k, v in data.items() if k != "checksum"})
    with pytest.raises(PlanError, match=f"plan file is malformed: {message}"):
        plan_from_document(data)


def test_reading_a_plan_file_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(PlanError, match="not UTF-8"):
        read_plan_file(path)
    path.write_text("{")
    with pytest.raises(PlanError, match="is not JSON"):
        read_plan_file(path)
    with pytest.raises(PlanError, match="cannot read plan file"):
        read_plan_file(tmp_path / "missing.json")


def test_written_plan_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "plan.json"
    write_plan_file(sample_plan(), path)
    assert read_plan_file(path).plan == sample_plan()


def test_summary_counts_actions() -> None:
    summary = sample_plan().summary()
    assert summary == {
        "create": 1,
        "update": 6,
        "archive": 1,
        "unarchive": 0,
        "reassert": 0,
        "rename": 0,
        "unmanaged": 1,
        "unmanageable": 1,
        "unverified": 3,
        "missing": 0,
        "operations": 4,
    }


def test_a_plan_file_of_format_3_is_still_read_with_the_salt_alone() -> None:
    """Plans saved before the state key (format 3): their fingerprints are keyed with the
    salt alone, and still check the secrets they were made with."""
    plan = secret_plan()
    key = FingerprintKey(SALT)
    data = plan_file_document(replace(plan, fingerprints=key))
    del data["key_check"]
    data.update(format_version=3, salt=SALT)
    data["checksum"] = _checksum({k: v for k, v in data.items() if k != "checksum"})
    saved = plan_from_document(json.loads(json.dumps(data)))
    assert (saved.salt, saved.key_check) == (SALT, None)
    environ = {"PROMPT_TOKEN": "s3cr3t-t0ken", "OPT": "fallback-pw"}
    assert resolve_secrets(saved.plan, environ, key).operations == plan.operations
