"""``botctl state show|pull|push|migrate``: inspect the state and move it between backends."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from botctl.cli.console import err
from botctl.cli.options import (
    ALLOW_UNKNOWN_MODELS,
    CONFIG,
    DISABLE_WARNING,
    LOCK_TIMEOUT,
    PATHS,
    STATE,
    FoundProject,
    state_option,
    takes,
)
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
            "encryption": summary.encryption,
            "fingerprints": summary.fingerprints,
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
        click.echo(f"encryption: {summary.encryption}")
        click.echo(f"fingerprints: {summary.fingerprints}")
    for warning in summary.warnings:
        err(warning)
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
    from botctl.store.keys import find_key
    from botctl.store.state import state_from_text
    from botctl.store.transfer import replace_state

    name = "<stdin>" if file is sys.stdin else str(file.name)
    with open_backend(state_path) as backend:
        incoming = state_from_text(file.read(), name, find_key(backend))
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
@click.option("--to", "target", metavar="PATH|URL", help="Where to copy it.")
@click.option(
    "--state-encryption",
    "encryption",
    type=click.Choice(["none", "passphrase"]),
    help="Keep the copy encrypted at rest (passphrase: AES-256-GCM under a key derived from "
    "BOTCTL_STATE_KEY) or not; without --to, the state is rewritten where it is.",
)
@FORCE
@LOCK_TIMEOUT
def migrate(
    state_path: str, target: str | None, encryption: str | None, force: bool, lock_timeout: float
) -> int:
    """Copy the state to another backend (same lineage and serial); the original stays.
    With --state-encryption, encrypt or decrypt it (in place without --to).

    \b
    Examples:
      botctl state migrate --to git+file:///srv/bots.git#botctl-state:state.json
      botctl state migrate --state-encryption passphrase
    """
    from botctl.store.backends import describe
    from botctl.store.transfer import migrate_state

    if target is None and encryption is None:
        raise click.UsageError("give --to PATH|URL, --state-encryption, or both")
    done = migrate_state(
        state_path,
        target,
        force=force,
        lock_timeout=lock_timeout,
        encryption="passphrase" if encryption == "passphrase" else "none" if encryption else None,
    )
    source = describe(state_path)
    if target is None:
        how = "encrypted at rest" if encryption == "passphrase" else "not encrypted"
        if done.written:
            click.echo(f"Rewrote the state at {done.where} (serial {done.serial}): {how}.")
        else:
            click.echo(f"The state at {done.where} is {how} already.")
        return EXIT_OK
    if done.written:
        click.echo(f"Copied the state (serial {done.serial}) from {source} to {done.where}.")
    else:
        click.echo(f"{done.where} already holds this state (serial {done.serial}).")
    click.echo(
        f"Use it from now on with `--state '{done.where}'` or `export BOTCTL_STATE='{done.where}'`"
        f" (in CI too); the state at {source} is left as it was: remove it once nothing uses it."
    )
    return EXIT_OK


@state.command("init-key")
@state_option
@click.option(
    "--write",
    is_flag=True,
    help="Write the key to the key file beside a local state (<state>.key, 0600) instead of "
    "printing it.",
)
def init_key(state_path: str, write: bool) -> int:
    """Make a new state key (256 random bits) and print it.

    The state key keys the fingerprints of ${secret:...} values in the state and in saved
    plans, and the encryption of a state kept encrypted (--state-encryption passphrase). It
    is never written where the state goes: keep it in BOTCTL_STATE_KEY (in CI, as a secret).

    \b
    Example:
      export BOTCTL_STATE_KEY="$(botctl state init-key)"
    """
    from botctl.store.backends import open_backend
    from botctl.store.keys import new_state_key, write_key_file

    key = new_state_key()
    if not write:
        click.echo(key)
        err(
            "A new state key. Set it as BOTCTL_STATE_KEY wherever botctl reads this state (in "
            "CI, as a secret); never commit it. A state made under another key: `botctl state "
            "rekey` (BOTCTL_OLD_STATE_KEY: the old one)."
        )
        return EXIT_OK
    with open_backend(state_path) as backend:
        file = backend.key_file()
    if file is None:
        raise StateError(
            f"--write: {state_path} is shared, so its key cannot live beside it; set "
            "BOTCTL_STATE_KEY instead"
        )
    write_key_file(file, key)
    err(f"State key written to {file} (0600); never commit it.")
    return EXIT_OK


@dataclass(frozen=True, kw_only=True)
class RekeyOptions:
    paths: tuple[Path, ...]
    config_file: FoundProject
    allow_unknown_models: bool
    disabled_warnings: frozenset[str]
    state_path: str
    lock_timeout: float
    forget: bool


@state.command()
@PATHS
@CONFIG
@ALLOW_UNKNOWN_MODELS
@DISABLE_WARNING
@STATE
@LOCK_TIMEOUT
@click.option(
    "--forget",
    is_flag=True,
    help="Drop the fingerprints that cannot be matched (the old key is lost, or no "
    "configuration is given): botctl sends those values again at the next apply.",
)
@takes(RekeyOptions)
def rekey(o: RekeyOptions) -> int:
    """Move the state's fingerprints under the state key set now; sends nothing.

    From a state of format 3 (fingerprints keyed with the salt stored in it), or from an old
    state key given in BOTCTL_OLD_STATE_KEY, to BOTCTL_STATE_KEY (or, for a local state, its
    key file, created if missing). Each fingerprint is matched with the value the
    configuration (PATH..., its ${secret:...}s from the environment) declares at its place;
    one that matches nothing is dropped, and that value is sent again at the next apply.
    Every chatbot of the configuration is matched (no selection: one left out would lose
    its fingerprints). A state encrypted at rest is encrypted again under the new key.
    """
    from botctl.cli.options import ConfigGroup, SelectionGroup, workspace
    from botctl.pipeline.rekey import rekey_state
    from botctl.pipeline.workspace import load

    config = ConfigGroup(
        paths=o.paths,
        config_file=o.config_file,
        allow_unknown_models=o.allow_unknown_models,
        disabled_warnings=o.disabled_warnings,
        selection=SelectionGroup(targets=(), selector=(), excludes=()),  # every chatbot
    )
    found = o.config_file.get()
    given = o.paths or (found.paths if found is not None else ())
    # Without a configuration (no PATH, none in botctl.yaml) there is nothing to match the
    # fingerprints with: rekey_state refuses a state that holds any, unless --forget.
    specs = {bot.chatbot_id: bot for bot in load(workspace(config)).bots} if given else None
    state_path = o.state_path  # the flag, BOTCTL_STATE, botctl.yaml's state or the default
    done = rekey_state(state_path, specs, os.environ, forget=o.forget, lock_timeout=o.lock_timeout)
    if not done.written:
        click.echo(f"The state at {done.where} is already under this key ({done.new_origin}).")
        return EXIT_OK
    click.echo(
        f"Rekeyed the state at {done.where} (serial {done.serial}): {done.moved} "
        f"fingerprint(s) now under {done.new_origin}."
    )
    for place in done.forgotten:
        err(f"forgotten (sent again at the next apply): {place}")
    err(
        "Plans saved before are stale now. Copies of the state made before (a git branch's "
        "history, backups) keep the old fingerprints: rotate a secret they may expose."
    )
    return EXIT_OK
