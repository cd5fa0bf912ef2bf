"""botctl's command line: parse options, call the stages, render, exit.

The only module that prints or exits. Exit codes: 0 success / in sync, 1 error, 2 changes or
drift present (``plan --detailed-exitcode``, ``drift``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from botctl import __version__
from botctl.cli_more import demo, export, schema
from botctl.console import Progress, colour_enabled, err, run_async
from botctl.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK, BotctlError, PlanError
from botctl.options import (
    ALLOW_UNKNOWN_MODELS,
    FORMAT,
    PATHS,
    STATE,
    TARGETS,
    config_options,
    safety_options,
    service_options,
    workspace,
)
from botctl.plan import Plan, plan_from_file_dict, plan_to_file_dict
from botctl.render import drift_summary, render_drift, render_plan
from botctl.sandbox.cli import sandbox
from botctl.state import break_lock
from botctl.workflow import enforce_safety, load, make_drift, make_plan, run_apply


class BotctlGroup(click.Group):
    """Turns expected failures into a message and exit code 1 (never a traceback), and keeps
    exit code 2 for "changes present" by mapping click's usage errors to 1."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            err("Aborted: nothing was applied.")
            sys.exit(EXIT_ERROR)
        except click.ClickException as exc:
            exc.show()
            sys.exit(EXIT_ERROR)
        except BotctlError as exc:
            err(f"error: {exc}")
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


@click.group(cls=BotctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="botctl")
def cli() -> None:
    """Chatbot settings and custom contact attributes as code.

    Write each chatbot's desired state in YAML, review a plan, apply it, and catch changes
    made outside git (drift). Start with `botctl demo`, which runs the whole loop against the
    embedded sandbox, offline.

    \b
    Exit codes: 0 success / in sync, 1 error, 2 changes or drift present.
    """


def print_warnings(warnings: tuple[str, ...]) -> None:
    for warning in warnings:
        err(
            warning
            if warning.startswith("warning") or ": warning" in warning
            else f"warning: {warning}"
        )


@cli.command()
@config_options
def validate(**params: Any) -> int:
    """Check the configuration offline (never contacts the service).

    Reports every problem at once, each as file:line:col. Exit 0 when valid, 1 otherwise.
    """
    desired = load(workspace(params))
    print_warnings(desired.warnings)
    click.echo(f"Configuration valid: {len(desired.bots)} chatbot(s).")
    return EXIT_OK


@cli.command()
@config_options
@service_options
@safety_options
@FORMAT
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also save the plan to FILE, for `botctl apply --plan FILE` to apply as reviewed.",
)
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 2 when the plan has changes (0 when empty, 1 on error).",
)
def plan(fmt: str, out: Path | None, detailed_exitcode: bool, **params: Any) -> int:
    """Show what apply would change, and how sure botctl is of each current value.

    Confidence: verified (read from the service now), assumed (what botctl last applied,
    from the state file), unknown (neither: the value will be sent).

    \b
    Examples:
      botctl plan bots/
      botctl plan bots/ --format markdown --out plan.json > plan.md   # in a pull request
      botctl plan bots/ --detailed-exitcode                           # exit 2 on changes
    """
    ws = workspace(params)
    result = run_async(make_plan(ws))
    click.echo(render_plan(result, fmt, colour=colour_enabled()), nl=False)
    enforce_safety(result, ws)
    if out is not None:
        write_plan_file(result, out)
        err(f"Plan saved to {out}; apply it with: botctl apply --plan {out}")
    return EXIT_CHANGES if detailed_exitcode and not result.empty else EXIT_OK


def write_plan_file(result: Plan, out: Path) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(plan_to_file_dict(result), indent=2) + "\n", encoding="utf-8")


def read_plan_file(path: Path) -> Plan:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanError(f"cannot read plan file {path}: {exc.strerror}") from None
    except ValueError as exc:
        raise PlanError(f"plan file {path} is not JSON: {exc}") from None
    return plan_from_file_dict(data)


