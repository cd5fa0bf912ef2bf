"""The commands beyond the plan/apply loop: schema, export, demo."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import click

from botctl.console import colour_enabled, err, run_async
from botctl.errors import EXIT_ERROR, EXIT_OK


@click.command()
def schema() -> int:
    """Print the JSON Schema of the configuration format.

    Editors use it through a first line `# yaml-language-server: $schema=PATH`; the checked-in
    copy is schemas/botctl.schema.json.
    """
    from botctl.config import json_schema

    click.echo(json.dumps(json_schema(), indent=2, sort_keys=True))
    return EXIT_OK


@click.command()
@click.option(
    "--examples",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Configuration to demonstrate with (default: examples/).",
)
def demo(examples: Path | None) -> int:
    """Run the whole loop on the embedded sandbox, offline, in seconds.

    Plans and applies examples/ to chatbots set up by hand, re-plans to nothing, makes an
    edit "in the dashboard" and shows drift catching it. Uses a throwaway directory: your
    state file and API keys are never touched.
    """
    from botctl.demo import find_examples, run_demo

    examples = examples or find_examples()
    if examples is None:
        err("error: no examples/ directory here; pass --examples DIR")
        return EXIT_ERROR
    colour = colour_enabled()
    with tempfile.TemporaryDirectory(prefix="botctl-demo-") as workdir:
        ok = run_async(run_demo(click.echo, examples, Path(workdir), colour=colour))
    return EXIT_OK if ok else EXIT_ERROR
