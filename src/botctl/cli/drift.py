"""``botctl drift``."""

from __future__ import annotations

from typing import Any

import click

from botctl.cli.console import colour_enabled, err, run_async
from botctl.cli.options import FORMAT, config_options, service_options, workspace
from botctl.errors import EXIT_CHANGES, EXIT_OK


@click.command()
@config_options
@service_options
@FORMAT
def drift(fmt: str, **params: Any) -> int:
    """Detect changes made outside botctl, pending changes and unmanaged attributes.

    Read-only: sends only reads and never writes the state file. Exit 2 when anything
    changed outside botctl, is pending, or is unmanaged; 0 when in sync.

    \b
    Example (a scheduled CI job):
      botctl drift bots/ --format markdown
    """
    from botctl.pipeline.flows import make_drift
    from botctl.render import drift_summary, render_drift

    report = run_async(make_drift(workspace(params)))
    click.echo(render_drift(report, fmt, colour=colour_enabled()), nl=False)
    if fmt != "text":
        err(drift_summary(report))
    return EXIT_CHANGES if report.has_drift else EXIT_OK
