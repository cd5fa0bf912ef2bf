"""Fixtures for the state backends: a bare git repository on disk, a real S3-compatible
server (moto's standalone server, a separate process on 127.0.0.1), and ``state``: one
``--state`` value per backend, for the suite every backend must pass."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

BACKENDS = ["path", "git", "s3"]


@dataclass(frozen=True)
class MotoServer:
    endpoint: str
    log: Path

    @property
    def env(self) -> dict[str, str]:
        """What boto3 needs to reach this server and nothing else."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "botctl-test",
            "AWS_SECRET_ACCESS_KEY": "botctl-test-secret",
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true",
        }


@pytest.fixture(scope="session")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    """moto's S3 server as a real process on an ephemeral loopback port."""
    log = tmp_path_factory.mktemp("moto") / "server.log"
    with log.open("w") as sink:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", "0"],
            stdout=sink,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        endpoint = None
        deadline = time.monotonic() + 60
        while endpoint is None:
            found = re.search(r"Running on (http://127\.0\.0\.1:\d+)", log.read_text())
            if found:
                endpoint = found.group(1)
            elif proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"moto server did not start:\n{log.read_text()}")
            else:
                time.sleep(0.05)
        yield MotoServer(endpoint, log)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@dataclass
class StateUnderTest:
    """One backend's ``--state`` value and the environment it needs."""

    kind: str
    url: str
    env: dict[str, str] = field(default_factory=dict)
    path: Path | None = None  # the state file (path backend)
    repo: Path | None = None  # the bare repository (git backend)


def bare_repository(where: Path) -> Path:
    subprocess.run(["git", "init", "--quiet", "--bare", str(where)], check=True)
    return where


def make_state(
    kind: str, tmp_path: Path, moto: MotoServer | None, name: str = "state"
) -> StateUnderTest:
    if kind == "path":
        path = tmp_path / "states" / f"{name}.json"
        return StateUnderTest(kind, str(path), path=path)
    if kind == "git":
        repo = tmp_path / f"{name}.git"
        if not repo.exists():
            bare_repository(repo)
        return StateUnderTest(kind, f"git+file://{repo}#botctl-state:bots/{name}.json", repo=repo)
    assert moto is not None
    import boto3

    bucket = f"botctl-{uuid.uuid4().hex[:12]}"
    client = boto3.client(
        "s3",
        endpoint_url=moto.endpoint,
        region_name="us-east-1",
        aws_access_key_id="botctl-test",
        aws_secret_access_key="botctl-test-secret",
    )
    client.create_bucket(Bucket=bucket)
    return StateUnderTest(kind, f"s3://{bucket}/botctl/{name}.json", env=moto.env)


@pytest.fixture(params=BACKENDS)
def state(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> StateUnderTest:
    """A fresh, empty state of each backend; its environment is set for in-process use."""
    moto = request.getfixturevalue("moto_server") if request.param == "s3" else None
    made = make_state(request.param, tmp_path, moto)
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made


@pytest.fixture
def s3_state(
    moto_server: MotoServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> StateUnderTest:
    """A fresh s3:// state in a bucket of its own."""
    made = make_state("s3", tmp_path, moto_server)
    for key, value in made.env.items():
        monkeypatch.setenv(key, value)
    return made
