"""``botctl validate``."""

from __future__ import annotations

from typing import Any

import click

from botctl.cli.console import print_warnings
from botctl.cli.options import config_options, workspace
from botctl.errors import EXIT_OK


@click.command()
@config_options
def validate(**params: Any) -> int:
    """Check the configuration offline (never contacts the service).

    Reports every problem at once, each as file:line:col. Exit 0 when valid, 1 otherwise.
    """
    from botctl.pipeline.workspace import load

    desired = load(workspace(params))
    print_warnings(desired.warnings)
    click.echo(f"Configuration valid: {len(desired.bots)} chatbot(s).")
    return EXIT_OK
