"""`botctl sandbox serve`: the sandbox as a standalone local server."""

from __future__ import annotations

from pathlib import Path

import click

from botctl import contract
from botctl.sandbox.config import READS_MODES, SandboxConfig, SandboxConfigError, parse_api_key


@click.group("sandbox")
def sandbox() -> None:
    """A local emulator of the Chatbot Management Service API v1."""


@sandbox.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="0 = any free."
)
@click.option(
    "--db", default=".botctl/sandbox.db", show_default=True, help="SQLite file, or :memory:."
)
@click.option(
    "--api-key",
    "api_keys",
    multiple=True,
    metavar="KEY[:PLAN]",
    help="Accept KEY as an account (plan free|hobby|standard|unlimited, default standard).",
)
@click.option(
    "--seed",
    type=click.Path(path_type=Path),
    help="YAML of accounts and chatbots to create at start.",
)
@click.option("--reads", type=click.Choice(READS_MODES), default="documented", show_default=True)
@click.option(
    "--rate-limit", type=click.FloatRange(min=0), default=0, help="Requests/s per key; 0 = off."
)
@click.option(
    "--rate-limit-headers/--no-rate-limit-headers",
    default=True,
    show_default=True,
    help="Announce the window (X-RateLimit-Limit, -Remaining, -Reset) on rate-limited "
    "operations; without, a 429 says only Retry-After.",
)
@click.option("--latency-ms", type=click.IntRange(min=0), default=0, help="Added to every request.")
@click.option(
    "--extra-model",
    "extra_models",
    multiple=True,
    metavar="NAME",
    help="Also accept NAME as a model (settings and chat): one released after the contract.",
)
@click.option(
    "--extra-source",
    "extra_sources",
    multiple=True,
    metavar="NAME",
    help="Also accept NAME as a conversation source: the contract's four channel sources are "
    "not named.",
)
@click.option(
    "--allow-non-loopback", is_flag=True, help="Permit binding an address other than loopback."
)
def serve(
    host: str,
    port: int,
    db: str,
    api_keys: tuple[str, ...],
    seed: Path | None,
    reads: str,
    rate_limit: float,
    rate_limit_headers: bool,
    latency_ms: int,
    extra_models: tuple[str, ...],
    extra_sources: tuple[str, ...],
    allow_non_loopback: bool,
) -> None:
    """Serve the sandbox API under /api/v1 (and its admin API under /_sandbox)."""
    # Imported here: every botctl command registers this one, and only it needs the server
    # (starlette and uvicorn are a sixth of botctl's start-up).
    from botctl.sandbox.app import create_app
    from botctl.sandbox.server import bind_socket, is_loopback, make_server, url_of

    if not is_loopback(host) and not allow_non_loopback:
        # Any key is accepted as configured and the admin API needs none: not for a network.
        raise click.ClickException(
            f"refusing to bind non-loopback address {host}; pass --allow-non-loopback to do so"
        )
    try:
        keys = dict(parse_api_key(k) for k in api_keys)
        config = SandboxConfig(
            db=db,
            api_keys=keys,
            reads=reads,  # type: ignore[arg-type]  # click.Choice guarantees the literal
            rate_limit=rate_limit,
            rate_limit_headers=rate_limit_headers,
            latency_ms=latency_ms,
            seed=seed,
            extra_models=extra_models,
            extra_sources=extra_sources,
        )
        app = create_app(config)
    except SandboxConfigError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot open database {db}: {exc.strerror or exc}") from None
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    url = url_of(sock)
    click.echo(f"Sandbox serving {url} (API: {url}{contract.API_PREFIX}, db: {db})")
    if not keys:
        click.echo("no --api-key given: register keys with POST /_sandbox/accounts")
    make_server(app, log_level="info").run(sockets=[sock])


if __name__ == "__main__":  # `python -m botctl.sandbox.cli serve ...`, handy in tests
    sandbox()
