"""``botctl schema``."""

from __future__ import annotations

import json

import click

from botctl.errors import EXIT_OK


@click.command()
@click.option(
    "--project",
    is_flag=True,
    help="The project file's schema (botctl.yaml) instead of the documents'.",
)
def schema(project: bool) -> int:
    """Print the JSON Schema of the configuration's documents (Chatbot, AttributeSet,
    Defaults, ConversationTest), or with --project of the project file botctl.yaml.

    Editors use it through a first line `# yaml-language-server: $schema=PATH`; the checked-in
    copies are schemas/botctl.schema.json and schemas/botctl-project.schema.json.
    """
    from botctl.config.document import json_schema
    from botctl.config.project import project_json_schema

    schema = project_json_schema() if project else json_schema()
    click.echo(json.dumps(schema, indent=2, sort_keys=True))
    return EXIT_OK
