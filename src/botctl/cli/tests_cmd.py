"""``botctl test``."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import click

from botctl.cli.ci import errors_as_annotations, write_comment
from botctl.cli.console import err, run_async
from botctl.cli.options import (
    ConfigGroup,
    ServiceGroup,
    config_options,
    group,
    service_options,
    takes,
    workspace,
)

if TYPE_CHECKING:
    from botctl.pipeline.promote import Stage


def stage_selector(ctx: click.Context, param: click.Parameter, value: str | None) -> Stage | None:
    """A stage's label selector, as given and parsed (a typo is a usage error at once)."""
    from botctl.config.selection import SelectorError, parse_selector
    from botctl.pipeline.promote import Stage

    if value is None:
        return None
    try:
        return Stage(value, parse_selector(value))
    except SelectorError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


TEST_NAMES = click.option(
    "--test",
    "test_names",
    multiple=True,
    metavar="NAME",
    help="Run only the conversation tests of this name (a glob; repeatable).",
)
JUNIT = click.option(
    "--junit",
    "junit_file",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Also write the results as JUnit XML to FILE (for GitHub and GitLab test reports).",
)


def write_junit(path: Path, text: str) -> None:
    from botctl.errors import BotctlError
    from botctl.store.files import write_atomically

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomically(path, text)
    except OSError as exc:
        raise BotctlError(f"cannot write the JUnit report to {path}: {exc.strerror}") from None


@dataclass(frozen=True, kw_only=True)
class TestOptions:
    __test__ = False  # not a test class (pytest collects names starting with Test)
    config: ConfigGroup = group(ConfigGroup)
    service: ServiceGroup = group(ServiceGroup)
    fmt: str
    test_names: tuple[str, ...]
    junit_file: Path | None
    comment_out: Path | None
    baseline: Stage | None


@click.command("test")
@config_options
@service_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "github"]),
    default="text",
    show_default=True,
    help="markdown: a table of the cases for a comment or job summary; github: annotations "
    "(each failed test on its file and line) and a folded log for GitHub Actions.",
)
@TEST_NAMES
@JUNIT
@click.option(
    "--comment-out",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Also write the Markdown report as a pull-request or issue comment: it starts with "
    "the hidden marker <!-- botctl:test --> (with --baseline: <!-- botctl:behaviour -->) to "
    "find and update one comment in place, and stays under 60,000 characters (failed tests, "
    "or with --baseline the changed answers, first; the rest folded; '... N more' when cut).",
)
@click.option(
    "--baseline",
    metavar="SELECTOR",
    callback=stage_selector,
    help="Also run each test on the baseline counterpart of each chatbot under test (paired "
    "as promote pairs: the one chatbot the label SELECTOR matches whose other labels are the "
    "same, e.g. -l stage=preview --baseline stage=production) and report, per message, both "
    "answers and how much the answer changed. The verdict is the chatbots under test's.",
)
@takes(TestOptions)
def test(o: TestOptions) -> int:
    """Run the conversation tests (kind: ConversationTest) against the live chatbots.

    Each test's conversation is sent to each selected chatbot it covers through the chat
    operation, and the answers are checked against its expectations. Nothing is stored on
    the service unless a test says store: true. Selection as for plan (--target, -l,
    --exclude); tests run in parallel within --parallelism and --rate-limit.

    With --baseline SELECTOR, each test also runs on the baseline counterpart of each chatbot
    under test, and the report shows per sent message both answers, whether each met the
    expectations and their similarity (0 to 1, character trigrams: README, Conversation
    tests), the most changed first. A test covering either chatbot of a pair runs on both.

    \b
    Exit codes: 0 all passed, 1 error (a test could not run: the chat operation needs a paid
    plan; a judge answered off-format), 3 a test failed (with --baseline: on a chatbot under
    test; the baseline's results are shown, never failing the run).

    \b
    Examples:
      botctl test bots/
      botctl test bots/ -l stage=staging --junit reports/conversations.xml
      botctl test bots/ --test 'refund-*' --format json
      botctl test bots/ --format github --comment-out t.md --junit t.xml   # GitHub Actions
      botctl test bots/ -l stage=preview --baseline stage=production --comment-out b.md
    """
    if o.baseline is not None:
        return _compared(o, o.baseline)
    from botctl.pipeline.conversations import run_conversation_tests
    from botctl.render import tests as render

    ws = workspace(o.config, o.service)
    formats = _Formats(
        {
            "text": render.render_tests_text,
            "json": render.render_tests_json,
            "markdown": render.render_tests_markdown,
            "github": render.render_tests_github,
        },
        render.render_tests_comment,
        render.render_junit,
        render.summary,
    )
    report = _reported(o, run_conversation_tests(ws, o.test_names), formats)
    if not report.cases:
        err("no conversation test covers the selected chatbots")
    return report.exit_code


R = TypeVar("R")


@dataclass(frozen=True)
class _Formats(Generic[R]):
    """How a report of type R is written: ``--format``'s renderers, the comment, the JUnit
    XML, and the summary line a Markdown run says on standard error."""

    renderers: dict[str, Callable[[R], str]]
    comment: Callable[[R], str]
    junit: Callable[[R], str]
    summary: Callable[[R], str]


def _reported(o: TestOptions, run: Coroutine[Any, Any, R], formats: _Formats[R]) -> R:
    """Run the tests, print the report as ``--format`` says, write the comment and the JUnit
    report when asked for."""
    with errors_as_annotations(o.fmt, "botctl test"):
        report = run_async(run)
        click.echo(formats.renderers[o.fmt](report), nl=False)
        if o.comment_out is not None:
            write_comment(o.comment_out, formats.comment(report))
        if o.junit_file is not None:
            write_junit(o.junit_file, formats.junit(report))
            err(f"JUnit report written to {o.junit_file}")
    if o.fmt == "markdown":
        err(formats.summary(report))
    return report


def _compared(o: TestOptions, baseline: Stage) -> int:
    """``--baseline``: the behaviour report."""
    from botctl.pipeline.behaviour import run_behaviour
    from botctl.render import behaviour as render
    from botctl.render.tests import render_junit

    ws = workspace(o.config, o.service)
    formats = _Formats(
        {
            "text": render.render_behaviour_text,
            "json": render.render_behaviour_json,
            "markdown": render.render_behaviour_markdown,
            "github": render.render_behaviour_github,
        },
        render.render_behaviour_comment,
        lambda found: render_junit(found.tests),
        render.behaviour_summary,
    )
    report = _reported(o, run_behaviour(ws, baseline, o.test_names), formats)
    if not report.pairs:
        err("no conversation test covers the chatbots under test")
    return report.exit_code
