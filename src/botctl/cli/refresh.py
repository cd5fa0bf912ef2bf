"""``botctl refresh``."""

from __future__ import annotations

from dataclasses import dataclass

import click

from botctl.cli.console import err, run_async
from botctl.cli.options import (
    LOCK_TIMEOUT,
    ConfigGroup,
    ServiceGroup,
    config_options,
    group,
    service_options,
    takes,
    workspace,
)
from botctl.errors import EXIT_ERROR, EXIT_OK


@dataclass(frozen=True, kw_only=True)
class RefreshOptions:
    config: ConfigGroup = group(ConfigGroup)
    service: ServiceGroup = group(ServiceGroup)
    lock_timeout: float


@click.command()
@config_options
@service_options
@LOCK_TIMEOUT
@takes(RefreshOptions)
def refresh(o: RefreshOptions) -> int:
    """Record what the service verifiably holds as configured: a baseline for drift.

    Reads the service (never writes to it) and records in the state every declared value
    the service holds as declared, as verified. A chatbot adopted with hand-written YAML gets
    its baseline this way; values that differ are left unrecorded (`botctl drift` shows them
    as of unknown origin until they agree or are applied). Takes the state lock like apply.

    \b
    Example:
      botctl refresh bots/ && botctl drift bots/
    """
    from botctl.pipeline.flows import run_refresh
    from botctl.plan import Plan
    from botctl.reconcile.diff import missing_error
    from botctl.store.backends import describe

    if o.service.no_reads:
        raise click.UsageError("refresh records what the service shows: it needs reads")
    ws = workspace(o.config, o.service, lock_timeout=o.lock_timeout)
    where = describe(ws.state_path)
    outcome = run_async(run_refresh(ws))
    missing = missing_error(Plan(missing=outcome.missing), "the others were refreshed")
    if missing is not None:  # said first, as plan and apply do; the exit code is 1
        err(f"error: {missing}")
    click.echo(
        f"Refreshed {outcome.bots} chatbot(s): {outcome.settings} setting value(s) and "
        f"{outcome.attributes} attribute(s) verified as configured; "
        + (
            f"the state {where} was updated."
            if outcome.written
            else f"the state {where} already recorded them."
        )
    )
    if outcome.differing:
        click.echo(
            f"{outcome.differing} declared value(s) differ from the service and were not "
            "recorded: `botctl drift` lists them, `botctl apply` makes them so."
        )
    return EXIT_OK if missing is None else EXIT_ERROR
