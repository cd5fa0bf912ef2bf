"""``botctl plan``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from botctl.cli.ci import errors_as_annotations, report_error, write_comment
from botctl.cli.console import colour_enabled, err, run_async
from botctl.cli.options import (
    CHANGED_SINCE,
    COMMENT_OUT,
    FORMAT,
    REASSERT,
    ConfigGroup,
    ContactGroup,
    SafetyGroup,
    ServiceGroup,
    config_options,
    contact_options,
    group,
    no_state_notice,
    safety_options,
    service_options,
    takes,
    workspace,
)
from botctl.errors import EXIT_CHANGES, EXIT_ERROR, EXIT_OK

if TYPE_CHECKING:
    from botctl.store.crypt import Cipher


@dataclass(frozen=True, kw_only=True)
class PlanOptions:
    config: ConfigGroup = group(ConfigGroup)
    service: ServiceGroup = group(ServiceGroup)
    safety: SafetyGroup = group(SafetyGroup)
    contacts: ContactGroup = group(ContactGroup)
    fmt: str
    reassert: bool
    out: Path | None
    comment_out: Path | None
    detailed_exitcode: bool
    changed_since: str | None


@click.command()
@config_options
@service_options
@safety_options
@contact_options
@FORMAT
@REASSERT
@CHANGED_SINCE
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also save the plan to FILE, for `botctl apply --plan FILE` to apply as reviewed.",
)
@COMMENT_OUT
@click.option(
    "--detailed-exitcode",
    is_flag=True,
    help="Exit 2 when the plan has changes (0 when none, 1 on error); values only "
    "reasserted do not count.",
)
@takes(PlanOptions)
def plan(o: PlanOptions) -> int:
    """Show what apply would change, and how sure botctl is of each current value.

    Confidence: verified (read from the service now), assumed (what botctl last applied,
    from the state file), unknown (neither: the value will be sent).

    \b
    Examples:
      botctl plan bots/
      botctl plan bots/ --format markdown --out plan.json > plan.md   # in a pull request
      botctl plan bots/ --detailed-exitcode                           # exit 2 on changes
      botctl plan bots/ --format github --comment-out plan.md         # in GitHub Actions
      botctl plan bots/ --changed-since origin/main   # only what a pull request changes
    """
    from botctl.pipeline.flows import make_plan
    from botctl.reconcile.diff import missing_error
    from botctl.reconcile.safety import enforce_safety
    from botctl.render import render_plan, render_plan_comment

    fmt, out, comment_out = o.fmt, o.out, o.comment_out
    ws = workspace(
        o.config,
        o.service,
        o.safety,
        o.contacts,
        reassert=o.reassert,
        changed_since=o.changed_since,
    )
    with errors_as_annotations(fmt, "botctl plan"):
        result = run_async(make_plan(ws, saving=out is not None))
        missing = missing_error(result)
        if missing is not None:  # the first thing said, once; the exit code is 1
            report_error(missing, fmt, "botctl plan")
        if result.state_lineage is None:
            err(no_state_notice(ws.state_path))
        click.echo(render_plan(result, fmt, colour=colour_enabled()), nl=False)
        if comment_out is not None:
            write_comment(comment_out, render_plan_comment(result))
        enforce_safety(result, force=ws.force)
        if out is not None:
            from botctl.store.planfile import write_plan_file

            write_plan_file(result, out, cipher=_cipher(result.state_cipher))
            err(f"Plan saved to {out}; apply it with: botctl apply --plan {out}")
    if missing is not None:
        return EXIT_ERROR
    return EXIT_CHANGES if o.detailed_exitcode and result.changed else EXIT_OK


def _cipher(found: object | None) -> Cipher | None:
    from botctl.store.crypt import Cipher

    return found if isinstance(found, Cipher) else None
