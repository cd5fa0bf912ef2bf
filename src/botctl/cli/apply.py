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
    from collections.abc import Callable

    from botctl.pipeline.conversations import Verdict
    from botctl.pipeline.outcome import Outcome
    from botctl.pipeline.reconciler import Gate
    from botctl.pipeline.workspace import Workspace
    from botctl.plan import Operation, Plan
    from botctl.reconcile.apply import OpResult, StopEvent
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
    return applied(o)


def applied(o: ApplyOptions, *, wrap: Callable[[Gate | None], Gate] | None = None) -> int:
    """``apply``'s work, for ``apply`` and ``promote``: ``wrap`` puts promote's gate around
    apply's own (``--test``'s, or none)."""
    from botctl.pipeline.reconciler import Reconciler

    _check_usage(o)
    ws = _workspace_of(o)
    saved = None
    if o.plan_file is not None:
        from botctl.pipeline.flows import read_saved_plan

        saved = read_saved_plan(o.plan_file, ws.state_path)
    driver = _Terminal(ws, auto_approve=o.auto_approve or saved is not None)
    driver.stop.drain_timeout = o.drain_timeout
    gate: Gate | None = None
    if o.run_tests:
        from botctl.pipeline.conversations import TestGate

        gate = TestGate(ws, (), rollback=o.rollback_on_failure)
    if wrap is not None:
        gate = wrap(gate)
    reconciler = Reconciler(ws, driver, gate=gate, stop=driver.stop)
    outcome = run_async(
        reconciler.reconcile(saved=saved), stop=driver.stop, unwritten="nothing was applied"
    )
    return _concluded(outcome, driver, ws, o)


def _check_usage(o: ApplyOptions) -> None:
    """Options that do not go together, said before anything is read."""
    if o.rollback_on_failure and not o.run_tests:
        raise click.UsageError("--rollback-on-failure needs --test")
    if o.junit_file is not None and not o.run_tests:
        raise click.UsageError("--junit needs --test")
    if o.plan_file is not None and o.run_tests:
        raise click.UsageError(
            "apply --plan takes no --test: run `botctl test PATH` after it (the tests are "
            "part of the configuration, which a saved plan does not carry)"
        )
    chosen = o.config.selection
    given = o.config.paths or chosen.targets or chosen.selector or chosen.excludes
    if o.plan_file is not None and (given or o.changed_since):
        raise click.UsageError(
            "apply --plan takes no PATH, --target, -l or --exclude (nor --changed-since): "
            "the plan is applied as reviewed"
        )


def _workspace_of(o: ApplyOptions) -> Workspace:
    config = o.config
    if o.plan_file is not None:
        config = replace(config, paths=(o.plan_file,))
    return workspace(
        config,
        o.service,
        o.safety,
        o.contacts,
        lock_timeout=o.lock_timeout,
        reassert=o.reassert,
        skip_missing=o.skip_missing,
        changed_since=o.changed_since,
    )


class _Terminal:
    """``botctl apply``'s driver of the reconciler (``pipeline.reconciler.Driver``): the plan
    printed, confirmed on a terminal, a line per operation as it completes, a rename's
    progress on the status line, and signals that stop the apply gracefully (``stop``)."""

    def __init__(self, ws: Workspace, *, auto_approve: bool) -> None:
        from botctl.reconcile.apply import Stop

        self.ws = ws
        self.auto_approve = auto_approve
        self.colour = colour_enabled()
        self.declined = False
        self.progress = Progress(live=colour_enabled(sys.stdout))
        limit_watch().progress = self.progress  # waits on the rate limit show on its line
        self.stop = Stop(on_event=self.stopping)

    def show(self, plan: Plan) -> None:
        from botctl.reconcile.diff import SKIPPED, missing_error
        from botctl.render import render_plan

        missing = missing_error(plan, SKIPPED)  # only with --skip-missing: the run goes on
        if missing is not None:
            err(f"error: {missing}")
        if plan.state_lineage is None:
            err(no_state_notice(self.ws.state_path))
        click.echo(render_plan(plan, "text", colour=self.colour), nl=False)
        self.progress.total = len(plan.operations)

    def confirm(self, plan: Plan) -> bool:
        if self.auto_approve:
            return True
        # Asked only now: a plan without changes needs no confirmation, terminal or not.
        if not sys.stdin.isatty():
            raise BotctlError(NO_TERMINAL)
        click.echo()
        if confirm_prompt("Apply these changes?", default=False):
            return True
        self.declined = True
        return False

    def on_result(self, result: OpResult) -> None:
        self.progress.line(result)

    def on_migration(self, op: Operation, now: MigrationProgress) -> None:
        self.progress.note(f"{op.bot.name}: {now.line(op.subject)}")

    def stopping(self, event: StopEvent, in_flight: int) -> None:
        self.progress.finish()
        if event == "stopping":
            assert self.stop.reason is not None
            err(
                f"\n{signal_name(self.stop.reason)}: stopping; no operation starts from now "
                f"on. Waiting up to {self.stop.drain_timeout:g} s for the {in_flight} in "
                "flight (signal again to stop at once)."
            )
        else:
            err(
                f"Abandoning the {in_flight} operation(s) in flight: each may have been "
                "applied; the state records what finished."
            )


def _concluded(outcome: Outcome, driver: _Terminal, ws: Workspace, o: ApplyOptions) -> int:
    """What the outcome says on stdout and stderr; the exit code."""
    missing = len(outcome.plan.missing)
    if outcome.reason == "Declined":
        err("Apply cancelled: nothing was applied.")
        return EXIT_ERROR
    if outcome.reason == "Held":
        err(f"error: {outcome.held}\nNothing was applied.")
        return EXIT_ERROR
    if outcome.reason == "NothingToDo" and not o.run_tests:
        if missing:
            err(_missing_exit(missing))
            return EXIT_ERROR
        return EXIT_OK
    driver.progress.finish()
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
        return _interrupted(outcome)
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
        if o.run_tests:
            err("The conversation tests did not run: the apply is not complete.")
        return EXIT_ERROR
    if missing:
        err(_missing_exit(missing))
        return EXIT_ERROR
    if outcome.verdict is not None:
        return _tested(outcome.verdict, o.junit_file)
    return EXIT_OK


def _interrupted(outcome: Outcome) -> int:
    assert outcome.interrupted is not None
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


def _missing_exit(count: int) -> str:
    """The last line of an apply --skip-missing that left chatbots out (named first)."""
    return f"Exit 1: {count} chatbot(s) missing from the service (named at the start)."


def _tested(gate: Verdict, junit_file: Path | None) -> int:
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
