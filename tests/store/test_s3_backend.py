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
