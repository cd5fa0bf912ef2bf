"""Command-line options shared by several commands, each defined once, and the Workspace
they build. Light to import: defaults come from ``botctl.defaults``, and everything else is
imported when a command runs."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
from click.shell_completion import CompletionItem

from botctl.cli.console import err
from botctl.defaults import (
    DEFAULT_MAX_ARCHIVES,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_PARALLELISM,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STATE_PATH,
)

if TYPE_CHECKING:
    from botctl.pipeline.workspace import Workspace

F = TypeVar("F", bound=Callable[..., Any])
# github: workflow-command annotations for GitHub Actions (see README "In CI").
FORMATS = click.Choice(["text", "json", "markdown", "github"])


def stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    """Several click decorators as one, applied in the order written."""

    def apply(func: F) -> F:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


PATHS = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
ALLOW_UNKNOWN_MODELS = click.option(
    "--allow-unknown-models",
    is_flag=True,
    envvar="BOTCTL_ALLOW_UNKNOWN_MODELS",
    help="Accept a settings model missing from botctl's list (a warning, not an "
    "error): for models the service released after this botctl.",
)


def complete_targets(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """--target NAME<Tab>: the chatbot names of the PATHs typed so far (else of the current
    directory), read from the YAML alone: completion never contacts the service."""
    from botctl.config.names import declared_names

    # While the option's value is missing, click's resilient parse stops before it assigns
    # positional arguments: the PATHs typed so far are then still in ctx.args.
    paths = ctx.params.get("paths") or tuple(Path(arg) for arg in ctx.args) or (Path("."),)
    taken = set(ctx.params.get("targets") or ())
    return [
        CompletionItem(name)
        for name in declared_names(paths)
        if name.startswith(incomplete) and name not in taken
    ]


TARGETS = click.option(
    "--target",
    "targets",
    multiple=True,
    metavar="NAME",
    shell_complete=complete_targets,
    help="Only the chatbot with this metadata.name (repeatable).",
)
STATE = click.option(
    "--state",
    "state_path",
    metavar="PATH|URL",
    envvar="BOTCTL_STATE",
    default=str(DEFAULT_STATE_PATH),
    show_default=True,
    help="Where the state (what botctl last applied) lives: a file path, "
    "git+<repo-url>#<branch>:<path>, or s3://<bucket>/<key> [env BOTCTL_STATE].",
)
LOCK_TIMEOUT = click.option(
    "--lock-timeout",
    type=click.FloatRange(0),
    default=0.0,
    metavar="SECONDS",
    help="Wait this long for another run's state lock (default: fail at once).",
)
FORMAT = click.option(
    "--format",
    "fmt",
    type=FORMATS,
    default="text",
    show_default=True,
    help="github: annotations and a folded log for GitHub Actions (errors on the files).",
)
VALIDATE_FORMAT = click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "github"]),
    default="text",
    show_default=True,
    help="github: each problem as an annotation on its file and line in GitHub Actions.",
)
COMMENT_OUT = click.option(
    "--comment-out",
    type=click.Path(path_type=Path, dir_okay=False),
    metavar="FILE",
    help="Also write the Markdown report as a pull-request or issue comment: it starts "
    "with a hidden marker (<!-- botctl:plan --> or <!-- botctl:drift -->) to find and "
    "update one comment in place, and stays under 60,000 characters (summary and "
    "archives first, the rest folded, '... N more changes' when cut).",
)
REASSERT = click.option(
    "--reassert",
    is_flag=True,
    envvar="BOTCTL_REASSERT",
    help="Also send every managed setting whose current value cannot be read back (a "
    "dashboard edit of it is invisible), folded into the one settings request per chatbot; "
    "listed apart as `reassert` [env BOTCTL_REASSERT].",
)


_SIZE = re.compile(r"\s*(\d+)\s*(?:([kmg])(?:i?b)?|b)?\s*", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
_SMALLEST_CAP = 1 << 10  # below any real answer: every read would fail


def byte_size(value: str | int) -> int:
    """A size in bytes: ``33554432``, or with a binary unit: ``512K``, ``32MiB``, ``1G``."""
    if isinstance(value, int):
        count = value
    else:
        match = _SIZE.fullmatch(value)
        if match is None:
            raise ValueError(f"{value!r} is not a size: give bytes, or a number with K, M or G")
        count = int(match.group(1)) * _UNITS[(match.group(2) or "").lower()]
    if count < _SMALLEST_CAP:
        raise ValueError(f"{value!r} is below the smallest cap, 1 KiB")
    return count


# The bounds of one request, for every command that talks to the service.
REQUEST_TIMEOUT = click.option(
    "--request-timeout",
    type=click.FloatRange(0, min_open=True),
    default=DEFAULT_REQUEST_TIMEOUT,
    show_default=True,
    envvar="BOTCTL_REQUEST_TIMEOUT",
    metavar="SECONDS",
    help="Deadline of one attempt of a request, from connecting to the last byte of the "
    "answer; a request is tried at most 5 times [env BOTCTL_REQUEST_TIMEOUT].",
)
MAX_RESPONSE_BYTES = click.option(
    "--max-response-bytes",
    type=byte_size,
    default=DEFAULT_MAX_RESPONSE_BYTES,
    metavar="SIZE",
    show_default="32MiB",
    envvar="BOTCTL_MAX_RESPONSE_BYTES",
    help="Largest answer botctl reads, after decompression (bytes, or with K, M, G: "
    "binary units) [env BOTCTL_MAX_RESPONSE_BYTES].",
)
request_bounds = stack(REQUEST_TIMEOUT, MAX_RESPONSE_BYTES)

config_options = stack(PATHS, ALLOW_UNKNOWN_MODELS, TARGETS)
service_options = stack(
    click.option(
        "--api-url",
        envvar="BOTCTL_API_URL",
        metavar="URL",
        help="Service base URL ending in /api/v1 [env BOTCTL_API_URL]. Keys come from "
        "BOTCTL_API_KEY or each document's apiKeyEnv, never from the command line.",
    ),
    click.option(
        "--sandbox",
        is_flag=True,
        help="Target the embedded sandbox (.botctl/sandbox.db) instead of a real service; "
        "chatbots of the configuration are created there on first use.",
    ),
    STATE,
    click.option(
        "--no-reads",
        is_flag=True,
        envvar="BOTCTL_NO_READS",
        help="Send no read at all (for a deployment without reads): compare with the state "
        "file only; the plan says reads: none [env BOTCTL_NO_READS=1].",
    ),
    request_bounds,
    click.option(
        "--parallelism",
        type=click.IntRange(1, 64),
        default=DEFAULT_PARALLELISM,
        show_default=True,
        help="Chatbots processed at once.",
    ),
    click.option(
        "--rate-limit",
        type=click.FloatRange(0),
        default=0.0,
        metavar="N",
        help="Client-side pace: at most N requests per second per API key (0 = off).",
    ),
    click.option("--debug", is_flag=True, help="Trace HTTP requests to stderr (key masked)."),
)
safety_options = stack(
    click.option(
        "--force",
        is_flag=True,
        help="Accept a plan that exceeds the safety caps (archiving more than 30% of a "
        "chatbot's attributes, when it has at least 10, or more than --max-archives).",
    ),
    click.option(
        "--max-archives",
        type=click.IntRange(0),
        default=DEFAULT_MAX_ARCHIVES,
        show_default=True,
        envvar="BOTCTL_MAX_ARCHIVES",
        help="Most attributes one run may archive across all chatbots.",
    ),
)


def no_state_notice(state: str | os.PathLike[str]) -> str:
    """What plan and apply say (on stderr) when they start without any state."""
    from botctl.store.backends import describe

    return f"no state at {describe(state)}: starting fresh"


def workspace(params: dict[str, Any]) -> Workspace:
    """The run's configuration from the options of the command."""
    from botctl.pipeline.workspace import Workspace
    from botctl.reconcile.safety import SafetyPolicy
    from botctl.service.options import ServiceOptions

    if not params.get("paths"):
        raise click.UsageError(
            "give the configuration: one or more YAML files or directories, e.g. "
            "`botctl plan bots/`"
        )
    secrets: set[str] = set()
    # The client redacts the keys and these secrets (every escaped form) from each line.
    trace = (lambda line: err(f"debug: {line}")) if params.get("debug") else None
    return Workspace(
        secrets=secrets,
        paths=params["paths"],
        environ=os.environ,
        state_path=params.get("state_path") or DEFAULT_STATE_PATH,
        service=ServiceOptions(
            api_url=params.get("api_url"),
            sandbox=bool(params.get("sandbox")),
            rate_limit=params.get("rate_limit") or 0.0,
            timeout=params.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes=params.get("max_response_bytes") or DEFAULT_MAX_RESPONSE_BYTES,
            no_reads=bool(params.get("no_reads")),
            trace=trace,
            secrets=secrets,
        ),
        targets=tuple(params.get("targets") or ()),
        allow_unknown_models=bool(params.get("allow_unknown_models")),
        parallelism=params.get("parallelism") or DEFAULT_PARALLELISM,
        lock_timeout=params.get("lock_timeout") or 0.0,
        policy=SafetyPolicy(max_archives=params.get("max_archives", DEFAULT_MAX_ARCHIVES)),
        force=bool(params.get("force")),
        reassert=bool(params.get("reassert")),
        skip_missing=bool(params.get("skip_missing")),
    )
