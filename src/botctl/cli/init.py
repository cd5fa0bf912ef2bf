"""``botctl init``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from botctl.cli.console import err
from botctl.errors import EXIT_OK

if TYPE_CHECKING:
    from botctl.pipeline.scaffold import Outcome

SAID = {"wrote": "wrote", "added": "added to", "kept": "left alone", "differs": "left alone"}


@click.command(short_help="Start a configuration repository (or complete one).")
@click.argument(
    "directory",
    required=False,
    default=".",
    type=click.Path(path_type=Path, file_okay=False),
)
@click.option(
    "--ci",
    type=click.Choice(["github", "gitlab"]),
    help="Also write the CI workflow (plan on pull requests, apply on merge, nightly drift): "
    "github: .github/workflows/botctl.yml, gitlab: .gitlab-ci.yml.",
)
def init(directory: Path, ci: str | None) -> int:
    """Start a configuration repository in DIRECTORY (default: the current one; made when
    missing). Writes what is missing and leaves alone what is there, so it is safe to run
    again at any time (an existing repository gains only what it lacks):

    \b
      botctl.yaml                         the project file: paths, state, and botctl's
                                          defaults as comments to edit
      bots/                               the documents, one YAML file per chatbot
      .gitignore                          + ".botctl/": the local state, its key file and
                                          the sandbox's database never reach git (an
                                          existing file keeps its lines)
      schemas/botctl.schema.json          the JSON Schemas editors check the documents and
      schemas/botctl-project.schema.json  botctl.yaml against, offline (their first lines
                                          name them)

    Nothing is read from or sent to the service, and no state is made.

    \b
    Examples:
      botctl init my-bots --ci github     # then commit what it wrote
      cd my-bots
      export BOTCTL_API_URL=https://<service-host>/api/v1 BOTCTL_API_KEY=...
      botctl export --all --out bots/     # adopt the chatbots that exist
      botctl plan                         # paths come from botctl.yaml
    """
    from botctl.pipeline.scaffold import scaffold

    outcomes = scaffold(directory, ci)
    for outcome in outcomes:
        click.echo(outcome_line(outcome))
    if outcomes[0].done == "wrote":  # a new project file: a new repository
        where = "" if directory == Path(".") else f"cd {directory}; "
        err(
            f"Next: {where}set BOTCTL_API_URL and BOTCTL_API_KEY, `botctl export --all --out "
            "bots/` to adopt the chatbots that exist, review, commit."
        )
    return EXIT_OK


def outcome_line(outcome: Outcome) -> str:
    """``wrote botctl.yaml (the project file)``, ``left alone bots/ (exists)``: a path below
    the working directory shown relative to it."""
    path = outcome.path
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    shown = f"{path}/" if outcome.path.is_dir() else str(path)
    return f"{SAID[outcome.done]} {shown} ({outcome.why})"
