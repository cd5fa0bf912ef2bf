"""Where the state key comes from (``store.keys``) and what a fingerprint key is made of
(``sealing.FingerprintKey``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from botctl.sealing import FingerprintKey
from botctl.store.backends import open_backend
from botctl.store.keys import (
    FOR_ENCRYPTION,
    FOR_SECRETS,
    StateKeyError,
    ensure_key,
    find_key,
    new_state_key,
    write_key_file,
)

SALT = "ab" * 32


def test_the_environment_first_then_the_key_file_of_a_local_state(tmp_path: Path) -> None:
    backend = open_backend(tmp_path / "state.json")
    assert find_key(backend, {}).key is None
    (tmp_path / "state.json.key").write_text("from-the-file\n")
    (tmp_path / "state.json.key").chmod(0o600)
    found = find_key(backend, {})
    assert (found.key, found.origin) == (b"from-the-file", f"key file {tmp_path}/state.json.key")
    from_env = find_key(backend, {"BOTCTL_STATE_KEY": "from-the-env"})
    assert (from_env.key, from_env.origin) == (b"from-the-env", "$BOTCTL_STATE_KEY")
    # Empty is unset (a CI secret that is not configured expands to nothing).
    assert find_key(backend, {"BOTCTL_STATE_KEY": ""}).key == b"from-the-file"


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620])
def test_a_key_file_others_can_read_or_write_is_refused_as_ssh_refuses_a_key(
    tmp_path: Path, mode: int
) -> None:
    backend = open_backend(tmp_path / "state.json")
    file = tmp_path / "state.json.key"
    file.write_text("bsk1_a-key-others-can-read\n")
    file.chmod(mode)
    with pytest.raises(StateKeyError) as refused:
        find_key(backend, {})
    assert f"mode {mode:04o}" in str(refused.value)
    assert f"chmod 600 {file}" in str(refused.value)
    assert "bsk1_a-key" not in str(refused.value)
    file.chmod(0o600)
    assert find_key(backend, {}).key == b"bsk1_a-key-others-can-read"


def test_a_symlinked_key_file_is_refused_and_never_written_through(tmp_path: Path) -> None:
    backend = open_backend(tmp_path / "state.json")
    target = tmp_path / "elsewhere"
    target.write_text("someone else's file\n")
    target.chmod(0o600)
    (tmp_path / "state.json.key").symlink_to(target)
    with pytest.raises(StateKeyError, match="is a symbolic link: refused"):
        find_key(backend, {})
    with pytest.raises(StateKeyError, match="exists already: not replaced"):
        write_key_file(tmp_path / "state.json.key", new_state_key())
    assert target.read_text() == "someone else's file\n"
    dangling = tmp_path / "other.json.key"
    dangling.symlink_to(tmp_path / "made-by-the-link")
    with pytest.raises(StateKeyError, match="exists already"):
        write_key_file(dangling, new_state_key())
    assert not (tmp_path / "made-by-the-link").exists()


def test_a_shared_state_has_no_key_file(tmp_path: Path) -> None:
    backend = open_backend(f"git+file://{tmp_path}/bots.git#b:state.json")
    found = find_key(backend, {})
    assert (found.key, found.file) == (None, None)
    with pytest.raises(StateKeyError, match="BOTCTL_STATE_KEY is required") as secrets:
        ensure_key(found, FOR_SECRETS)
    assert "the configuration uses ${secret:...}" in str(secrets.value)
    with pytest.raises(StateKeyError, match="BOTCTL_STATE_KEY is required") as encrypted:
        ensure_key(found, FOR_ENCRYPTION)  # why it is needed: not the secrets here
    assert "the state is kept encrypted, and the state is shared" in str(encrypted.value)


def test_a_key_file_is_made_once_private_and_never_replaced(tmp_path: Path) -> None:
    backend = open_backend(tmp_path / "deep" / "state.json")
    made = ensure_key(find_key(backend, {}), FOR_SECRETS)
    file = tmp_path / "deep" / "state.json.key"
    assert file.stat().st_mode & 0o777 == 0o600
    assert made.key == file.read_text().strip().encode()
    assert ensure_key(find_key(backend, {}), FOR_SECRETS).key == made.key  # found, not made
    with pytest.raises(StateKeyError, match="exists already: not replaced"):
        write_key_file(file, new_state_key())
    assert made.key == file.read_text().strip().encode()
    assert sorted(p.name for p in file.parent.iterdir()) == ["state.json.key"]  # no temp file
    file.write_text("  \n")
    file.chmod(0o600)
    with pytest.raises(StateKeyError, match="is empty"):
        find_key(backend, {})


def test_generated_keys_are_random_and_long() -> None:
    keys = {new_state_key() for _ in range(100)}
    assert len(keys) == 100
    assert all(k.startswith("bsk1_") and len(k) == 48 for k in keys)


def test_fingerprints_depend_on_the_state_key_not_only_on_the_salt() -> None:
    one, other = FingerprintKey(SALT, b"key one"), FingerprintKey(SALT, b"key two")
    legacy = FingerprintKey(SALT)
    assert one.fingerprint("x") == FingerprintKey(SALT, b"key one").fingerprint("x")
    assert len({one.fingerprint("x"), other.fingerprint("x"), legacy.fingerprint("x")}) == 3
    assert one.check != other.check
    assert legacy.check is None
    assert one.seal("x").matches("x", one)
    assert not one.seal("x").matches("x", other)
    assert "key one" not in repr(one)
