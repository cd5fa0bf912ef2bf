"""State survives a restart; seeds apply idempotently; the app also runs in-process."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from botctl.sandbox.app import create_app
from botctl.sandbox.config import SandboxConfig, SandboxConfigError
from botctl.sandbox.server import run_in_thread

AUTH = {"Authorization": "Bearer k"}
SEED = """
accounts:
  - {key: seeded, plan: hobby}
chatbots:
  - id: s1
    account: seeded
    settings: {name: Seeded, temp: 0.5}
    attributes: [{name: tier, type: text, label: Tier}]
"""


def test_state_survives_restart(tmp_path: Path) -> None:
    config = SandboxConfig(db=str(tmp_path / "nested" / "s.db"), api_keys={"k": "standard"})
    with run_in_thread(config) as first, httpx.Client(base_url=first.url, headers=AUTH) as c:
        c.post("/_sandbox/chatbots", json={"id": "b"})
        c.post("/api/v1/update-chatbot-settings", json={"chatbotId": "b", "name": "Kept"})
        c.post("/api/v1/chatbots/b/custom-attributes", json={"name": "a", "type": "date"})
        c.post("/api/v1/chatbots/b/contacts", json={"users": [{"external_id": "u"}]})
    with run_in_thread(config) as second, httpx.Client(base_url=second.url, headers=AUTH) as c:
        assert c.get("/api/v1/get-chatbots").json()["chatbots"][0]["name"] == "Kept"
        assert c.get("/api/v1/chatbots/b/custom-attributes").json()["data"][0]["name"] == "a"
        assert c.get("/api/v1/chatbots/b/contacts/u").status_code == 200


def test_seed_applies_once(tmp_path: Path) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(SEED, encoding="utf-8")
    config = SandboxConfig(db=str(tmp_path / "s.db"), seed=seed)
    headers = {"Authorization": "Bearer seeded"}
    with run_in_thread(config) as running, httpx.Client(base_url=running.url) as c:
        c.post(
            "/api/v1/update-chatbot-settings",
            json={"chatbotId": "s1", "name": "Changed"},
            headers=headers,
        )
    with run_in_thread(config) as running, httpx.Client(base_url=running.url) as c:
        (bot,) = c.get("/api/v1/get-chatbots", headers=headers).json()["chatbots"]
        assert bot["name"] == "Changed"  # the seed did not overwrite the existing chatbot


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("chatbots: [{id: x, settings: {temp: 3}}]", "temp"),
        ("accounts: [{key: a, plan: gold}]", "plan"),
        ("chatbots: [{id: x}]", "no account"),
        ("bots: []", "expected a mapping"),
        ("{unclosed", "not valid YAML"),
    ],
)
def test_bad_seed_is_a_config_error(tmp_path: Path, text: str, needle: str) -> None:
    seed = tmp_path / "seed.yaml"
    seed.write_text(text, encoding="utf-8")
    with pytest.raises(SandboxConfigError, match=needle):
        create_app(SandboxConfig(db=":memory:", seed=seed))


def test_missing_seed_file(tmp_path: Path) -> None:
    with pytest.raises(SandboxConfigError, match="cannot read"):
        create_app(SandboxConfig(db=":memory:", seed=tmp_path / "nope.yaml"))


def test_in_process_asgi_transport() -> None:
    app = create_app(SandboxConfig(db=":memory:", api_keys={"k": "hobby"}))

    async def scenario() -> list[int]:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://sandbox") as c:
            created = await c.post("/_sandbox/chatbots", json={"id": "b"})
            chat = await c.post(
                "/api/v1/chat",
                json={
                    "chatbotId": "b",
                    "messages": [{"role": "user", "content": "hi"}],
                    "stream": True,
                },
                headers=AUTH,
            )
            await c.post("/_sandbox/faults", json={"path": "/api/v1/get-chatbots", "drop": True})
            try:
                await c.get("/api/v1/get-chatbots", headers=AUTH)
            except httpx.RemoteProtocolError:
                return [created.status_code, chat.status_code, -1]
            return [created.status_code, chat.status_code, 0]

    assert asyncio.run(scenario()) == [201, 200, -1]
    assert asyncio.run(scenario())[0] == 409  # a second event loop uses the same app
