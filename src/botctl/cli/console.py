"""Terminal helpers shared by the command modules (the only modules that print)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import click

from botctl.annotations import inert

if TYPE_CHECKING:
    from botctl.reconcile.apply import OpResult

T = TypeVar("T")


def colour_enabled(stream: Any = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR (https://no-color.org)."""
    stream = stream or sys.stdout
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def err(message: str) -> None:
    """A message on stderr; text in it from the service or the YAML (an error's words, a
    chatbot's name) carries no terminal escape sequence or CI runner command
    (``annotations.inert``)."""
    click.echo(inert(message), err=True)


def print_warnings(warnings: Iterable[str]) -> None:
    for warning in warnings:
        already = warning.startswith("warning") or ": warning" in warning
        err(warning if already else f"warning: {warning}")


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run``, with the result handed over outside the main task.

    On its way out, ``asyncio.run`` restores the SIGINT handler, and CPython formats the
    replaced handler, which holds the finished main task, with ``repr``: the task's result
    with it, which for a large plan is expensive (see README, Benchmarks)."""
    results: list[T] = []

    async def main() -> None:
        results.append(await coro)

    asyncio.run(main())
    return results[0]


class Progress:
    """One line per completed operation (what CI logs keep); on a terminal, also a status line
    at the bottom that counts down what is left."""

    LABELS: ClassVar[dict[str, str]] = {
        "applied": "applied",
        "failed": "FAILED ",
        "not_attempted": "skipped",
    }

    def __init__(self, *, live: bool) -> None:
        self.live = live
        self.total = 0
        self.done = 0

    def line(self, result: OpResult) -> None:
        self.done += 1
        note = f": {result.message}" if result.message else ""
        prefix = "\r\x1b[K" if self.live else ""
        line = inert(f"{self.LABELS[result.status]}  {result.operation.label}{note}")
        click.echo(f"{prefix}{line}")
        if self.live:
            click.echo(f"  [{self.done}/{self.total}] applying...", nl=False)

    def finish(self) -> None:
        if self.live:
            click.echo("\r\x1b[K", nl=False)
