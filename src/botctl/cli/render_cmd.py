"""``botctl render`` (the command; ``botctl.render`` renders plans)."""

from __future__ import annotations

import json
from dataclasses import dataclass

import click

from botctl.cli.console import print_warnings
from botctl.cli.options import ConfigGroup, config_options, group, takes, workspace
from botctl.errors import EXIT_OK


@dataclass(frozen=True, kw_only=True)
class RenderOptions:
    config: ConfigGroup = group(ConfigGroup)
    fmt: str


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
@takes(RenderOptions)
def render(o: RenderOptions) -> int:
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

    fleet = load_resolved(workspace(o.config))
    print_warnings(fleet.warnings)
    if o.fmt == "json":
        document = resolved_json(fleet.bots, fleet.warnings)
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
    else:
        click.echo(annotated_yaml(fleet.bots), nl=False)
    return EXIT_OK
