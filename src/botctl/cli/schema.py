"""``botctl schema``."""

from __future__ import annotations

import json

import click

from botctl.errors import EXIT_OK


@click.command()
def schema() -> int:
    """Print the JSON Schema of the configuration format.

    Editors use it through a first line `# yaml-language-server: $schema=PATH`; the checked-in
    copy is schemas/botctl.schema.json.
    """
    from botctl.config.document import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=True))
    return EXIT_OK
