"""``botctl conversations pull``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from botctl.cli.console import run_async
from botctl.cli.drift import Duration
from botctl.cli.options import (
    ALLOW_UNKNOWN_MODELS,
    CONFIG,
    FoundProject,
    ServiceGroup,
    group,
    service_options,
    takes,
    whole_configuration,
    workspace,
)
from botctl.defaults import (
    DEFAULT_DUPLICATE_SIMILARITY,
    DEFAULT_MIN_SIMILARITY,
    DEFAULT_PULL_MAX,
    DEFAULT_PULL_SINCE,
)

if TYPE_CHECKING:
    from botctl.conversation.redact import Rule
    from botctl.pipeline.pull import PullReport


@click.group()
def conversations() -> None:
    """The chatbots' stored conversations (contract 4.6)."""


def _rules(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[Rule, ...]:
    from botctl.conversation.redact import parse_rule

    try:
        return tuple(parse_rule(text) for text in value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _day(ctx: click.Context, param: click.Parameter, value: str | None) -> date | None:
    if value is None:
        return None
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: give a date, YYYY-MM-DD", ctx=ctx, param=param
        ) from None


def _source(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    for source in value:
        if "," in source or not source.strip():
            raise click.BadParameter(
                f"{source!r}: one source per --source (the filter is a comma-separated list)",
                ctx=ctx,
                param=param,
            )
    return value


@dataclass(frozen=True, kw_only=True)
class PullCommandOptions:
    chatbots: tuple[str, ...]
    config_paths: tuple[Path, ...]
    config_file: FoundProject
    allow_unknown_models: bool
    service: ServiceGroup = group(ServiceGroup)
    since: str
    until: date | None
    sources: tuple[str, ...]
    most: int
    out: Path
    min_similarity: float
    duplicate_similarity: float
    redact: tuple[Rule, ...]
    no_contact_names: bool
    overwrite: bool


@conversations.command("pull")
@click.argument("chatbots", nargs=-1, required=True, metavar="CHATBOT...")
@click.option(
    "-p",
    "--path",
    "config_paths",
    multiple=True,
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="The configuration (files or directories; repeatable) [default: botctl.yaml's paths].",
)
@CONFIG
@ALLOW_UNKNOWN_MODELS
@service_options
@click.option(
    "--since",
    default=DEFAULT_PULL_SINCE,
    show_default=True,
    metavar="7d|2w|DATE",
    help="The first day of conversations: a duration before now (7d, 2w, 36h; the UTC day "
    "it falls on) or a date, YYYY-MM-DD.",
)
@click.option("--until", callback=_day, metavar="DATE", help="The last day [default: today].")
@click.option(
    "--source",
    "sources",
    multiple=True,
    callback=_source,
    metavar="SOURCE",
    help="Only conversations from this source (repeatable): API, Playground, 'Action "
    "preview', 'Widget or Iframe', or a channel's name as the service writes it.",
)
@click.option(
    "--max",
    "most",
    type=click.IntRange(1, 10_000),
    default=DEFAULT_PULL_MAX,
    show_default=True,
    metavar="N",
    help="Most tests written per chatbot (the newest conversations first).",
)
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path, file_okay=False),
    metavar="DIR",
    help="Where the test documents go (one file per test, named after it).",
)
@click.option(
    "--min-similarity",
    type=click.FloatRange(0, 1),
    default=DEFAULT_MIN_SIMILARITY,
    show_default=True,
    help="Written as each expectation's minSimilarity: how like the recorded answer a new "
    "one must be (0 to 1; README, Conversation tests).",
)
@click.option(
    "--duplicate-similarity",
    type=click.FloatRange(0, 1),
    default=DEFAULT_DUPLICATE_SIMILARITY,
    show_default=True,
    help="A conversation whose questions are at least this similar to those of one already "
    "taken is a near-duplicate, and skipped.",
)
@click.option(
    "--redact",
    multiple=True,
    callback=_rules,
    metavar="LABEL=REGEX",
    help="Also redact what REGEX finds, written [LABEL] (repeatable; added to botctl.yaml's "
    "redact).",
)
@click.option(
    "--no-contact-names",
    is_flag=True,
    help="Do not read the chatbots' contacts: their names and values are not redacted "
    "(only the patterns are). Without it, a contact list that cannot be read is an error.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace a test file that exists (by default it is kept as it is: it may be edited).",
)
@takes(PullCommandOptions)
def pull(o: PullCommandOptions) -> int:
    """Draw conversation tests from the chatbots' real conversations.

    Reads each CHATBOT's stored conversations of the period (CHATBOT: a metadata.name of the
    configuration, or a glob), redacts personal data (e-mail addresses, telephone numbers,
    payment ids, and the names and values the service holds for the chatbot's contacts;
    more with --redact), drops near-duplicate questions, and writes one ConversationTest
    document per conversation into --out: its questions, each recorded answer as
    expect.similarTo with minSimilarity, and where it came from (spec.provenance). Review
    them, edit them, commit them; `botctl test --baseline` then compares two chatbots on
    them.

    Writes all files or none; never replaces a file without --overwrite.

    \b
    Examples:
      botctl conversations pull support --since 7d --out bots/tests/pulled/
      botctl conversations pull 'support*' --since 2025-05-01 --source 'Widget or Iframe' \\
        --max 20 --redact 'order-id=A-\\d{6}' --out bots/tests/pulled/
    """
    from botctl.conversation.pulled import PullRules
    from botctl.pipeline.pull import PullOptions, pull_conversations

    now = datetime.now(UTC)
    since = _since(o.since, now)
    until = o.until or now.date()
    if since > until:
        raise click.UsageError(f"--since {since} is after --until {until}")
    config = whole_configuration(o.config_paths, o.config_file, o.allow_unknown_models)
    ws = workspace(config, o.service)
    options = PullOptions(
        chatbots=o.chatbots,
        since=since,
        until=until,
        sources=o.sources,
        out=o.out,
        rules=PullRules(o.min_similarity, o.duplicate_similarity, o.most),
        redact=(*_project_rules(o.config_file), *o.redact),
        contact_names=not o.no_contact_names,
        overwrite=o.overwrite,
    )
    report = run_async(pull_conversations(ws, options))
    click.echo(pull_summary(report, options.since, options.until), nl=False)
    return 0


