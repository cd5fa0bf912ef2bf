"""The embedded sandbox: the service emulator of ``botctl.sandbox`` served in-process through
httpx's ASGI transport (``--sandbox``, ``botctl demo``), and its admin API for simulating the
world ("dashboard" edits, accounts, chatbots). The sandbox package is imported only here, and
only when used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from botctl.errors import BotctlError
from botctl.plan import BotRef
from botctl.values import JsonValue

SANDBOX_BASE = "http://sandbox.botctl"


def sandbox_key(env_name: str) -> str:
    """The key of the variable ``env_name`` when targeting the embedded sandbox (whatever the
    variable holds: a real key must never be stored in the sandbox's database)."""
    return f"sandbox-{env_name.lower()}"


def _sandbox_app(db: str, extra_models: tuple[str, ...] = ()) -> Any:
    from botctl.sandbox.app import create_app
    from botctl.sandbox.config import SandboxConfig

    if db != ":memory:":
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    return create_app(SandboxConfig(db=db, extra_models=extra_models))


async def sandbox_admin(db: str, calls: Iterable[AdminCall]) -> None:
    """Drive the sandbox's admin API (accounts, chatbots, "dashboard" edits) in-process."""
    await _run_admin(httpx.ASGITransport(app=_sandbox_app(db)), calls)


async def _run_admin(transport: httpx.AsyncBaseTransport, calls: Iterable[AdminCall]) -> None:
    async with httpx.AsyncClient(transport=transport, base_url=SANDBOX_BASE) as admin:
        for call in calls:
            response = await admin.request(call.method, call.path, json=call.body)
            if response.status_code not in call.ok:
                raise BotctlError(
                    f"sandbox {call.method} {call.path} failed: HTTP {response.status_code}"
                )


@dataclass(frozen=True)
class AdminCall:
    method: str
    path: str
    body: dict[str, JsonValue]
    ok: tuple[int, ...] = (200, 201)


async def sandbox_transport(
    refs: list[BotRef], keys: dict[str, str], db: str, extra_models: tuple[str, ...] = ()
) -> httpx.AsyncBaseTransport:
    """The embedded sandbox, in-process. Its accounts are the keys in use; chatbots named in
    the configuration are created there on first use; ``extra_models`` are accepted beside the
    contract's."""
    transport = httpx.ASGITransport(app=_sandbox_app(db, extra_models))
    await _run_admin(transport, bootstrap_calls(refs, keys))
    return transport


def bootstrap_calls(refs: Iterable[BotRef], keys: Mapping[str, str]) -> list[AdminCall]:
    """Register the keys as sandbox accounts; create the chatbots that do not exist yet."""
    calls = [
        AdminCall("POST", "/_sandbox/accounts", {"key": key, "plan": "standard"})
        for key in sorted(set(keys.values()))
    ]
    calls += [
        AdminCall(
            "POST",
            "/_sandbox/chatbots",
            {"id": ref.chatbot_id, "account": keys[ref.api_key_env], "settings": {}},
            ok=(201, 409),
        )
        for ref in refs
        if ref.chatbot_id  # export connects with no chatbot in mind
    ]
    return calls
