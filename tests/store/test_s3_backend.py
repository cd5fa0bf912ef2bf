"""The s3 backend: boto3 loaded only for s3:// states, a clear message without it, and the
conditional requests it relies on, checked against moto's server (a real process)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from botctl.errors import StateError
from botctl.store.backends import open_backend
from tests.store.conftest import StateUnderTest


def probe(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)


def test_boto3_is_imported_only_for_an_s3_state(tmp_path: object) -> None:
    code = (
        "import sys, json\n"
        "from botctl.store.state import load_state\n"
        f"load_state({str(tmp_path)!r} + '/state.json')\n"
        "from botctl.store.backends import open_backend\n"
        "open_backend('git+file:///nowhere.git#b:s.json')\n"
        "print(json.dumps('boto3' in sys.modules or 'botocore' in sys.modules))\n"
    )
    done = probe(code)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) is False


def test_without_boto3_an_s3_state_says_how_to_get_it() -> None:
    code = (
        "import sys\n"
        "sys.modules['boto3'] = None\n"  # as if not installed
        "from botctl.store.backends import open_backend\n"
        "open_backend('s3://bucket/state.json')\n"
    )
    done = probe(code)
    assert done.returncode == 1
    assert "needs boto3" in done.stderr
    assert "botctl[s3]" in done.stderr


@pytest.mark.parametrize("url", ["s3://", "s3://bucket", "s3://bucket/", "s3:///key"])
def test_malformed_s3_urls_are_refused(url: str) -> None:
    with pytest.raises(StateError, match="expected s3://<bucket>/<key>"):
        open_backend(url)


def test_a_missing_bucket_is_a_clear_error(s3_state: StateUnderTest) -> None:
    with pytest.raises(StateError, match="NoSuchBucket"):
        open_backend("s3://botctl-no-such-bucket/state.json").read()


def test_the_lock_object_is_created_only_once(s3_state: StateUnderTest) -> None:
    """If-None-Match: * on the lock object: the server refuses a second creator."""
    from botctl.store.backend import LockInfo

    first = LockInfo.for_this_process("botctl apply")
    second = LockInfo.for_this_process("botctl apply")
    with open_backend(s3_state.url) as backend:
        assert backend.create_lock(first)
        assert not backend.create_lock(second)
        assert backend.read_lock() == first
        assert backend.remove_lock(second, "not mine") is None  # another's lock stays
        assert backend.remove_lock(first, "mine") == first
        assert backend.read_lock() is None


def test_a_store_that_never_answers_fails_the_read_within_its_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An S3 endpoint that accepts connections and never answers: the read fails after a
    bounded number of attempts, each under ``BOTCTL_S3_TIMEOUT``, saying what it could not
    do (boto3's defaults would wait 60 s an attempt, five times)."""
    import socket
    import threading

    from botctl.defaults import S3_ATTEMPTS

    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                held.append(listener.accept()[0])  # kept open, never answered
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.getsockname()[1]}"
    for name, value in {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ACCESS_KEY_ID": "botctl-test",
        "AWS_SECRET_ACCESS_KEY": "botctl-test-secret",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": "/dev/null",
        "AWS_SHARED_CREDENTIALS_FILE": "/dev/null",
        "AWS_EC2_METADATA_DISABLED": "true",
        "BOTCTL_S3_TIMEOUT": "0.3",
    }.items():
        monkeypatch.setenv(name, value)
    outcome: list[BaseException | None] = []

    def read() -> None:
        try:
            open_backend("s3://bucket/botctl/state.json").read()
            outcome.append(None)
        except BaseException as exc:  # the test judges it
            outcome.append(exc)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(timeout=60)
    try:
        assert not reader.is_alive(), "the read still waits on a store that never answers"
        [error] = outcome
        assert isinstance(error, StateError)
        assert "state s3://bucket/botctl/state.json: cannot read" in str(error)
        assert 1 <= len(held) <= S3_ATTEMPTS
    finally:
        listener.close()
        for connection in held:
            connection.close()
