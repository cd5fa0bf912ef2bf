"""Connects a run to a service: the real one at ``--api-url``, or the embedded sandbox
in-process (``--sandbox``, ``botctl demo``; see ``embedded``). Builds one ``ServiceClient`` per
API key, keyed by the environment variable that holds it (a document's ``apiKeyEnv``).

Keys come only from the environment, never from the command line, and are never printed: a
missing key is reported by its variable's name.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator, Iterable, Mapping
from urllib.parse import urlsplit

import httpx

from botctl.contract import API_PREFIX
from botctl.errors import BotctlError
from botctl.plan import BotRef
from botctl.service.client import IN_FLIGHT_CAPS, InFlight, RetryPolicy, ServiceClient
from botctl.service.embedded import SANDBOX_BASE, sandbox_key, sandbox_transport
from botctl.service.options import ServiceOptions
from botctl.service.redact import api_key_problem, unusable_keys_message
from botctl.service.translate import printable
from botctl.values import mask_url_credentials


def resolve_keys(
    refs: Iterable[BotRef], environ: Mapping[str, str], *, sandbox: bool
) -> dict[str, str]:
    """env var name -> key; every missing or unusable variable is reported at once, by name.

    A key is used as it is set: one that an HTTP header cannot carry (a line break, spaces
    around it, a character outside ASCII) is refused, never trimmed into another key. The
    embedded sandbox gets a stand-in key per variable, never the variable's value: its
    database is a file on disk, and the value may be a real key."""
    needed: dict[str, list[str]] = {}
    for ref in refs:
        needed.setdefault(ref.api_key_env, []).append(ref.name)
    keys: dict[str, str] = {}
    missing = []
    unusable = []
    for env_name, bots in sorted(needed.items()):
        value = environ.get(env_name, "")
        problem = api_key_problem(value) if value.strip() else ""
        if sandbox:
            keys[env_name] = sandbox_key(env_name)
        elif problem:
            unusable.append(f"${env_name} {problem}")
        elif value.strip():
            keys[env_name] = value
        else:
            missing.append(f"${env_name} (for {', '.join(sorted(bots))})")
    if unusable:
        raise BotctlError(unusable_keys_message(unusable))
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
    candidate = url.strip()
    # Shown without any user:password@ it may carry, whether or not it parses.
    got = f"got {printable(mask_url_credentials(re.sub(r'//[^/?#]*@', '//', candidate)))!r}"
    if any(char.isspace() or not char.isprintable() for char in candidate):
        # A line break or a space inside (two URLs pasted into BOTCTL_API_URL, say): no URL.
        raise BotctlError(f"--api-url must be one URL, without spaces or control characters; {got}")
    try:
        parsed = urlsplit(candidate)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL"
        raise BotctlError(f"--api-url must be an http:// or https:// URL ({exc}); {got}") from None
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise BotctlError(f"--api-url must be an http:// or https:// URL, {got}")
    if not parsed.path.rstrip("/").endswith(API_PREFIX):
        host = parsed.netloc.rpartition("@")[2]
        raise BotctlError(
            f"--api-url must be the service's base address ending in {API_PREFIX} "
            f"(e.g. https://{host}{API_PREFIX}), {got}"
        )
    try:
        httpx.URL(candidate)
    except httpx.InvalidURL as exc:
        raise BotctlError(f"--api-url is not a valid URL ({exc}); {got}") from None
    return candidate


@contextlib.asynccontextmanager
async def connect(
    refs: list[BotRef], environ: Mapping[str, str], options: ServiceOptions
) -> AsyncIterator[dict[str, ServiceClient]]:
    """Yield clients by key variable for the chatbots in ``refs``."""
    keys = resolve_keys(refs, environ, sandbox=options.sandbox)
    if options.sandbox:
        transport: httpx.AsyncBaseTransport | None = await sandbox_transport(
            refs, keys, options.sandbox_db, options.sandbox_models
        )
        base_url = f"{SANDBOX_BASE}/api/v1"
    else:
        if not options.api_url:
            raise BotctlError(
                "no service address: pass --api-url URL (or set BOTCTL_API_URL), e.g. "
                "https://<host>/api/v1; or --sandbox to use the embedded sandbox"
            )
        transport, base_url = None, check_api_url(options.api_url)
    in_flight = InFlight(IN_FLIGHT_CAPS * options.max_response_bytes)  # one for the whole run
    clients = {
        env_name: ServiceClient(
            base_url,
            key,
            transport=transport,
            timeout=options.timeout,
            max_response_bytes=options.max_response_bytes,
            reads=not options.no_reads,
            contact_reads=not options.no_contact_reads,
            redactor=options.redactor,
            in_flight=in_flight,
            retry=RetryPolicy(
                max_attempts=options.max_attempts,
                base_delay=options.retry_base_delay,
                max_delay=options.retry_max_delay,
            ),
            rate_limit=options.rate_limit,
            trace=options.trace,
            key_name=env_name,
            on_wait=options.on_wait,
            fence=options.fence,
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
