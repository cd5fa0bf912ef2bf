"""State encrypted at rest (``--state-encryption passphrase``) through every backend: the
stored document says nothing of its content, a wrong key or an altered byte is refused (never
parsed), ``state migrate`` encrypts and decrypts, and ``state show`` reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.models import State
from botctl.plan import BotRef
from botctl.store.backends import open_backend
from botctl.store.crypt import DecryptError
from botctl.store.state import load_state, read_state, save_state
from botctl.store.transfer import migrate_state, summarize
from tests.factories import operation
from tests.store.conftest import MotoServer, StateUnderTest, make_state

SECRET = "s3cr3t-t0ken"
PASSPHRASE = "correct horse battery staple"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("BOTCTL_STATE_KEY", PASSPHRASE)
    return PASSPHRASE


def secret_state(encrypted: bool = True) -> State:
    st = State(encrypted=encrypted)
    st.protect({SECRET}, {})
    ref = BotRef("support-bot", "bot-1", "BOTCTL_API_KEY")
    body = {"name": "Support Desk", "instructions": f"use {SECRET}", "temp": 0.2}
    st.apply_operation(operation("update_settings", "settings", body, ref=ref))
    return st


def stored(url: str) -> str:
    with open_backend(url) as backend:
        text = backend.read().text
    assert text is not None
    return text


def rewrite(url: str, text: str) -> None:
    with open_backend(url) as backend:
        backend.write(text, backend.read().version, "tampered")


def test_an_encrypted_state_round_trips(state: StateUnderTest, key: str) -> None:
    save_state(secret_state(), state.url)
    text = stored(state.url)
    envelope = json.loads(text)
    assert envelope["kind"] == "botctl-encrypted"
    assert envelope["cipher"] == "AES-256-GCM"
    assert envelope["kdf"]["name"] == "scrypt"
    # Nothing of the content shows: no name, no lineage, no fingerprint, no key.
    for clue in (SECRET, "Support Desk", "support-bot", "bot-1", "hmac-sha256", PASSPHRASE):
        assert clue not in text
    loaded = load_state(state.url)
    assert loaded.encrypted
    assert loaded.lineage is not None
    assert loaded.bots["bot-1"].settings.json_fields == {"name": "Support Desk", "temp": 0.2}
    assert set(loaded.bots["bot-1"].sealed_settings) == {"instructions"}
    assert loaded.lineage not in text
    # Written again (another run), it stays encrypted, under a new nonce.
    save_state(loaded, state.url)
    again = stored(state.url)
    assert json.loads(again)["kind"] == "botctl-encrypted"
    assert json.loads(again)["nonce"] != envelope["nonce"]
    assert load_state(state.url).serial == 2
    summary = summarize(state.url)
    assert (summary.encryption, summary.serial) == ("passphrase", 2)
    assert summary.chatbots == {"bot-1": "support-bot"}


def test_a_wrong_or_missing_key_says_so_and_changes_nothing(
    state: StateUnderTest, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    save_state(secret_state(), state.url)
    before = stored(state.url)
    monkeypatch.setenv("BOTCTL_STATE_KEY", "Tr0ub4dor&3")
    with pytest.raises(DecryptError, match=r"not the key .* was encrypted with; nothing"):
        load_state(state.url)
    monkeypatch.delenv("BOTCTL_STATE_KEY")
    with pytest.raises(DecryptError, match="encrypted and no state key is set: set BOTCTL_STATE"):
        load_state(state.url)
    assert stored(state.url) == before


def flip(text: str, index: int) -> str:
    swapped = "B" if text[index] != "B" else "C"
    return text[:index] + swapped + text[index + 1 :]


UNREADABLE = (
    "{where} is an encrypted botctl state that cannot be read ({why}): it was altered or "
    "truncated; nothing was changed. Restore it from a backup"
)


@pytest.mark.parametrize(
    ("where", "error"),
    [
        ("ciphertext", UNREADABLE.replace("{why}", "authentication failed")),
        ("nonce", UNREADABLE.replace("{why}", "authentication failed")),
        ("truncated", UNREADABLE.replace("{why}", "not complete JSON")),
        ("dropped", UNREADABLE.replace("{why}", "malformed envelope")),
        ("content", "{where} is an encrypted 'statE', not a state"),
        (
            "kdf",
            UNREADABLE.replace(
                "{why}", "its key derivation parameters n=16384, r=8, p=1 are not botctl's"
            ),
        ),
    ],
)
def test_an_altered_encrypted_state_is_refused(
    state: StateUnderTest, key: str, where: str, error: str
) -> None:
    """Each alteration is refused with the error README promises for it, never parsed."""
    save_state(secret_state(), state.url)
    text = stored(state.url)
    data = json.loads(text)
    if where == "ciphertext":
        at = text.index(data["ciphertext"]) + len(data["ciphertext"]) // 2
        altered = flip(text, at)
    elif where == "nonce":
        altered = flip(text, text.index(data["nonce"]) + 2)
    elif where == "content":  # what the envelope says it holds
        altered = text.replace('"content": "state"', '"content": "statE"')
    elif where == "truncated":
        altered = text[: len(text) // 2]
    elif where == "kdf":  # a cheaper derivation, as an attacker would make it
        altered = json.dumps({**data, "kdf": {**data["kdf"], "n": 2**14}})
    else:
        altered = json.dumps({k: v for k, v in data.items() if k != "nonce"})
    rewrite(state.url, altered)
    with pytest.raises(DecryptError) as failure:
        load_state(state.url)
    with open_backend(state.url) as backend:
        assert str(failure.value) == error.format(where=backend.where)
    assert stored(state.url) == altered  # refused, not repaired or replaced


def test_migrate_encrypts_and_decrypts_in_place_and_across_backends(
    tmp_path: Path, moto_server: MotoServer, key: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    clear = make_state("path", tmp_path, None)
    save_state(secret_state(encrypted=False), clear.url)
    plain = stored(clear.url)
    assert json.loads(plain)["format_version"] == 4
    done = migrate_state(clear.url, None, force=False, lock_timeout=0, encryption="passphrase")
    assert done.written
    assert json.loads(stored(clear.url))["kind"] == "botctl-encrypted"
    assert load_state(clear.url).serial == 1  # the same state: plans saved against it hold
    again = migrate_state(clear.url, None, force=False, lock_timeout=0, encryption="passphrase")
    assert not again.written
    # To git, then S3, still encrypted; then decrypted in S3.
    git = make_state("git", tmp_path, None)
    migrate_state(clear.url, git.url, force=False, lock_timeout=0)
    assert json.loads(stored(git.url))["kind"] == "botctl-encrypted"
    s3 = make_state("s3", tmp_path, moto_server)
    for name, value in s3.env.items():
        monkeypatch.setenv(name, value)
    migrate_state(git.url, s3.url, force=False, lock_timeout=0)
    assert json.loads(stored(s3.url))["kind"] == "botctl-encrypted"
    migrate_state(s3.url, None, force=False, lock_timeout=0, encryption="none")
    text = stored(s3.url)
    assert json.loads(text)["format_version"] == 4
    assert SECRET not in text
    assert read_state(s3.url).state.bots == load_state(clear.url).bots
