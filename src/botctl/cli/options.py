"""Command-line options shared by several commands, each defined once, and the Workspace
they build. Light to import: defaults come from ``botctl.defaults``, and everything else is
imported when a command runs.

Where a run's settings come from, first found wins: the flag, its environment variable, the
project file (botctl.yaml, ``config.project``), botctl's default. The options botctl.yaml can
set are listed once, in ``FROM_PROJECT``; their click defaults are None so that "not given"
can be told from "given the default".
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from click.shell_completion import CompletionItem

from botctl.cli.console import err
from botctl.defaults import (
    DEFAULT_MAX_ARCHIVES,
    DEFAULT_MAX_CONTACT_READS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_PARALLELISM,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STATE_PATH,
)

if TYPE_CHECKING:
    from botctl.cli.console import LimitWatch
    from botctl.config.project import Project
    from botctl.config.selection import Requirement, Selection
    from botctl.pipeline.workspace import Workspace
    from botctl.reconcile.usage import ContactPolicy

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


@dataclass(frozen=True)
class FromProject:
    """An option botctl.yaml may set: the click parameter, the file's field, botctl's default."""

    param: str
    field: str
    default: Any


FROM_PROJECT = (
    FromProject("api_url", "apiUrl", None),
    FromProject("state_path", "state", DEFAULT_STATE_PATH),
    FromProject("parallelism", "parallelism", DEFAULT_PARALLELISM),
    FromProject("rate_limit", "rateLimit", 0.0),
    FromProject("allow_unknown_models", "allowUnknownModels", False),
    FromProject("max_archives", "maxArchives", DEFAULT_MAX_ARCHIVES),
)
_PROJECT_NOTE = "or botctl.yaml's"


def _selectors(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[Requirement, ...]:
    """-l/--selector values parsed as they are given, so a typo is a usage error at once."""
    if not value:
        return ()
    from botctl.config.selection import SelectorError, parse_selector

    try:
        return tuple(r for text in value for r in parse_selector(text))
    except SelectorError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param=param) from None


def _warning_codes(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> frozenset[str]:
    from botctl import lint

    words = [w.strip() for text in value for w in text.split(",") if w.strip()]
    codes, unknown = lint.codes_of(words)
    if unknown:
        raise click.BadParameter(lint.unknown_code(unknown[0]), ctx=ctx, param=param)
    return codes


PATHS = click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
CONFIG = click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    envvar="BOTCTL_CONFIG",
    metavar="FILE",
    help="Project file [env BOTCTL_CONFIG; default: botctl.yaml in the working directory or "
    "the nearest parent that has one].",
)
ALLOW_UNKNOWN_MODELS = click.option(
    "--allow-unknown-models/--no-allow-unknown-models",
    default=None,
    envvar="BOTCTL_ALLOW_UNKNOWN_MODELS",
    help="Accept a settings model missing from botctl's list (a warning, not an "
    "error): for models the service released after this botctl [env "
    f"BOTCTL_ALLOW_UNKNOWN_MODELS; default: no, {_PROJECT_NOTE} allowUnknownModels].",
)
DISABLE_WARNING = click.option(
    "--disable-warning",
    "disabled_warnings",
    multiple=True,
    metavar="CODE",
    callback=_warning_codes,
    help="Do not report this warning (BC101 or attribute-name-style; repeatable or "
    "comma-separated); README lists the codes.",
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
    metavar="NAME|GLOB",
    shell_complete=complete_targets,
    help="Only the chatbots whose metadata.name matches (shell-style '*', '?'; repeatable).",
)
SELECTOR = click.option(
    "-l",
    "--selector",
    "selector",
    multiple=True,
    metavar="SELECTOR",
    callback=_selectors,
    help="Only the chatbots whose labels match, kubectl's syntax: 'team=support,tier!=free', "
    "'env in (prod,staging)', 'beta', '!legacy'.",
)
EXCLUDES = click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="NAME|GLOB",
    help="Leave out the chatbots whose metadata.name matches (repeatable).",
)
STATE = click.option(
    "--state",
    "state_path",
    metavar="PATH|URL",
    envvar="BOTCTL_STATE",
    help="Where the state (what botctl last applied) lives: a file path, "
    "git+<repo-url>#<branch>:<path>, or s3://<bucket>/<key> [env BOTCTL_STATE; default: "
    f"{DEFAULT_STATE_PATH}, {_PROJECT_NOTE} state].",
)
STATE_ENCRYPTION = click.option(
    "--state-encryption",
    type=click.Choice(["none", "passphrase"]),
    envvar="BOTCTL_STATE_ENCRYPTION",
    help="passphrase: keep a new state (and plans saved against it) encrypted at rest, "
    "AES-256-GCM under a key derived (scrypt) from BOTCTL_STATE_KEY. An existing state keeps "
    "its own setting (`botctl state migrate --state-encryption` changes it) [env "
    "BOTCTL_STATE_ENCRYPTION; default: as the state is, else none].",
)
API_URL = click.option(
    "--api-url",
    envvar="BOTCTL_API_URL",
    metavar="URL",
    help="Service base URL ending in /api/v1 [env BOTCTL_API_URL; default: "
    f"{_PROJECT_NOTE} apiUrl]. Keys come from BOTCTL_API_KEY or each document's apiKeyEnv, "
    "never from the command line.",
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
CHANGED_SINCE = click.option(
    "--changed-since",
    metavar="REF",
    envvar="BOTCTL_CHANGED_SINCE",
    help="Only the chatbots whose resolved configuration changed since the git revision REF "
    "(a branch, tag or commit of the configuration's repository; read from git, nothing is "
    "checked out), those the state says are not all applied, and those removed [env "
    "BOTCTL_CHANGED_SINCE].",
)
LOCK_TIMEOUT = click.option(
    "--lock-timeout",
    type=click.FloatRange(0),
    default=0.0,
    metavar="SECONDS",
    help="Wait this long for another run's state lock (default: fail at once).",
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

selection_options = stack(TARGETS, SELECTOR, EXCLUDES)
config_options = stack(PATHS, CONFIG, ALLOW_UNKNOWN_MODELS, DISABLE_WARNING, selection_options)
service_options = stack(
    API_URL,
    click.option(
        "--sandbox",
        is_flag=True,
        help="Target the embedded sandbox (.botctl/sandbox.db) instead of a real service; "
        "chatbots of the configuration are created there on first use.",
    ),
    STATE,
    STATE_ENCRYPTION,
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
        help=f"Chatbots processed at once [default: {DEFAULT_PARALLELISM}, {_PROJECT_NOTE} "
        "parallelism].",
    ),
    click.option(
        "--rate-limit",
        type=click.FloatRange(0),
        metavar="N",
        help="Client-side pace: at most N requests per second per API key [default: 0 = off, "
        f"{_PROJECT_NOTE} rateLimit].",
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
        envvar="BOTCTL_MAX_ARCHIVES",
        help="Most attributes one run may archive across all chatbots [env "
        f"BOTCTL_MAX_ARCHIVES; default: {DEFAULT_MAX_ARCHIVES}, {_PROJECT_NOTE} maxArchives].",
    ),
)

# Contacts: the values archives retire and renames move (README "Contacts and their values").
contact_options = stack(
    click.option(
        "--no-contact-reads",
        is_flag=True,
        envvar="BOTCTL_NO_CONTACT_READS",
        help="Never read the contact list: the plan says how many contacts carry a value for "
        "what it archives or renames is unknown (a rename cannot be applied) "
        "[env BOTCTL_NO_CONTACT_READS=1].",
    ),
    click.option(
        "--max-contact-reads",
        type=click.IntRange(0),
        metavar="N",
        envvar="BOTCTL_MAX_CONTACT_READS",
        help="Most contacts one run reads to count values; past it the count is unknown "
        f"[env BOTCTL_MAX_CONTACT_READS; default: {DEFAULT_MAX_CONTACT_READS:,}].",
    ),
    click.option(
        "--allow-archive-with-values",
        is_flag=True,
        help="Archive attributes that contacts carry values for (else the plan fails, naming "
        "them; or set archiveWithValues: true on the attribute).",
    ),
)


def no_state_notice(state: str | os.PathLike[str]) -> str:
    """What plan and apply say (on stderr) when they start without any state."""
    from botctl.store.backends import describe

    return f"no state at {describe(state)}: starting fresh"


def project(params: dict[str, Any]) -> Project | None:
    """The project file: --config / BOTCTL_CONFIG, else the nearest botctl.yaml."""
    from botctl.config.project import find_project, load_project
    from botctl.errors import BotctlError

    file = params.get("config_file")
    if file is not None and not file.is_file():
        raise BotctlError(f"--config {file}: no such file")
    # False: only the file given (the agent: a revision's own botctl.yaml, or none).
    if file is None and params.get("project_search", True):
        file = find_project(Path.cwd())
    return load_project(file, os.environ) if file is not None else None


def settled(params: dict[str, Any], found: Project | None) -> dict[str, Any]:
    """``params`` with every option of ``FROM_PROJECT`` that was not given taken from the
    project file, else from botctl's defaults."""
    out = dict(params)
    for option in FROM_PROJECT:
        if out.get(option.param) is not None:
            continue
        value = found.value(option.field) if found is not None else None
        out[option.param] = option.default if value is None else value
    return out


