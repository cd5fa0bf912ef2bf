"""What the CI-facing options share: ``--format github``'s failures as annotations, and the
file ``--comment-out`` writes."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from botctl.cli.console import err
from botctl.errors import BotctlError


@contextmanager
def errors_as_annotations(fmt: str, title: str) -> Iterator[None]:
    """--format github: an expected failure is printed as error annotations on standard
    output (each configuration problem on its file and line), never as plain text a runner
    might read, and the command exits with its code."""
    if fmt != "github":
        yield
        return
    try:
        yield
    except BotctlError as exc:
        report_error(exc, fmt, title)
        raise click.exceptions.Exit(exc.exit_code) from None


def report_error(exc: BotctlError, fmt: str, title: str) -> None:
    """An error said where the command's failures go, the run going on: ``error: ...`` on
    standard error, or with --format github its annotations on standard output."""
    if fmt != "github":
        err(f"error: {exc}")
        return
    from botctl.annotations import error_annotations

    click.echo("\n".join(error_annotations(exc, title=title)))


def write_comment(path: Path, text: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BotctlError(f"cannot write the comment to {path}: {exc.strerror}") from None
