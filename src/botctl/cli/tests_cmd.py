"""``botctl test``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

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
    "the hidden marker <!-- botctl:test --> to find and update one comment in place, and "
    "stays under 60,000 characters (failed tests first, the passed folded, '... N more' "
    "when cut).",
)
@takes(TestOptions)
def test(o: TestOptions) -> int:
    """Run the conversation tests (kind: ConversationTest) against the live chatbots.

    Each test's conversation is sent to each selected chatbot it covers through the chat
    operation, and the answers are checked against its expectations. Nothing is stored on
    the service unless a test says store: true. Selection as for plan (--target, -l,
    --exclude); tests run in parallel within --parallelism and --rate-limit.

    \b
    Exit codes: 0 all passed, 1 error (a test could not run: the chat operation needs a paid
    plan), 3 a test failed.

    \b
    Examples:
      botctl test bots/
      botctl test bots/ -l stage=staging --junit reports/conversations.xml
      botctl test bots/ --test 'refund-*' --format json
      botctl test bots/ --format github --comment-out t.md --junit t.xml   # GitHub Actions
    """
    from botctl.pipeline.conversations import run_conversation_tests
    from botctl.render import tests as render

    fmt, junit_file = o.fmt, o.junit_file
    ws = workspace(o.config, o.service)
    renderers = {
        "text": render.render_tests_text,
        "json": render.render_tests_json,
        "markdown": render.render_tests_markdown,
        "github": render.render_tests_github,
    }
    with errors_as_annotations(fmt, "botctl test"):
        report = run_async(run_conversation_tests(ws, o.test_names))
        click.echo(renderers[fmt](report), nl=False)
        if o.comment_out is not None:
            write_comment(o.comment_out, render.render_tests_comment(report))
        if junit_file is not None:
            write_junit(junit_file, render.render_junit(report))
            err(f"JUnit report written to {junit_file}")
    if fmt == "markdown":
        err(render.summary(report))
    if not report.cases:
        err("no conversation test covers the selected chatbots")
    return report.exit_code
