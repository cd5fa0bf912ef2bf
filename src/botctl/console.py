"""Terminal helpers shared by the command modules (the only modules that print)."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Coroutine
from typing import Any, TypeVar

import click

T = TypeVar("T")


def colour_enabled(stream: Any = None) -> bool:
    """Colour only on a terminal, and never with NO_COLOR (https://no-color.org)."""
    stream = stream or sys.stdout
    return "NO_COLOR" not in os.environ and hasattr(stream, "isatty") and stream.isatty()


def err(message: str) -> None:
    click.echo(message, err=True)


def run_async(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)
