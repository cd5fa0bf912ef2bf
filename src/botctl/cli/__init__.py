"""botctl's command line: one module per command; each parses its options, calls the pipeline,
renders, and returns its exit code. The only package that prints or exits.

Exit codes: 0 success / in sync, 1 error, 2 changes or drift present (``plan
--detailed-exitcode``, ``drift``), 3 a conversation test failed (``test``, ``apply --test``),
130 / 143 interrupted by SIGINT / SIGTERM. Each command
imports what it needs when it runs, so ``botctl --help`` and ``botctl validate`` never load
the HTTP stack.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any

import click

from botctl import __version__
from botctl.cli.agent import agent
from botctl.cli.apply import apply
from botctl.cli.completion import completion
from botctl.cli.console import err
from botctl.cli.conversations import conversations
from botctl.cli.demo import demo
from botctl.cli.drift import drift
from botctl.cli.export import export
from botctl.cli.init import init
from botctl.cli.plan import plan
from botctl.cli.preview import preview
from botctl.cli.promote import promote
from botctl.cli.refresh import refresh
from botctl.cli.render_cmd import render
from botctl.cli.schema import schema
from botctl.cli.state import state
from botctl.cli.tests_cmd import test
from botctl.cli.unlock import unlock
from botctl.cli.validate import validate
from botctl.errors import EXIT_ERROR, EXIT_OK, BotctlError, BotctlWarning, Interrupted
from botctl.sandbox.cli import sandbox


class BotctlGroup(click.Group):
    """Turns expected failures into a message and exit code 1 (never a traceback), and keeps
    exit code 2 for "changes present" by mapping click's usage errors to 1."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            _say_warnings()
            self._main(*args, **kwargs)

    def _main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["standalone_mode"] = False
        try:
            code = super().main(*args, **kwargs)
        except click.exceptions.Abort:
            err("Aborted: nothing was applied.")
            sys.exit(EXIT_ERROR)
        except click.ClickException as exc:
            exc.show()
            sys.exit(EXIT_ERROR)
        except Interrupted as exc:
            err(str(exc))
            sys.exit(exc.exit_code)
        except BotctlError as exc:
            err(f"error: {exc}")
            sys.exit(exc.exit_code)
        sys.exit(code if isinstance(code, int) else EXIT_OK)


def _say_warnings() -> None:
    """A ``BotctlWarning`` raised anywhere in the run is printed as ``warning: ...``, each time
    (Python's default shows one once per place, with its file and line)."""
    python_s = warnings.showwarning

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        if issubclass(category, BotctlWarning):
            err(f"warning: {message}")
        else:
            python_s(message, category, *args, **kwargs)

    warnings.simplefilter("always", BotctlWarning)
    warnings.showwarning = show


@click.group(cls=BotctlGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="botctl")
def cli() -> None:
    """Chatbot settings and custom contact attributes as code.

    Write each chatbot's desired state in YAML, review a plan, apply it, and catch changes
    made outside git (drift). Start with `botctl demo`, which runs the whole loop against the
    embedded sandbox, offline.

    \b
    Exit codes: 0 success / in sync, 1 error, 2 changes or drift present, 3 a conversation
    test failed, 130 / 143 interrupted by SIGINT / SIGTERM.
    """


for _command in (
    init,
    validate,
    plan,
    apply,
    drift,
    agent,
    refresh,
    test,
    conversations,
    preview,
    promote,
    render,
    export,
    schema,
    demo,
    completion,
    state,
    unlock,
    sandbox,
):
    cli.add_command(_command)


def main() -> None:
    cli()