@cli.command()
@PATHS
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Apply this saved plan exactly as reviewed; refused if the service or state moved.",
)
@click.option("--auto-approve", is_flag=True, help="Apply without asking for confirmation.")
@click.option(
    "--lock-timeout",
    type=click.FloatRange(0),
    default=0.0,
    metavar="SECONDS",
    help="Wait this long for another apply's state lock (default: fail at once).",
)
@ALLOW_UNKNOWN_MODELS
@TARGETS
@service_options
@safety_options
def apply(plan_file: Path | None, auto_approve: bool, **params: Any) -> int:
    """Apply the configuration (or a saved plan) to the service.

    Shows the plan and asks for confirmation on a terminal; without a terminal it refuses
    unless --auto-approve or --plan. Each operation is printed as it completes; state records
    every applied operation, so a re-run does only what is left.

    \b
    Examples:
      botctl apply bots/                       # shows the plan, asks
      botctl apply bots/ --auto-approve        # in CI on merge
      botctl apply --plan plan.json            # exactly what was reviewed, or nothing
    """
    saved = None
    if plan_file is not None:
        if params.get("paths") or params.get("targets"):
            raise click.UsageError(
                "apply --plan takes no PATH or --target: the plan is applied as reviewed"
            )
        saved = read_plan_file(plan_file)
        params["paths"] = (plan_file,)
    elif not auto_approve and not sys.stdin.isatty():
        raise click.UsageError(
            "no terminal to confirm on: pass --auto-approve, or apply a reviewed plan with "
            "`botctl apply --plan FILE` (made by `botctl plan --out FILE`)"
        )
    ws = workspace(params)
    colour = colour_enabled()

    def confirm(p: Plan) -> bool:
        if saved is not None or auto_approve:
            return True
        if click.confirm("\nApply these changes?", default=False):
            return True
        click.echo("Cancelled: nothing was applied.")
        return False

    progress = Progress(live=colour_enabled(sys.stdout))

    def show(p: Plan) -> None:
        click.echo(render_plan(p, "text", colour=colour), nl=False)
        progress.total = len(p.operations)

    outcome = run_async(
        run_apply(ws, saved=saved, show=show, confirm=confirm, on_result=progress.line)
    )
    if outcome is None:
        return EXIT_OK
    progress.finish()
    report = outcome.report
    for note in outcome.not_taken:
        err(f"warning: {note}")
    click.echo(
        f"\nApply {'complete' if report.ok else 'incomplete'}: {report.count('applied')} "
        f"applied, {report.count('failed')} failed, {report.count('not_attempted')} not "
        "attempted."
    )
    if not report.ok:
        err(
            "error: some operations failed (listed above); the state file records what was "
            "applied, so re-running `botctl apply` does only what is left."
        )
        return EXIT_ERROR
    return EXIT_OK


@cli.command()
@config_options
@service_options
@FORMAT
def drift(fmt: str, **params: Any) -> int:
    """Detect changes made outside botctl, pending changes and unmanaged attributes.

    Read-only: sends only reads and never writes the state file. Exit 2 when anything
    changed outside botctl, is pending, or is unmanaged; 0 when in sync.

    \b
    Example (a scheduled CI job):
      botctl drift bots/ --format markdown
    """
    report = run_async(make_drift(workspace(params)))
    click.echo(render_drift(report, fmt, colour=colour_enabled()), nl=False)
    if fmt != "text":
        err(drift_summary(report))
    return EXIT_CHANGES if report.has_drift else EXIT_OK


@cli.command()
@STATE
def unlock(state_path: Path) -> int:
    """Remove a state lock left behind by an apply that died.

    Only when you are sure no apply is running: the lock is what keeps two applies apart.
    """
    holder = break_lock(state_path)
    if holder is None:
        click.echo(f"{state_path} is not locked.")
    else:
        click.echo(f"Removed the lock of {holder.describe()}.")
    return EXIT_OK


def main() -> None:
    cli()


for _command in (schema, export, demo, sandbox):
    cli.add_command(_command)
