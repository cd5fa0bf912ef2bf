"""botctl's command line: one module per command; each parses its options, calls the pipeline,
renders, and returns its exit code. The only package that prints or exits.

Exit codes: 0 success / in sync, 1 error, 2 changes or drift present (``plan
--detailed-exitcode``, ``drift``), 3 a conversation test failed (``test``, ``apply --test``),
130 / 143 interrupted by SIGINT / SIGTERM. A command's module is imported only when that
command runs (``COMMANDS``), and each imports what it needs when it runs, so ``botctl plan``
loads nothing of ``agent`` or ``apply``, and ``botctl --help`` and ``botctl validate`` never load
the HTTP stack.
"""

from __future__ import annotations

import importlib
import sys
import warnings
from collections.abc import Iterator, Mapping, MutableMapping
from typing import Any

import click

from botctl import __version__
from botctl.cli.console import err
from botctl.errors import EXIT_ERROR, EXIT_OK, BotctlError, BotctlWarning, Interrupted

# Every command, and where it is defined (module:attribute), imported when it is asked for.
COMMANDS = {
    "init": "botctl.cli.init:init",
    "validate": "botctl.cli.validate:validate",
    "plan": "botctl.cli.plan:plan",
    "apply": "botctl.cli.apply:apply",
    "drift": "botctl.cli.drift:drift",
    "agent": "botctl.cli.agent:agent",
    "refresh": "botctl.cli.refresh:refresh",
    "test": "botctl.cli.tests_cmd:test",
    "conversations": "botctl.cli.conversations:conversations",
    "preview": "botctl.cli.preview:preview",
    "promote": "botctl.cli.promote:promote",
    "render": "botctl.cli.render_cmd:render",
    "export": "botctl.cli.export:export",
    "schema": "botctl.cli.schema:schema",
    "demo": "botctl.cli.demo:demo",
    "completion": "botctl.cli.completion:completion",
    "state": "botctl.cli.state:state",
    "unlock": "botctl.cli.unlock:unlock",
    "sandbox": "botctl.sandbox.cli:sandbox",
}


class LazyCommands(MutableMapping[str, click.Command]):
    """click's commands by name, each module imported the first time its command is asked
    for (running it, its help, the group's help, completion): listing names imports none."""

    def __init__(self, where: Mapping[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attribute = self._where[name].split(":")
            self._loaded[name] = getattr(importlib.import_module(module), attribute)
        return self._loaded[name]

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._where[name] = ""  # defined already
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        del self._where[name]
        self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __iter__(self) -> Iterator[str]:
        return iter(self._where)

    def __len__(self) -> int:
        return len(self._where)


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


@click.group(
    cls=BotctlGroup,
    commands=LazyCommands(COMMANDS),
    context_settings={"help_option_names": ["-h", "--help"]},
)
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


def main() -> None:
    cli()
