"""``botctl apply``."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from botctl.cli.console import Progress, colour_enabled, confirm_prompt, err, run_async
from botctl.cli.options import (
    LOCK_TIMEOUT,
    REASSERT,
    config_options,
    contact_options,
    no_state_notice,
    safety_options,
    service_options,
    workspace,
)
from botctl.defaults import DEFAULT_DRAIN_TIMEOUT
from botctl.errors import EXIT_ERROR, EXIT_OK, EXIT_SIGNAL_BASE, BotctlError, signal_name
from botctl.lint import READ_BACK

if TYPE_CHECKING:
    from botctl.plan import Operation, Plan
    from botctl.resources.contacts import Progress as MigrationProgress

NO_TERMINAL = (
    "no terminal to confirm on: pass --auto-approve, or apply a reviewed plan with "
    "`botctl apply --plan FILE` (made by `botctl plan --out FILE`); nothing was applied"
)


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
@click.option(
    "--drain-timeout",
    type=click.FloatRange(0),
    default=DEFAULT_DRAIN_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="On SIGINT or SIGTERM, wait this long for the requests in flight before abandoning "
    "them (a second signal abandons them at once).",
)
@REASSERT
@click.option(
    "--skip-missing",
    is_flag=True,
    help="Apply the other chatbots when some are missing from the service (still exit 1).",
)
@service_options
@safety_options
@contact_options
def apply(plan_file: Path | None, auto_approve: bool, drain_timeout: float, **params: Any) -> int:
    """Apply the configuration (or a saved plan) to the service.

    Shows the plan and asks for confirmation on a terminal; without a terminal it refuses to
    apply changes unless --auto-approve or --plan (a plan without changes is fine). Each
    operation is printed as it completes; state records every applied operation, so a re-run
    does only what is left, and every value the service was read holding as configured (the
    baseline drift compares against).

    On SIGINT or SIGTERM it starts no more operations, waits up to --drain-timeout for those
    in flight, records what finished, prints the summary and exits 130 or 143.

    \b
    Examples:
      botctl apply bots/                       # shows the plan, asks
      botctl apply bots/ --auto-approve        # in CI on merge
      botctl apply --plan plan.json            # exactly what was reviewed, or nothing
      botctl apply bots/ --reassert --auto-approve   # nightly: heal write-only settings
    """
    from botctl.pipeline.flows import read_saved_plan, run_apply
    from botctl.reconcile.apply import Stop, StopEvent
    from botctl.reconcile.diff import missing_error
    from botctl.render import render_plan

    def migration_line(op: Operation, now: MigrationProgress) -> str:
        return f"{op.bot.name}: {now.line(op.subject)}"

    saved = None
    if plan_file is not None:
        if any(params.get(p) for p in ("paths", "targets", "selector", "excludes")):
            raise click.UsageError(
                "apply --plan takes no PATH, --target, -l or --exclude: the plan is applied "
                "as reviewed"
            )
        params["paths"] = (plan_file,)
    ws = workspace(params)
    if plan_file is not None:
        saved = read_saved_plan(plan_file, ws.state_path)
    colour = colour_enabled()
    declined: list[bool] = []

    def confirm(p: Plan) -> bool:
        if saved is not None or auto_approve:
            return True
        # Asked only now: a plan without changes needs no confirmation, terminal or not.
        if not sys.stdin.isatty():
            raise BotctlError(NO_TERMINAL)
        click.echo()
        if confirm_prompt("Apply these changes?", default=False):
            return True
        declined.append(True)
        return False

    progress = Progress(live=colour_enabled(sys.stdout))
    shown: list[Plan] = []

    def show(p: Plan) -> None:
        if p.state_lineage is None:
            err(no_state_notice(ws.state_path))
        click.echo(render_plan(p, "text", colour=colour), nl=False)
        progress.total = len(p.operations)
        shown.append(p)

    def stopping(event: StopEvent, in_flight: int) -> None:
        progress.finish()
        if event == "stopping":
            assert stop.reason is not None
            err(
                f"\n{signal_name(stop.reason)}: stopping; no operation starts from now on. "
                f"Waiting up to {drain_timeout:g} s for the {in_flight} in flight (signal again "
                "to stop at once)."
            )
        else:
            err(
                f"Abandoning the {in_flight} operation(s) in flight: each may have been "
                "applied; the state records what finished."
            )

    def migrating(op: Operation, now: MigrationProgress) -> None:
        progress.note(migration_line(op, now))

    stop = Stop(drain_timeout, stopping)
    outcome = run_async(
        run_apply(
            ws,
            saved=saved,
            show=show,
            confirm=confirm,
            on_result=progress.line,
            stop=stop,
            on_migration=migrating,
        ),
        stop=stop,
        unwritten="nothing was applied",
    )
    missing = missing_error(shown[0]) if shown else None
    if outcome is None:
        if declined:
            err("Apply cancelled: nothing was applied.")
            return EXIT_ERROR
        if missing is not None:
            raise missing
        return EXIT_OK
    progress.finish()
    report = outcome.report
    if READ_BACK.code not in ws.disabled_warnings:
        for note in outcome.not_taken:
            err(f"warning[{READ_BACK.code}]: {note}")
    if outcome.interrupted is not None:
        how = f"interrupted by {signal_name(outcome.interrupted)}"
    else:
        how = "complete" if report.ok else "incomplete"
    click.echo(
        f"\nApply {how}: {report.count('applied')} applied, {report.count('failed')} failed, "
        f"{report.count('not_attempted')} not attempted."
    )
    if outcome.interrupted is not None:
        if outcome.state_error is None:
            err(
                "error: interrupted; the state records what was applied, so re-running "
                "`botctl apply` does only what is left."
            )
        else:
            err(
                f"error: interrupted, and {outcome.state_error}: what was applied since its "
                "last write is not recorded; `botctl apply` reads the service and sends what "
                "is left once the state can be written."
            )
        return EXIT_SIGNAL_BASE + outcome.interrupted
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
