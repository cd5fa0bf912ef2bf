"""Clients and a ready chatbot for the sandbox tests (all over real HTTP on loopback).

Speed: one server per session, reset before each test (POST /_sandbox/reset), instead of a
server per test; tests that need another configuration start their own via sandbox_factory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.server import RunningSandbox, run_in_thread

KEY = "test-key"
BOT = "bot-1"


@pytest.fixture(scope="session")
def shared_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningSandbox]:
    db = tmp_path_factory.mktemp("shared") / "sandbox.db"
    with run_in_thread(SandboxConfig(db=str(db), api_keys={KEY: "standard"})) as running:
        yield running


@pytest.fixture(scope="session")
def shared_admin(shared_sandbox: RunningSandbox) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=shared_sandbox.url, timeout=5) as client:
        yield client


@pytest.fixture(scope="session")
def shared_api(shared_sandbox: RunningSandbox) -> Iterator[httpx.Client]:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=shared_sandbox.api_url, headers=headers, timeout=5) as client:
        yield client


@pytest.fixture
def sandbox(shared_sandbox: RunningSandbox, shared_admin: httpx.Client) -> RunningSandbox:
    """Overrides the top-level fixture here: the shared server, freshly reset."""
    assert shared_admin.post("/_sandbox/reset").status_code == 200
    return shared_sandbox


@pytest.fixture
def admin(sandbox: RunningSandbox, shared_admin: httpx.Client) -> httpx.Client:
    """Client of the whole server, for /_sandbox calls."""
    return shared_admin


@pytest.fixture
def api(sandbox: RunningSandbox, shared_api: httpx.Client) -> httpx.Client:
    """Client of /api/v1 authenticated as test-key."""
    return shared_api


@pytest.fixture
def sandbox_url(sandbox: RunningSandbox) -> str:
    return sandbox.url


@pytest.fixture
def bot(admin: httpx.Client) -> str:
    """A chatbot of test-key with a name and two attributes (one archived) and an icon."""
    spec = {
        "id": BOT,
        "settings": {"name": "Support", "model": "gpt-4o-mini", "visibility": "public"},
        "attributes": [
            {"name": "plan", "type": "text", "label": "Plan"},
            {"name": "legacy", "type": "number", "archived": True},
        ],
        "icon": True,
    }
    response = admin.post("/_sandbox/chatbots", json=spec)
    assert response.status_code == 201, response.text
    return BOT


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path
