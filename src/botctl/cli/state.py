"""``botctl state show|pull|push|migrate``: inspect the state and move it between backends."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from botctl.cli.console import err
from botctl.cli.options import LOCK_TIMEOUT, state_option
from botctl.errors import EXIT_OK, StateError

FORCE = click.option(
    "--force",
    is_flag=True,
    help="Replace a state of another lineage, a newer serial, or a diverged one.",
)


@click.group()
def state() -> None:
    """Inspect the state and move it between backends.

    \b
    --state (env BOTCTL_STATE) takes:
      .botctl/state.json                                 a file (the default)
      git+file:///srv/bots.git#botctl-state:state.json   a branch of a git repository
      s3://my-bucket/botctl/state.json                   an S3 object (botctl[s3])
    """


@state.command()
@state_option
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text")
def show(state_path: str, fmt: str) -> int:
    """Summarise the state: lineage, serial, chatbots, where it lives, who holds its lock."""
    from botctl.store.transfer import summarize

    summary = summarize(state_path)
    lock = summary.lock
    if fmt == "json":
        document: dict[str, Any] = {
            "where": summary.where,
            "exists": summary.lineage is not None,
            "lineage": summary.lineage,
            "serial": summary.serial if summary.lineage else None,
            "chatbots": [{"chatbotId": c, "bot": b} for c, b in summary.chatbots.items()],
            "lock": None
            if lock is None
            else {
                "pid": lock.pid,
                "host": lock.host,
                "since": lock.since,
                "command": lock.command,
                "holder": lock.holder,
            },
        }
        click.echo(json.dumps(document, indent=2))
        return EXIT_OK
    click.echo(f"state:    {summary.where}")
    if summary.lineage is None:
        click.echo("          no state yet (the first apply creates it)")
    else:
        names = ", ".join(f"{b} ({c})" for c, b in summary.chatbots.items())
        click.echo(f"lineage:  {summary.lineage}")
        click.echo(f"serial:   {summary.serial}")
        click.echo(f"chatbots: {len(summary.chatbots)}" + (f": {names}" if names else ""))
    click.echo(f"lock:     {'none' if lock is None else 'held by ' + lock.describe()}")
    return EXIT_OK


@state.command()
@state_option
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the state to FILE (created 0600) instead of printing it.",
)
def pull(state_path: str, out: Path | None) -> int:
    """Print the state document as stored (or write it to a file)."""
    from botctl.store.backends import open_backend
    from botctl.store.files import write_atomically

    with open_backend(state_path) as backend:
        text = backend.read().text
        if text is None:
            raise StateError(f"no state at {backend.where}")
    if out is None:
        click.echo(text, nl=False)
    else:
        write_atomically(out, text)
        err(f"State written to {out}.")
    return EXIT_OK


@state.command()
@click.argument("file", type=click.File("r", encoding="utf-8"))
@state_option
@FORCE
@LOCK_TIMEOUT
def push(file: Any, state_path: str, force: bool, lock_timeout: float) -> int:
    """Upload a state file (FILE, or - for stdin) to the state's location.

    Takes the state lock. Refused, unless --force, when the stored state is of another
    lineage, has a newer serial, or the same serial with other content. With --force the
    serial still moves past the stored one, so plans saved against it are stale.
    """
    from botctl.store.backends import open_backend
    from botctl.store.state import state_from_text
    from botctl.store.transfer import replace_state

    name = "<stdin>" if file is sys.stdin else str(file.name)
    incoming = state_from_text(file.read(), name)
    with open_backend(state_path) as backend:
        done = replace_state(
            incoming, backend, force=force, lock_timeout=lock_timeout, command="state push"
        )
    if not done.written:
        click.echo(f"{done.where} already holds this state (serial {done.serial}).")
    else:
        was = f", replacing {done.replaced}" if done.replaced else ""
        click.echo(f"Pushed {name} to {done.where} (serial {done.serial}{was}).")
    return EXIT_OK


@state.command()
@state_option
@click.option("--to", "target", required=True, metavar="PATH|URL", help="Where to copy it.")
@FORCE
@LOCK_TIMEOUT
def migrate(state_path: str, target: str, force: bool, lock_timeout: float) -> int:
    """Copy the state to another backend (same lineage and serial); the original stays.

    \b
    Example:
      botctl state migrate --to git+file:///srv/bots.git#botctl-state:state.json
    """
    from botctl.store.backends import describe
    from botctl.store.transfer import migrate_state

    done = migrate_state(state_path, target, force=force, lock_timeout=lock_timeout)
    source = describe(state_path)
    if done.written:
        click.echo(f"Copied the state (serial {done.serial}) from {source} to {done.where}.")
    else:
        click.echo(f"{done.where} already holds this state (serial {done.serial}).")
    click.echo(
        f"Use it from now on with `--state '{done.where}'` or `export BOTCTL_STATE='{done.where}'`"
        f" (in CI too); the state at {source} is left as it was: remove it once nothing uses it."
    )
    return EXIT_OK