def _since(text: str, now: datetime) -> date:
    """A date, or a duration before now (7d, 2w, 36h: the UTC day it falls on)."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        pass
    try:
        back: timedelta = Duration().convert(text, None, None)
    except click.BadParameter:
        raise click.BadParameter(
            f"{text!r}: give a duration before now (7d, 2w) or a date (2025-05-01)",
            param_hint="'--since'",
        ) from None
    return (now - back).date()


def _project_rules(found: FoundProject) -> tuple[Rule, ...]:
    import re

    from botctl.conversation.redact import Rule

    project = found.get()
    if project is None:
        return ()
    return tuple(Rule(p.label, re.compile(p.pattern)) for p in project.settings.redact)


def pull_summary(report: PullReport, since: date, until: date) -> str:
    """Per chatbot what was read, written, skipped and redacted; then the files."""
    from botctl.annotations import inert

    lines = []
    for found in report.bots:
        harvest = found.harvest
        skipped = sum(harvest.skipped.values())
        why = ", ".join(f"{n} {reason}" for reason, n in harvest.skipped.most_common())
        redacted = ", ".join(f"{n} [{label}]" for label, n in sorted(found.redacted.items()))
        lines.append(
            f"{found.bot.name} ({found.bot.chatbot_id}): {found.read} conversation(s) from "
            f"{since} to {until}, {len(harvest.tests)} test(s), {skipped} skipped"
            + (f" ({why})" if why else "")
            + f"; redacted: {redacted or 'nothing'}"
        )
        left = ", ".join(f"{n} {reason}" for reason, n in harvest.left_out.most_common())
        if left:
            lines.append(f"  messages left out: {left}")
    if report.written:
        lines.append(f"Wrote {len(report.written)} test(s): review them, then commit:")
        lines += [f"  {path}" for path in report.written]
    if report.kept:
        lines.append(
            f"Kept {len(report.kept)} file(s) that exist as they are (--overwrite replaces them):"
        )
        lines += [f"  {path}" for path in report.kept]
    if not report.written and not report.kept:
        lines.append("No test written: no conversation gave one.")
    return inert("\n".join(lines)) + "\n"
