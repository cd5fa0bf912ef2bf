"""``botctl demo``."""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from botctl.cli.console import colour_enabled, err, run_async
from botctl.errors import EXIT_ERROR, EXIT_OK


@click.command()
@click.option(
    "--examples",
    type=click.Path(path_type=Path, file_okay=False, exists=True),
    help="Configuration to demonstrate with (default: the examples botctl ships).",
)
def demo(examples: Path | None) -> int:
    """Run the whole loop on the embedded sandbox, offline, in seconds.

    Plans and applies botctl's example configuration (or --examples DIR) to chatbots set up
    by hand, re-plans to nothing, makes an edit "in the dashboard" and shows drift catching
    it. Works from any directory, in a throwaway one: your state file and API keys are never
    touched.
    """
    from botctl.pipeline.demo import find_examples, run_demo

    examples = examples or find_examples()
    if examples is None:
        err("error: this botctl was installed without its examples; pass --examples DIR")
        return EXIT_ERROR
    colour = colour_enabled()
    with tempfile.TemporaryDirectory(prefix="botctl-demo-") as workdir:
        ok = run_async(run_demo(click.echo, examples, Path(workdir), colour=colour))
    return EXIT_OK if ok else EXIT_ERROR
