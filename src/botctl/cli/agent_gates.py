"""``botctl agent``'s gates and stages: the options (``--test``, ``--rollback-on-failure``,
``--stages``, ``--soak``, ``--yield-lease``), checked together, and the settings they make
(``agent.gating.GateSettings``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Any, TypeVar

import click

from botctl.cli.drift import Duration
from botctl.errors import BotctlError

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

    from botctl.agent.gating import GateSettings, Gating
    from botctl.pipeline.promote import Stage

F = TypeVar("F", bound=Callable[..., Any])


def _stages(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[Stage, ...]:
    if value is None:
        return ()
    from botctl.agent.stages import parse_stages

    try:
        return parse_stages(value)
    except BotctlError as exc:
        raise click.BadParameter(str(exc).removeprefix(f"--stages {value!r}: ")) from None


def gate_options(command: F) -> F:
    """The options, as decorators on the agent's command."""
    for option in reversed(
        [
            click.option(
                "--test",
                is_flag=True,
                help="After each sync, run the conversation tests of the chatbots it changed "
                "(and of those whose tests have not run at their revision), recording each "
                "outcome in the state's rollout record as apply --test does; needs --auto-apply.",
            ),
            click.option(
                "--rollback-on-failure",
                is_flag=True,
                help="With --test: put a chatbot whose tests failed back as it was (as apply "
                "--rollback-on-failure). Either way a revision whose tests failed on a chatbot "
                "is not written to it again until its configuration or tests change.",
            ),
            click.option(
                "--stages",
                callback=_stages,
                metavar="SELECTOR,SELECTOR,...",
                help="Stages, in order, each one label requirement (e.g. "
                "stage=staging,stage=production): a revision reaches a stage only once every "
                "chatbot of the stage before passed its tests there, paired as botctl promote "
                "pairs them. Implies --test.",
            ),
            click.option(
                "--soak",
                type=Duration(),
                default=None,
                metavar="DURATION",
                help="With --stages: how long a stage must have passed before the next one "
                "receives the revision.",
            ),
            click.option(
                "--yield-lease",
                is_flag=True,
                help="Hold the state's lease only during a cycle, so that CI's apply and "
                "promote (with --lock-timeout) take the state lock between cycles; with "
                "replicas, whichever takes the lease runs the next cycle.",
            ),
        ]
    ):
        command = option(command)
    return command


def gate_settings(o: Any) -> GateSettings:
    """The ``GateSettings`` of the agent's options ``o`` (``AgentOptions``); a
    ``UsageError`` for a combination that cannot work."""
    from botctl.agent.gating import GateSettings

    auto_apply, rollback_on_failure, stages = o.auto_apply, o.rollback_on_failure, o.stages
    soak: timedelta | None = o.soak
    test = o.test or bool(stages)
    if soak is not None and not stages:
        raise click.UsageError("--soak is the wait between stages: add --stages")
    if rollback_on_failure and not test:
        raise click.UsageError("--rollback-on-failure undoes what --test finds failing: add --test")
    if test and not auto_apply:
        what = "--stages" if stages else "--test"
        raise click.UsageError(f"{what} gates what the agent applies: add --auto-apply")
    seconds = soak.total_seconds() if soak is not None else 0.0
    return GateSettings(test, rollback_on_failure, tuple(stages), seconds)


def gating_for(settings: GateSettings, registry: CollectorRegistry) -> Gating:
    """The agent's ``Gating`` of ``settings``, its metrics in ``registry``."""
    from botctl.agent.gating import Gating

    return Gating(settings, registry)
