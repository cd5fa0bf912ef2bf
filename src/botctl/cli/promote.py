"""``botctl promote``."""

from __future__ import annotations

import copy
from typing import TYPE_CHECKING, Any

import click

from botctl.cli.apply import ApplyOptions, applied, apply
from botctl.cli.console import err
from botctl.cli.options import build, forwards, workspace
from botctl.cli.tests_cmd import stage_selector
from botctl.errors import BotctlError

if TYPE_CHECKING:
    from botctl.pipeline.promote import Stage

_NOT_TAKEN = ("plan_file", "selector")  # --to is the selector; --target, --exclude narrow it


# --target and --exclude narrow the stage promoted to (apply's -l TO), never --from.
_NARROWING_HELP = {
    "targets": "Promote only the chatbots of --to whose metadata.name matches (shell-style '*', "
    "'?'; repeatable).",
    "excludes": "Leave the chatbots of --to whose metadata.name matches out of the promotion, "
    "and out of its pairing (repeatable).",
}


def _taken(param: click.Parameter) -> click.Parameter:
    """apply's option as promote takes it (--target and --exclude: said of --to)."""
    if param.name in _NARROWING_HELP and isinstance(param, click.Option):
        param = copy.copy(param)
        param.help = _NARROWING_HELP[str(param.name)]
    return param


@click.command(
    params=[_taken(p) for p in apply.params if p.name not in _NOT_TAKEN],
    context_settings={"help_option_names": ["-h", "--help"]},
)
@click.option(
    "--from",
    "source",
    required=True,
    metavar="SELECTOR",
    callback=stage_selector,
    help="The stage promoted from, as a label selector (e.g. stage=staging).",
)
@click.option(
    "--to",
    "target",
    required=True,
    metavar="SELECTOR",
    callback=stage_selector,
    help="The stage promoted to, as a label selector (e.g. stage=production); --target and "
    "--exclude narrow it.",
)
@forwards(ApplyOptions)
def promote(source: Stage, target: Stage, **params: Any) -> int:
    """Apply the configuration to the chatbots of --to, once their counterparts in --from run
    it and pass their conversation tests.

    A chatbot of --to is promoted with its counterpart: the one chatbot of --from whose labels
    are the same apart from the stage keys, the label keys both selectors name with different
    requirements (stage in --from stage=staging --to stage=production; app=support on both
    sides is not one).

    \b
    Refuses (exit 1, nothing applied, every reason at once) when:
      --from or --to selects no chatbot, or a chatbot is in both;
      no label key tells the stages apart;
      a chatbot of --to has no counterpart, or more than one (give its stage
        chatbot the same labels, or leave it out with --exclude NAME);
      a chatbot of --from (every one: to promote part of a stage, add the same
        requirement to both selectors, e.g. app=support) was not last applied
        at the configuration's current revision by `botctl apply --test`, or
        its tests did not pass there.
    Then it is `botctl apply -l TO` with the options given (--target and --exclude
    narrow --to only).

    \b
    The staged rollout in CI:
      botctl apply bots/ -l stage=staging --test --rollback-on-failure --auto-approve
      botctl promote bots/ --from stage=staging --to stage=production --auto-approve
    """
    from botctl.pipeline.promote import PromotionGate, promotion

    targets, excludes = params["targets"], params["excludes"]
    # apply's options, built as apply builds them: a renamed one is an error, never False. The
    # workspace holds the whole configuration: the stages are selected by the check.
    whole = {"selector": (), "targets": (), "excludes": ()}
    options = build(ApplyOptions, {**params, "plan_file": None, **whole})
    ws = workspace(
        options.config,
        options.service,
        options.safety,
        options.contacts,
        lock_timeout=options.lock_timeout,
        reassert=options.reassert,
        skip_missing=options.skip_missing,
    )
    found = promotion(ws, source, target, targets, excludes)
    if found.problems:
        hints = ["Nothing was applied."]
        if found.pairing.unpaired:
            keys = ", ".join(map(repr, sorted(found.pairing.keys)))
            hints.append(
                "A chatbot of --to is promoted only with exactly one counterpart in --from, the "
                f"chatbot whose labels are the same apart from {keys}: give it one stage "
                "chatbot with the same other labels (and tell stage chatbots apart by a label), "
                "or leave it out with "
                + " ".join(f"--exclude {_quoted(name)}" for name in found.pairing.unpaired)
                + "."
            )
        if found.not_ready:
            hints.append(
                f"`botctl apply -l {_quoted(source.text)} --test` records a stage's tests (fix "
                "what failed first)."
            )
        raise BotctlError(
            f"not promoted from {source.text} to {target.text}:\n  "
            + "\n  ".join(found.problems)
            + "\n"
            + "\n".join(hints)
        )
    err(f"{source.text}: {', '.join(found.ready)} run this revision and passed its tests.")
    err(f"{target.text}: " + ", ".join(f"{t.name} <- {f.name}" for t, f in found.pairing.pairs))
    # apply -l TO, the readiness checked again once it holds the state's lock (another run
    # may record a failed test of --from while it waits for it: then nothing is sent).
    chosen = build(ApplyOptions, {**params, "plan_file": None, "selector": target.requirements})
    return applied(chosen, wrap=lambda inner: PromotionGate(found, inner))


def _quoted(text: str) -> str:
    """A selector as one shell word."""
    import shlex

    return shlex.quote(text)
