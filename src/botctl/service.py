"""Connects a run to a service: the real one at ``--api-url``, or the embedded sandbox
in-process (``--sandbox``, ``botctl demo``). Builds one ``ServiceClient`` per API key, keyed by
the environment variable that holds it (a document's ``apiKeyEnv``).

Keys come only from the environment, never from the command line, and are never printed: a
missing key is reported by its variable's name.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx

from botctl.client import RetryPolicy, ServiceClient
from botctl.contract import API_PREFIX
from botctl.errors import BotctlError
from botctl.models import BotSpec, JsonValue
from botctl.pacing import RequestStats
from botctl.plan import BotRef

SANDBOX_DB = Path(".botctl/sandbox.db")
SANDBOX_BASE = "http://sandbox.botctl"


@dataclass(frozen=True)
class ServiceOptions:
    api_url: str | None = None
    sandbox: bool = False
    sandbox_db: str = str(SANDBOX_DB)
    rate_limit: float = 0.0
    timeout: float = 30.0
    max_attempts: int = 5
    retry_base_delay: float = 0.5
    retry_max_delay: float = 30.0
    trace: Callable[[str], None] | None = None
    # When given, every client's request counts are added here as it closes (benchmarks).
    stats: RequestStats | None = None


def sandbox_key(env_name: str) -> str:
    """The stand-in key used for an unset variable when targeting the sandbox."""
    return f"sandbox-{env_name.lower()}"


def resolve_keys(
    refs: Iterable[BotRef | BotSpec], environ: Mapping[str, str], *, sandbox: bool
) -> dict[str, str]:
    """env var name -> key; every missing variable is reported at once, by name."""
    needed: dict[str, list[str]] = {}
    for ref in refs:
        needed.setdefault(ref.api_key_env, []).append(ref.name)
    keys: dict[str, str] = {}
    missing = []
    for env_name, bots in sorted(needed.items()):
        value = environ.get(env_name, "").strip()
        if value:
            keys[env_name] = value
        elif sandbox:
            keys[env_name] = sandbox_key(env_name)
        else:
            missing.append(f"${env_name} (for {', '.join(sorted(bots))})")
    if missing:
        raise BotctlError(
            "no API key in the environment: set " + ", ".join(missing) + ". Keys are read "
            "only from the environment, never from the command line."
        )
    return keys


def check_api_url(url: str) -> str:
    """The service's base address is an http(s) URL ending in /api/v1 (contract section 9).
    Refusing anything else up front matters: a base without /api/v1 would answer every read
    with 404, which botctl would otherwise take for a deployment without reads."""
    parsed = urlsplit(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BotctlError(f"--api-url must be an http:// or https:// URL, got {url!r}")
    if not parsed.path.rstrip("/").endswith(API_PREFIX):
        raise BotctlError(
            f"--api-url must be the service's base address ending in {API_PREFIX} "
            f"(e.g. https://{parsed.netloc}{API_PREFIX}), got {url!r}"
        )
    return url.strip()


@contextlib.asynccontextmanager
async def connect(
    refs: list[BotRef], environ: Mapping[str, str], options: ServiceOptions
) -> AsyncIterator[dict[str, ServiceClient]]:
    """Yield clients by key variable for the chatbots in ``refs``."""
    keys = resolve_keys(refs, environ, sandbox=options.sandbox)
    if options.sandbox:
        transport: httpx.AsyncBaseTransport | None = await _sandbox_transport(refs, keys, options)
        base_url = f"{SANDBOX_BASE}/api/v1"
    else:
        if not options.api_url:
            raise BotctlError(
                "no service address: pass --api-url URL (or set BOTCTL_API_URL), e.g. "
                "https://<host>/api/v1; or --sandbox to use the embedded sandbox"
            )
        transport, base_url = None, check_api_url(options.api_url)
    clients = {
        env_name: ServiceClient(
            base_url,
            key,
            transport=transport,
            timeout=options.timeout,
            retry=RetryPolicy(
                max_attempts=options.max_attempts,
                base_delay=options.retry_base_delay,
                max_delay=options.retry_max_delay,
            ),
            rate_limit=options.rate_limit,
            trace=options.trace,
            key_name=env_name,
        )
        for env_name, key in keys.items()
    }
    try:
        yield clients
    finally:
        for client in clients.values():
            await client.aclose()
            if options.stats is not None:
                options.stats.add(client.stats)


def _sandbox_app(db: str) -> Any:
    from botctl.sandbox.app import create_app
    from botctl.sandbox.config import SandboxConfig

    if db != ":memory:":
        Path(db).parent.mkdir(parents=True, exist_ok=True)
    return create_app(SandboxConfig(db=db))


async def sandbox_admin(db: str, calls: Iterable[AdminCall]) -> None:
    """Drive the sandbox's admin API (accounts, chatbots, "dashboard" edits) in-process."""
    transport = httpx.ASGITransport(app=_sandbox_app(db))
    async with httpx.AsyncClient(transport=transport, base_url=SANDBOX_BASE) as admin:
        for call in calls:
            await _admin(admin, call.method, call.path, call.body, ok=call.ok)


@dataclass(frozen=True)
class AdminCall:
    method: str
    path: str
    body: dict[str, JsonValue]
    ok: tuple[int, ...] = (200, 201)


async def _sandbox_transport(
    refs: list[BotRef], keys: dict[str, str], options: ServiceOptions
) -> httpx.AsyncBaseTransport:
    """The embedded sandbox, in-process. Its accounts are the keys in use; chatbots named in
    the configuration are created there on first use."""
    transport = httpx.ASGITransport(app=_sandbox_app(options.sandbox_db))
    async with httpx.AsyncClient(transport=transport, base_url=SANDBOX_BASE) as admin:
        for call in bootstrap_calls(refs, keys):
            await _admin(admin, call.method, call.path, call.body, ok=call.ok)
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


async def _admin(
    client: httpx.AsyncClient,
    method: str,
    path: str,
    body: dict[str, JsonValue],
    ok: tuple[int, ...] = (200, 201),
) -> None:
    response = await client.request(method, path, json=body)
    if response.status_code not in ok:
        raise BotctlError(f"sandbox {method} {path} failed: HTTP {response.status_code}")
