"""``botctl promote``."""

from __future__ import annotations

from typing import Any

import click

from botctl.cli.apply import ApplyOptions, apply
from botctl.cli.console import err
from botctl.cli.options import build, forwards, workspace
from botctl.errors import BotctlError

_NOT_TAKEN = ("plan_file", "targets", "selector", "excludes")


def _stage(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, tuple[Any, ...]]:
    """A stage's label selector, as given and parsed (a typo is a usage error at once)."""
    from botctl.config.selection import SelectorError, parse_selector

    try:
        return value, parse_selector(value)
    except SelectorError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


@click.command(
    params=[p for p in apply.params if p.name not in _NOT_TAKEN],
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--from",
    "from_selector",
    required=True,
    metavar="SELECTOR",
    callback=_stage,
    help="The stage promoted from, as a label selector (e.g. stage=staging).",
)
@click.option(
    "--to",
    "to_selector",
    required=True,
    metavar="SELECTOR",
    callback=_stage,
    help="The stage promoted to, as a label selector (e.g. stage=production).",
)
@click.pass_context
@forwards(ApplyOptions)
def promote(
    ctx: click.Context,
    /,
    from_selector: tuple[str, tuple[Any, ...]],
    to_selector: tuple[str, tuple[Any, ...]],
    **params: Any,
) -> int:
    """Apply the configuration to the chatbots of --to, once those of --from run it and pass
    their conversation tests.

    Refuses (exit 1, nothing applied) unless every chatbot --from selects was last applied
    at the configuration's current revision by `botctl apply --test` and its tests passed
    there (recorded in the state). Then it is `botctl apply -l TO` with the options given.

    \b
    The staged rollout in CI:
      botctl apply bots/ -l stage=staging --test --rollback-on-failure --auto-approve
      botctl promote bots/ --from stage=staging --to stage=production --auto-approve
    """
    from botctl.pipeline.promote import promotion_problems

    (source_text, source), (_, target) = from_selector, to_selector
    # apply's options, built as apply builds them: a renamed one is an error, never False.
    stage = build(ApplyOptions, {**params, "plan_file": None, **_only(source)})
    ws = workspace(
        stage.config,
        stage.service,
        stage.safety,
        stage.contacts,
        lock_timeout=stage.lock_timeout,
        reassert=stage.reassert,
        skip_missing=stage.skip_missing,
    )
    problems, ready = promotion_problems(ws)
    if problems:
        raise BotctlError(
            f"not promoted: the chatbots of {source_text} are not ready:\n  "
            + "\n  ".join(problems)
            + f"\nNothing was applied. `botctl apply -l {source_text} --test` records a stage's "
            "tests (fix what failed first)."
        )
    err(f"{source_text}: {', '.join(ready)} run this revision and passed its tests.")
    result: int = ctx.invoke(apply, plan_file=None, **_only(target), **params)
    return result


def _only(selector: tuple[Any, ...]) -> dict[str, Any]:
    """The selection of one stage: its label selector, no --target or --exclude."""
    return {"selector": selector, "targets": (), "excludes": ()}