def state_option(func: F) -> F:
    """``--state`` and ``--config`` for a command that needs only the state's location: it is
    called with ``state_path`` settled (the flag, BOTCTL_STATE, botctl.yaml's state, or the
    default) and without ``config_file``."""

    @functools.wraps(func)
    def settle(*args: Any, **kwargs: Any) -> Any:
        given = {"state_path": kwargs.get("state_path"), "config_file": kwargs.pop("config_file")}
        kwargs["state_path"] = os.fspath(settled(given, project(given))["state_path"])
        return func(*args, **kwargs)

    return stack(STATE, CONFIG)(cast(F, settle))


def selection(params: dict[str, Any]) -> Selection:
    from botctl.config.selection import Selection

    return Selection(
        targets=tuple(params.get("targets") or ()),
        selector=tuple(params.get("selector") or ()),
        excludes=tuple(params.get("excludes") or ()),
    )


def limit_watch() -> LimitWatch:
    """The run's watch on the service's rate limit (``console.LimitWatch``), its closing line
    printed when the command ends; one per command (an apply hands it its progress line)."""
    import sys

    from botctl.cli.console import LimitWatch

    ctx = click.get_current_context(silent=True)
    meta = ctx.meta if ctx is not None else {}
    watch = meta.get("botctl.limit_watch")
    if not isinstance(watch, LimitWatch):
        watch = meta["botctl.limit_watch"] = LimitWatch(live=sys.stderr.isatty())
        if ctx is not None:
            ctx.call_on_close(watch.report)
    return watch


