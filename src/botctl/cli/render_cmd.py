"""``botctl render`` (the command; ``botctl.render`` renders plans)."""

from __future__ import annotations

import json
from typing import Any

import click

from botctl.cli.console import print_warnings
from botctl.cli.options import config_options, workspace
from botctl.errors import EXIT_OK


@click.command("render")
@config_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["yaml", "json"]),
    default="yaml",
    show_default=True,
    help="yaml: annotated documents; json: documents and origins, for tools.",
)
def render(fmt: str, **params: Any) -> int:
    """Print each chatbot fully resolved, and where every value came from.

    AttributeSets and Defaults applied, ${VAR}s interpolated, ${secret:...} values masked; each
    value annotated with its document and line (`# from defaults/eu-bots.yaml:7`). Offline,
    like validate. The YAML is itself a valid configuration.

    \b
    Examples:
      botctl render bots/
      botctl render bots/ -l team=support --format json
    """
    from botctl.config.annotate import annotated_yaml, resolved_json
    from botctl.pipeline.workspace import load_resolved

    fleet = load_resolved(workspace(params))
    print_warnings(fleet.warnings)
    if fmt == "json":
        document = resolved_json(fleet.bots, fleet.warnings)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        click.echo(annotated_yaml(fleet.bots), nl=False)
    return EXIT_OK
