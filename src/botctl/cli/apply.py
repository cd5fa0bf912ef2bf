"""``botctl apply``."""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import click

from botctl.cli.console import Progress, colour_enabled, confirm_prompt, err, run_async
from botctl.cli.options import (
    CHANGED_SINCE,
    LOCK_TIMEOUT,
    REASSERT,
    ConfigGroup,
    ContactGroup,
    SafetyGroup,
    ServiceGroup,
    config_options,
    contact_options,
    group,
    limit_watch,
    no_state_notice,
    safety_options,
    service_options,
    takes,
    workspace,
)
from botctl.cli.tests_cmd import JUNIT, write_junit
from botctl.defaults import DEFAULT_DRAIN_TIMEOUT
from botctl.errors import EXIT_ERROR, EXIT_OK, EXIT_SIGNAL_BASE, BotctlError, signal_name
from botctl.lint import READ_BACK

if TYPE_CHECKING:
    from botctl.pipeline.conversations import Gate
    from botctl.plan import Operation, Plan
    from botctl.resources.contacts import Progress as MigrationProgress

NO_TERMINAL = (
    "no terminal to confirm on: pass --auto-approve, or apply a reviewed plan with "
    "`botctl apply --plan FILE` (made by `botctl plan --out FILE`); nothing was applied"
)


@dataclass(frozen=True, kw_only=True)
class ApplyOptions:
    config: ConfigGroup = group(ConfigGroup)
    service: ServiceGroup = group(ServiceGroup)
    safety: SafetyGroup = group(SafetyGroup)
    contacts: ContactGroup = group(ContactGroup)
    plan_file: Path | None
    auto_approve: bool
    lock_timeout: float
    drain_timeout: float
    reassert: bool
    skip_missing: bool
    run_tests: bool
    rollback_on_failure: bool
    junit_file: Path | None
    changed_since: str | None


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
@click.option(
    "--test",
    "run_tests",
    is_flag=True,
    help="After a complete apply, run the conversation tests of the chatbots it changed "
    "(exit 3 when one fails).",
)
@click.option(
    "--rollback-on-failure",
    is_flag=True,
    help="With --test: put back the settings a chatbot had before the apply when its tests "
    "fail (attributes are never rolled back).",
)
@JUNIT
@CHANGED_SINCE
@service_options
@safety_options
@contact_options
@takes(ApplyOptions)
def apply(o: ApplyOptions) -> int:
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
      botctl apply bots/ --changed-since HEAD~1 --auto-approve  # only what the merge changed
      botctl apply bots/ -l stage=staging --test --rollback-on-failure --auto-approve

    With --test, the conversation tests of the chatbots the apply changed run once it is
    complete; with --rollback-on-failure a chatbot whose tests fail gets back the settings
    it had before (as read by the plan, or recorded in the state; values botctl never knew
    are named as not restorable). Exit 3 when a test failed.
    """
    from botctl.pipeline.flows import read_saved_plan, run_apply
    from botctl.reconcile.apply import Stop, StopEvent
    from botctl.reconcile.diff import SKIPPED, missing_error
    from botctl.render import render_plan

    def migration_line(op: Operation, now: MigrationProgress) -> str:
        return f"{op.bot.name}: {now.line(op.subject)}"

    plan_file, auto_approve, drain_timeout = o.plan_file, o.auto_approve, o.drain_timeout
    config = o.config
    run_tests, rollback_on_failure, junit_file = o.run_tests, o.rollback_on_failure, o.junit_file
    if rollback_on_failure and not run_tests:
        raise click.UsageError("--rollback-on-failure needs --test")
    if junit_file is not None and not run_tests:
        raise click.UsageError("--junit needs --test")
    saved = None
    if plan_file is not None and run_tests:
        raise click.UsageError(
            "apply --plan takes no --test: run `botctl test PATH` after it (the tests are "
            "part of the configuration, which a saved plan does not carry)"
        )
    if plan_file is not None:
        chosen = config.selection
        if config.paths or chosen.targets or chosen.selector or chosen.excludes or o.changed_since:
            raise click.UsageError(
                "apply --plan takes no PATH, --target, -l or --exclude (nor --changed-since): "
                "the plan is applied as reviewed"
            )
        config = replace(config, paths=(plan_file,))
    ws = workspace(
        config,
        o.service,
        o.safety,
        o.contacts,
        lock_timeout=o.lock_timeout,
        reassert=o.reassert,
        skip_missing=o.skip_missing,
        changed_since=o.changed_since,
    )
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
    limit_watch().progress = progress  # waits on the rate limit show on its status line
    shown: list[Plan] = []

    def show(p: Plan) -> None:
        missing = missing_error(p, SKIPPED)  # only with --skip-missing: the run goes on
        if missing is not None:
            err(f"error: {missing}")
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
    gate = None
    if run_tests:
        from botctl.pipeline.conversations import test_gate

        gate = test_gate(ws, (), rollback=rollback_on_failure)
    outcome = run_async(
        run_apply(
            ws,
            saved=saved,
            show=show,
            confirm=confirm,
            on_result=progress.line,
            stop=stop,
            on_migration=migrating,
            after_apply=gate,
        ),
        stop=stop,
        unwritten="nothing was applied",
    )
    missing = len(shown[0].missing) if shown else 0
    if outcome is None:
        if declined:
            err("Apply cancelled: nothing was applied.")
            return EXIT_ERROR
        if missing:
            err(_missing_exit(missing))
            return EXIT_ERROR
        if run_tests:
            err("Nothing was applied, so no conversation test ran (`botctl test` runs them).")
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
        if run_tests:
            err("The conversation tests did not run: the apply is not complete.")
        return EXIT_ERROR
    if missing:
        err(_missing_exit(missing))
        return EXIT_ERROR
    if outcome.after is not None:
        return _tested(outcome.after, junit_file)
    return EXIT_OK


def _missing_exit(count: int) -> str:
    """The last line of an apply --skip-missing that left chatbots out (named first)."""
    return f"Exit 1: {count} chatbot(s) missing from the service (named at the start)."


def _tested(gate: Gate, junit_file: Path | None) -> int:
    """Print the tests' report (and the rollback's); the exit code they make."""
    from botctl.render.tests import render_junit, render_rollback_text, render_tests_text

    click.echo("\n" + render_tests_text(gate.tests, heading="Conversation tests:"), nl=False)
    if junit_file is not None:
        write_junit(junit_file, render_junit(gate.tests))
        err(f"JUnit report written to {junit_file}")
    if gate.rollback is not None:
        click.echo("\n" + render_rollback_text(gate.rollback, gate.rolled_back), nl=False)
    elif gate.tests.failed_chatbots():
        err(
            "error: conversation tests failed; the applied settings stay (--rollback-on-failure "
            "would have put the previous ones back)."
        )
    return gate.tests.exit_code
