"""``botctl drift``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from botctl.cli.ci import errors_as_annotations, write_comment
from botctl.cli.console import colour_enabled, err, run_async
from botctl.cli.options import COMMENT_OUT, FORMAT, config_options, service_options, workspace
from botctl.errors import EXIT_CHANGES, EXIT_OK


@click.command()
@config_options
@service_options
@FORMAT
@COMMENT_OUT
def drift(fmt: str, comment_out: Path | None, **params: Any) -> int:
    """Detect changes made outside botctl, pending changes and unmanaged attributes.

    Read-only: sends only reads and never writes the state file. Exit 2 when anything
    changed outside botctl, is pending, or is unmanaged; 0 when in sync.

    \b
    Example (a scheduled CI job):
      botctl drift bots/ --format markdown
    """
    from botctl.pipeline.flows import make_drift
    from botctl.render import drift_summary, render_drift, render_drift_comment

    ws = workspace(params)
    with errors_as_annotations(fmt, "botctl drift"):
        report = run_async(make_drift(ws))
        click.echo(render_drift(report, fmt, colour=colour_enabled()), nl=False)
        if comment_out is not None:
            write_comment(comment_out, render_drift_comment(report))
    if fmt in ("json", "markdown"):
        err(drift_summary(report))
    return EXIT_CHANGES if report.has_drift else EXIT_OK
