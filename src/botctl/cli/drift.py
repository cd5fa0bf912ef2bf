"""``botctl drift``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import click

from botctl.cli.ci import errors_as_annotations, write_comment
from botctl.cli.console import colour_enabled, err, run_async
from botctl.cli.options import (
    CHANGED_SINCE,
    COMMENT_OUT,
    FORMAT,
    ConfigGroup,
    ServiceGroup,
    config_options,
    group,
    service_options,
    takes,
    workspace,
)
from botctl.defaults import DEFAULT_ACCEPT_FOR
from botctl.errors import EXIT_CHANGES, EXIT_OK

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class Duration(click.ParamType):  # type: ignore[type-arg]  # generic only in newer click
    """``7d``, ``12h``, ``30m``, ``2w``, ``90s``, or plain seconds."""

    name = "DURATION"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, timedelta):
            return value
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", str(value))
        if match is None or float(match[1]) <= 0:
            self.fail(f"{value!r} is not a duration such as 7d, 12h, 30m or 2w", param, ctx)
        return timedelta(seconds=float(match[1]) * _UNITS[match[2] or "s"])


@dataclass(frozen=True, kw_only=True)
class DriftOptions:
    config: ConfigGroup = group(ConfigGroup)
    service: ServiceGroup = group(ServiceGroup)
    fmt: str
    comment_out: Path | None
    acknowledged_file: Path | None
    accept_file: Path | None
    accept_for: timedelta
    changed_since: str | None


@click.command()
@config_options
@service_options
@FORMAT
@click.option(
    "--acknowledged",
    "acknowledged_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    metavar="FILE",
    help="Do not count drift this file acknowledges while its live value is unchanged and "
    "it has not expired (made by --accept).",
)
@click.option(
    "--accept",
    "accept_file",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Write the current drift to FILE as acknowledged (until now + --for), then exit 0.",
)
@click.option(
    "--for",
    "accept_for",
    type=Duration(),
    default=DEFAULT_ACCEPT_FOR,
    show_default=True,
    help="How long --accept acknowledges: 7d, 12h, 2w...",
)
@COMMENT_OUT
@CHANGED_SINCE
@takes(DriftOptions)
def drift(o: DriftOptions) -> int:
    """Report what differs between the service, the configuration and botctl's record.

    Every managed value is in sync or in exactly one class: changed outside (the service
    moved from the recorded value), pending (the configuration moved; not applied yet),
    conflict (both moved), unknown origin (they differ and nothing is recorded: adopt with
    `botctl refresh` or `botctl export`), missing (the service no longer lists the chatbot).
    Unmanaged attributes count too; chatbots no document declares are only listed.

    Read-only: sends only reads and never writes the state. Exit 2 when there is drift,
    0 when in sync, 1 on error.

    \b
    Examples:
      botctl drift bots/                                  # the nightly check
      botctl drift bots/ --accept ack.json --for 14d      # "we know, leave it"
      botctl drift bots/ --acknowledged ack.json          # skips what ack.json covers
    """
    from botctl.pipeline.flows import make_drift
    from botctl.reconcile.drift import acknowledge, acknowledgements_for
    from botctl.render import drift_summary, render_drift, render_drift_comment
    from botctl.store.acknowledgements import read_acknowledgements, write_acknowledgements

    fmt, comment_out, accept_file = o.fmt, o.comment_out, o.accept_file
    acknowledged_file, accept_for = o.acknowledged_file, o.accept_for
    now = datetime.now(UTC)
    ws = workspace(o.config, o.service, changed_since=o.changed_since)
    with errors_as_annotations(fmt, "botctl drift"):
        entries = read_acknowledgements(acknowledged_file) if acknowledged_file else []
        report = acknowledge(run_async(make_drift(ws)), entries, now)
        click.echo(render_drift(report, fmt, colour=colour_enabled()), nl=False)
        if comment_out is not None:
            write_comment(comment_out, render_drift_comment(report))
    if fmt in ("json", "markdown"):
        err(drift_summary(report))
    if accept_file is not None:
        until = now + accept_for
        write_acknowledgements(accept_file, acknowledgements_for(report, until))
        err(
            f"Acknowledged {len(report.items)} drift item(s) until "
            f"{until.isoformat(timespec='seconds')} in {accept_file}; pass --acknowledged "
            f"{accept_file} to skip them."
        )
        return EXIT_OK
    return EXIT_CHANGES if report.has_drift else EXIT_OK
