"""``botctl preview acquire / release / show``."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from botctl.cli.console import err
from botctl.cli.drift import Duration
from botctl.cli.options import (
    ALLOW_UNKNOWN_MODELS,
    CONFIG,
    LOCK_TIMEOUT,
    PATHS,
    STATE,
    FoundProject,
    state_option,
    takes,
    whole_configuration,
    workspace,
)
from botctl.cli.tests_cmd import stage_selector
from botctl.defaults import DEFAULT_PREVIEW_POLL, DEFAULT_PREVIEW_TTL

if TYPE_CHECKING:
    from botctl.pipeline.promote import Stage

OWNER = click.option(
    "--owner",
    envvar="BOTCTL_PREVIEW_OWNER",
    metavar="OWNER",
    help="Who holds the lease: the pull request, e.g. github:org/repo#42 [env "
    "BOTCTL_PREVIEW_OWNER].",
)


@click.group()
def preview() -> None:
    """Lease preview chatbots to pull requests (the lease lives in the state).

    A pull request's job acquires a preview stage, applies its configuration there, compares
    the answers with production (`botctl test -l STAGE --baseline stage=production`) and
    releases the stage when it ends, also when it fails: two pull requests never run on the
    same preview chatbot at once.
    """


def _stages(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[Stage, ...]:
    return tuple(s for text in value if (s := stage_selector(ctx, param, text)) is not None)


@dataclass(frozen=True, kw_only=True)
class AcquireOptions:
    paths: tuple[Path, ...]
    config_file: FoundProject
    allow_unknown_models: bool
    state_path: str
    lock_timeout: float
    stages: tuple[Stage, ...]
    owner: str | None
    ttl: timedelta
    wait: timedelta | None
    poll: float


@preview.command()
@PATHS
@CONFIG
@ALLOW_UNKNOWN_MODELS
@STATE
@LOCK_TIMEOUT
@click.option(
    "--stage",
    "stages",
    multiple=True,
    required=True,
    callback=_stages,
    metavar="SELECTOR",
    help="The preview stage, as a label selector (e.g. stage=preview); repeat it for a pool: "
    "the first whose chatbots are all free is taken.",
)
@OWNER
@click.option(
    "--ttl",
    type=Duration(),
    default=DEFAULT_PREVIEW_TTL,
    show_default=True,
    help="How long the lease holds unless renewed (acquired again by its owner) or "
    "released: a job that dies frees the stage after it.",
)
@click.option(
    "--wait",
    type=Duration(),
    help="How long to wait for a stage another owner holds: 30m, 1h... [default: fail at once].",
)
@click.option("--poll", type=click.FloatRange(0.01), default=DEFAULT_PREVIEW_POLL, hidden=True)
@takes(AcquireOptions)
def acquire(o: AcquireOptions) -> int:
    """Lease a preview stage's chatbots to OWNER.

    Takes every chatbot the --stage selector matches, or none, under the state lock, in one
    write of the state: of two jobs racing for a stage, one wins and the other waits
    (--wait) or fails. Free means held by no one, held by OWNER (the lease is renewed), or
    held past its expiry. Prints the stage taken (its selector) on standard output.

    \b
    Examples:
      botctl preview acquire bots/ --stage stage=preview --owner "github:org/repo#42" --wait 30m
      STAGE=$(botctl preview acquire bots/ --stage stage=preview-a --stage stage=preview-b \\
        --owner "$PR")    # a pool of two preview stages
    """
    from botctl.pipeline.preview import acquire as take
    from botctl.resources.preview import iso_seconds

    owner = _owner(o.owner)
    config = whole_configuration(o.paths, o.config_file, o.allow_unknown_models)
    ws = replace(workspace(config), state_path=o.state_path, lock_timeout=o.lock_timeout)

    wait = o.wait.total_seconds() if o.wait is not None else 0.0

    def waiting(holders: list[str]) -> None:
        err(f"waiting up to {wait:g} s for a preview stage: " + " | ".join(holders))

    taken = take(
        ws,
        o.stages,
        owner,
        ttl=o.ttl.total_seconds(),
        wait=wait,
        poll=o.poll,
        on_wait=waiting,
    )
    names = ", ".join(f"{m.name} ({m.chatbot_id})" for m in taken.chatbots)
    verb = "renewed" if taken.renewed else "leased"
    err(f"{verb} {taken.stage.text} to {owner} until {iso_seconds(taken.lease.expires)}: {names}")
    click.echo(taken.stage.text)
    return 0


def _owner(owner: str | None) -> str:
    if owner is None or not owner.strip():
        raise click.UsageError(
            "--owner is required (or BOTCTL_PREVIEW_OWNER): who holds the lease, e.g. the "
            "pull request github:org/repo#42"
        )
    return owner.strip()


@preview.command()
@state_option
@LOCK_TIMEOUT
@OWNER
@click.option("--all", "everyone", is_flag=True, help="Release every lease, whoever holds it.")
def release(state_path: str, lock_timeout: float, owner: str | None, everyone: bool) -> int:
    """End OWNER's preview leases (or --all of them).

    Run it when the pull request's job ends, also when it failed (GitHub: if: always();
    GitLab: after_script). Releasing what is not held is no error. Needs only the state, not
    the configuration.
    """
    from botctl.pipeline.preview import release as free
    from botctl.resources.preview import iso_seconds

    if everyone and owner:
        raise click.UsageError("give --owner or --all, not both")
    who = None if everyone else _owner(owner)
    gone = free(state_path, who, lock_timeout=lock_timeout)
    for chatbot_id, lease in gone.chatbots:
        err(
            f"released {chatbot_id} ({lease.stage}) of {lease.owner}, held until "
            f"{iso_seconds(lease.expires)}"
        )
    if not gone.chatbots:
        err(f"no preview lease held by {who or 'anyone'}: nothing to release")
    return 0


@preview.command()
@state_option
def show(state_path: str) -> int:
    """List the preview leases of the state: chatbot, stage, owner, expiry."""
    import time

    from botctl.annotations import inert
    from botctl.pipeline.preview import leases
    from botctl.resources.preview import iso_seconds

    found = leases(state_path)
    if not found:
        click.echo("No preview lease.")
        return 0
    now = time.time()
    lines = [
        f"{chatbot_id}  {lease.stage}  {lease.owner}  until {iso_seconds(lease.expires)}"
        + ("  (lapsed)" if lease.lapsed(now) else "")
        for chatbot_id, lease in found.items()
    ]
    click.echo(inert("\n".join(lines)))
    return 0
