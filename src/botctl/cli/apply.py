"""``botctl apply``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from botctl.cli.console import Progress, colour_enabled, err, run_async
from botctl.cli.options import (
    LOCK_TIMEOUT,
    REASSERT,
    config_options,
    no_state_notice,
    safety_options,
    service_options,
    workspace,
)
from botctl.errors import EXIT_ERROR, EXIT_OK
from botctl.lint import READ_BACK

if TYPE_CHECKING:
    from botctl.plan import Plan


@click.command()
@config_options
@click.option(
    "--plan",
    "plan_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Apply this saved plan exactly as reviewed; refused if the service or state moved.",
)
@click.option("--auto-approve", is_flag=True, help="Apply without asking for confirmation.")
@LOCK_TIMEOUT
@REASSERT
@click.option(
    "--skip-missing",
    is_flag=True,
    help="Apply the other chatbots when some are missing from the service (still exit 1).",
)
@service_options
@safety_options
def apply(plan_file: Path | None, auto_approve: bool, **params: Any) -> int:
    """Apply the configuration (or a saved plan) to the service.

    Shows the plan and asks for confirmation on a terminal; without a terminal it refuses
    unless --auto-approve or --plan. Each operation is printed as it completes; state records
    every applied operation, so a re-run does only what is left, and every value the service
    was read holding as configured (the baseline drift compares against).

    \b
    Examples:
      botctl apply bots/                       # shows the plan, asks
      botctl apply bots/ --auto-approve        # in CI on merge
      botctl apply --plan plan.json            # exactly what was reviewed, or nothing
      botctl apply bots/ --reassert --auto-approve   # nightly: heal write-only settings
    """
    from botctl.pipeline.flows import run_apply
    from botctl.reconcile.diff import missing_error
    from botctl.render import render_plan
    from botctl.store.planfile import read_plan_file

    saved = None
    if plan_file is not None:
        if any(params.get(p) for p in ("paths", "targets", "selector", "excludes")):
            raise click.UsageError(
                "apply --plan takes no PATH, --target, -l or --exclude: the plan is applied "
                "as reviewed"
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
    shown: list[Plan] = []

    def show(p: Plan) -> None:
        if p.state_lineage is None:
            err(no_state_notice(ws.state_path))
        click.echo(render_plan(p, "text", colour=colour), nl=False)
        progress.total = len(p.operations)
        shown.append(p)

    outcome = run_async(
        run_apply(ws, saved=saved, show=show, confirm=confirm, on_result=progress.line)
    )
    missing = missing_error(shown[0]) if shown else None
    if outcome is None:
        if missing is not None:
            raise missing
        return EXIT_OK
    progress.finish()
    report = outcome.report
    if READ_BACK.code not in ws.disabled_warnings:
        for note in outcome.not_taken:
            err(f"warning[{READ_BACK.code}]: {note}")
    click.echo(
        f"\nApply {'complete' if report.ok else 'incomplete'}: {report.count('applied')} "
        f"applied, {report.count('failed')} failed, {report.count('not_attempted')} not "
        "attempted."
    )
    if outcome.state_error is not None:
        err(
            f"error: {outcome.state_error}: what was applied since its last write is not "
            "recorded. The service holds it: once the state can be written, `botctl apply` "
            "reads the service and sends what is left, and again what it cannot read back "
            "(`botctl refresh` records what the service holds as declared)."
        )
    elif not report.ok:
        err(
            "error: some operations failed (listed above); the state file records what was "
            "applied, so re-running `botctl apply` does only what is left."
        )
    if outcome.state_error is not None or not report.ok:
        return EXIT_ERROR
    if missing is not None:
        raise missing
    return EXIT_OK