def workspace(params: dict[str, Any]) -> Workspace:
    """The run's configuration from the options of the command and the project file."""
    from botctl.pipeline.workspace import Workspace
    from botctl.reconcile.safety import SafetyPolicy
    from botctl.service.options import ServiceOptions

    found = project(params)
    params = settled(params, found)
    paths = params.get("paths") or (found.paths if found is not None else ())
    if not paths:
        where = (
            f"{found.file} has no paths"
            if found is not None
            else "no botctl.yaml names them (see README, Project file)"
        )
        raise click.UsageError(
            "give the configuration: one or more YAML files or directories, e.g. "
            f"`botctl plan bots/` ({where})"
        )
    secrets: set[str] = set()
    # The client redacts the keys and these secrets (every escaped form) from each line.
    trace = (lambda line: err(f"debug: {line}")) if params.get("debug") else None
    watch = limit_watch()
    disabled = params.get("disabled_warnings") or frozenset()
    return Workspace(
        secrets=secrets,
        paths=paths,
        environ=os.environ,
        state_path=params["state_path"],
        state_encryption=params.get("state_encryption"),
        service=ServiceOptions(
            api_url=params["api_url"],
            sandbox=bool(params.get("sandbox")),
            rate_limit=params["rate_limit"],
            timeout=params.get("request_timeout") or DEFAULT_REQUEST_TIMEOUT,
            max_response_bytes=params.get("max_response_bytes") or DEFAULT_MAX_RESPONSE_BYTES,
            no_reads=bool(params.get("no_reads")),
            no_contact_reads=bool(params.get("no_contact_reads")),
            trace=trace,
            secrets=secrets,
            stats=watch.stats,
            on_wait=watch.wait,
        ),
        selection=selection(params),
        allow_unknown_models=bool(params["allow_unknown_models"]),
        disabled_warnings=disabled | (found.disabled_warnings if found else frozenset()),
        strict=bool(params.get("strict")),
        parallelism=params["parallelism"],
        lock_timeout=params.get("lock_timeout") or 0.0,
        policy=SafetyPolicy(max_archives=params["max_archives"]),
        force=bool(params.get("force")),
        reassert=bool(params.get("reassert")),
        skip_missing=bool(params.get("skip_missing")),
        contacts=contact_policy(params),
        changed_since=params.get("changed_since") or None,
        project_file=found.file if found is not None else None,
        paths_from_project=not params.get("paths"),
    )


def contact_policy(params: dict[str, Any]) -> ContactPolicy:
    from botctl.reconcile.usage import ContactPolicy

    found = params.get("max_contact_reads")
    return ContactPolicy(
        max_reads=DEFAULT_MAX_CONTACT_READS if found is None else int(found),
        allow_archive_with_values=bool(params.get("allow_archive_with_values")),
    )
