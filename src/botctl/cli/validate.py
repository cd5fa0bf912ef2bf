"""``botctl validate``."""

from __future__ import annotations

from dataclasses import dataclass

import click

from botctl.cli.ci import errors_as_annotations
from botctl.cli.console import print_warnings
from botctl.cli.options import VALIDATE_FORMAT, ConfigGroup, config_options, group, takes, workspace
from botctl.errors import EXIT_OK


@dataclass(frozen=True, kw_only=True)
class ValidateOptions:
    config: ConfigGroup = group(ConfigGroup)
    fmt: str
    strict: bool


@click.command()
@config_options
@VALIDATE_FORMAT
@click.option("--strict", is_flag=True, help="Warnings are errors (exit 1).")
@takes(ValidateOptions)
def validate(o: ValidateOptions) -> int:
    """Check the configuration offline (never contacts the service).

    Reports every problem at once, each as file:line:col (--format github: as annotations on
    those lines). Exit 0 when valid, 1 otherwise. Warnings carry a code (BC101...) to silence
    them with: a document's spec.lint.disable, botctl.yaml's lint.disable, or
    --disable-warning.
    """
    from botctl.pipeline.workspace import load_resolved

    fmt = o.fmt
    with errors_as_annotations(fmt, "botctl validate"):
        fleet = load_resolved(workspace(o.config, strict=o.strict))
    desired = fleet.desired
    tests = f", {len(fleet.tests)} conversation test(s)" if fleet.tests else ""
    message = f"Configuration valid: {len(desired.bots)} chatbot(s){tests}."
    if fmt == "github":
        from botctl.annotations import annotation, located_annotation

        for warning in desired.warnings:
            click.echo(located_annotation("warning", warning, title="botctl validate"))
        click.echo(annotation("notice", message, title="botctl validate"))
        return EXIT_OK
    print_warnings(desired.warnings)
    click.echo(message)
    return EXIT_OK
