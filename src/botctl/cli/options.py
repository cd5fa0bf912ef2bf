"""Command-line options shared by several commands, each defined once, the typed groups a
command receives them in, and the Workspace they build. Light to import: defaults come from
``botctl.defaults``, and everything else is imported when a command runs.

Where a run's settings come from, first found wins: the flag, its environment variable, the
project file (botctl.yaml, ``config.project``), botctl's default: click's own order, the
project file being loaded by the eager ``--config`` into click's ``default_map``. An option
botctl.yaml may set says so where it is defined (``**from_project("apiUrl")``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click
from click.shell_completion import CompletionItem

from botctl.cli.console import err
from botctl.defaults import (
    COMMENT_LIMIT,
    DEFAULT_MAX_ARCHIVE_PERCENT,
    DEFAULT_MAX_ARCHIVES,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_CONTACT_READS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_PARALLELISM,
    DEFAULT_PERCENT_CAP_FROM,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_BASE_DELAY,
    DEFAULT_STATE_PATH,
    RETRY_BASE_DELAY_ENV,
)

if TYPE_CHECKING:
    from botctl.cli.console import LimitWatch
    from botctl.config.project import Project
    from botctl.config.selection import Requirement, Selection
    from botctl.errors import BotctlError
    from botctl.pipeline.workspace import Workspace
    from botctl.reconcile.usage import ContactPolicy
    from botctl.service.options import ServiceOptions

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


class ProjectOption(click.Option):
    """An option botctl.yaml may set: ``project_field`` names the file's field. The project
    file's values reach click as its ``default_map`` (see ``CONFIG``), so click's own order
    holds: the flag, its environment variable, botctl.yaml, the option's default."""

    def __init__(self, *args: Any, project_field: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.project_field = project_field


def from_project(field: str) -> dict[str, Any]:
    """``click.option(..., **from_project("apiUrl"))``: the option botctl.yaml's ``field``
    sets."""
    return {"cls": ProjectOption, "project_field": field}


_PROJECT_NOTE = "or botctl.yaml's"


@dataclass(frozen=True)
class FoundProject:
    """``--config``'s value: the project file found and loaded (None without one). A broken
    file is kept as its error, raised when the command asks for the project, so that it is
    reported as the command reports errors (``validate --format github``: an annotation)."""

    found: Project | None = None
    error: BotctlError | None = None

    def get(self) -> Project | None:
        if self.error is not None:
            raise self.error
        return self.found


def _project(ctx: click.Context, param: click.Parameter, value: Path | None) -> FoundProject:
    """Loads the project file (--config / BOTCTL_CONFIG, else the nearest botctl.yaml) before
    any other option (it is eager), and hands its values to click as the defaults of the
    command's ``ProjectOption``s."""
    from botctl.config.project import find_project, load_project
    from botctl.errors import BotctlError

    try:
        if value is not None and not value.is_file():
            raise BotctlError(f"--config {value}: no such file")
        file = value or find_project(Path.cwd())
        # A project file given from outside the checkout is the operator's: its paths are.
        boundary = Path(os.sep) if value is not None and _outside_checkout(value) else None
        found = load_project(file, os.environ, boundary=boundary) if file is not None else None
    except BotctlError as exc:
        if not param.expose_value:  # nothing will ask for it later: now
            raise
        return FoundProject(error=exc)
    ctx.meta["botctl.project"] = found
    ctx.meta["botctl.project_is_operators"] = boundary is not None
    if found is not None:
        given = {
            p.name: found.value(p.project_field)
            for p in ctx.command.params
            if isinstance(p, ProjectOption) and p.name is not None
        }
        ctx.default_map = {
            **(ctx.default_map or {}),
            **{name: v for name, v in given.items() if v is not None},
        }
    return FoundProject(found)


def _operator_given(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    """In CI, where an API key goes is the operator's to say (README, "Trust"): the API URL
    and a state URL come from a flag, the environment (the job's settings) or a project file
    given with --config from outside the checkout, never from the repository's botctl.yaml
    alone, and botctl.yaml may repeat them, not change them. A state path botctl.yaml names
    stays inside the repository. Elsewhere: click's order."""
    from click.core import ParameterSource

    from botctl.trust import ci_detected

    ci = ci_detected(os.environ)
    if ci is None or value is None or not isinstance(param, ProjectOption):
        return value
    if ctx.meta.get("botctl.project_is_operators"):  # --config outside the checkout
        return value
    project = ctx.meta.get("botctl.project")
    field = param.project_field
    if project is None or project.value(field) is None:
        return value
    written, where = project.value(field), project.at(field)
    flag, variable = param.opts[0], param.envvar
    if ctx.get_parameter_source(str(param.name)) is ParameterSource.DEFAULT_MAP:
        if field == "state" and not _is_url(str(value)):
            escape = project.escapes(str(project.settings.state))
            if escape is None:
                return value
            raise click.UsageError(f"{where}: state {escape}")
        raise click.UsageError(
            f"{where}: {field} {_shown(written)!r} is named only by the repository's botctl.yaml; "
            f"in CI ({ci}) botctl sends keys and state only where the operator says: set "
            f"{variable} in the job's settings (or pass {flag}; the GitHub Action's "
            f"{'api-url' if field == 'apiUrl' else 'state'} input)"
        )
    if not _same_place(written, value):
        raise click.UsageError(
            f"{where}: {field} {_shown(written)!r} differs from the operator's "
            f"{_shown(value)!r} ({flag} / {variable}); in CI a repository's botctl.yaml may "
            f"repeat the operator's {field}, never change it: remove it from botctl.yaml, or "
            "make the two agree"
        )
    return value


def _outside_checkout(file: Path) -> bool:
    """Whether ``file`` (a project file given with --config) lies outside the repository the
    run works in: then it is the operator's, not the repository's."""
    from botctl.config.project import repository_root, within

    top = os.path.realpath(repository_root(Path.cwd()))
    return not within(os.path.realpath(file), top)


def _is_url(text: str) -> bool:
    return re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://|^git\+", text) is not None


def _shown(value: object) -> str:
    from botctl.values import mask_url_credentials

    return mask_url_credentials(os.fspath(value) if isinstance(value, Path) else str(value))


def _same_place(written: object, given: object) -> bool:
    a, b = os.fspath(written) if isinstance(written, Path) else str(written), str(given)
    if _is_url(a) or _is_url(b):
        return a.rstrip("/") == b.rstrip("/")
    return os.path.abspath(a) == os.path.abspath(b)


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


def _config_option(*, expose: bool) -> Callable[[F], F]:
    """``--config``; ``expose``: the command takes the loaded project (``config_file``), else
    only the defaults it gives (a broken project file is an error at once)."""
    return click.option(
        "--config",
        "config_file",
        type=click.Path(path_type=Path, dir_okay=False),
        envvar="BOTCTL_CONFIG",
        metavar="FILE",
        is_eager=True,  # before every option whose default it may give
        expose_value=expose,
        callback=_project,
        help="Project file [env BOTCTL_CONFIG; default: botctl.yaml in the working directory "
        "or the nearest parent that has one].",
    )


CONFIG = _config_option(expose=True)
ALLOW_UNKNOWN_MODELS = click.option(
    "--allow-unknown-models/--no-allow-unknown-models",
    default=False,
    **from_project("allowUnknownModels"),
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
    default=str(DEFAULT_STATE_PATH),
    metavar="PATH|URL",
    **from_project("state"),
    envvar="BOTCTL_STATE",
    callback=_operator_given,
    help="Where the state (what botctl last applied) lives: a file path, "
    "git+<repo-url>#<branch>:<path>, or s3://<bucket>/<key> [env BOTCTL_STATE; default: "
    f"{DEFAULT_STATE_PATH}, {_PROJECT_NOTE} state].",
)
STATE_ENCRYPTION = click.option(
    "--state-encryption",
    type=click.Choice(["none", "passphrase"]),
    envvar="BOTCTL_STATE_ENCRYPTION",
    **from_project("stateEncryption"),
    help="passphrase: keep a new state (and plans saved against it) encrypted at rest, "
    "AES-256-GCM under a key derived (scrypt) from BOTCTL_STATE_KEY. An existing state keeps "
    "its own setting (`botctl state migrate --state-encryption` changes it) [env "
    f"BOTCTL_STATE_ENCRYPTION; default: as the state is, else none; {_PROJECT_NOTE} "
    "stateEncryption].",
)
API_URL = click.option(
    "--api-url",
    envvar="BOTCTL_API_URL",
    **from_project("apiUrl"),
    callback=_operator_given,
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
    f"update one comment in place, and stays under {COMMENT_LIMIT:,} characters (summary "
    "and archives first, the rest folded, '... N more changes' when cut).",
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
    f"answer; a request is tried at most {DEFAULT_MAX_ATTEMPTS} times [env "
    "BOTCTL_REQUEST_TIMEOUT].",
)
MAX_RESPONSE_BYTES = click.option(
    "--max-response-bytes",
    type=byte_size,
    default=DEFAULT_MAX_RESPONSE_BYTES,
    metavar="SIZE",
    show_default=f"{DEFAULT_MAX_RESPONSE_BYTES >> 20}MiB",
    envvar="BOTCTL_MAX_RESPONSE_BYTES",
    help="Largest answer botctl reads, after decompression (bytes, or with K, M, G: "
    "binary units) [env BOTCTL_MAX_RESPONSE_BYTES].",
)


def _seconds_from_environment(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise click.UsageError(f"{RETRY_BASE_DELAY_ENV}={value!r}: give a number of seconds >= 0")
    return seconds


# The retry policy's knob, for test suites: no flag, only its environment variable.
RETRY_BASE_DELAY = click.option(
    "--retry-base-delay",
    default=str(DEFAULT_RETRY_BASE_DELAY),
    envvar=RETRY_BASE_DELAY_ENV,
    callback=_seconds_from_environment,
    hidden=True,
)
request_bounds = stack(REQUEST_TIMEOUT, MAX_RESPONSE_BYTES, RETRY_BASE_DELAY)

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
        default=DEFAULT_PARALLELISM,
        **from_project("parallelism"),
        help=f"Chatbots processed at once [default: {DEFAULT_PARALLELISM}, {_PROJECT_NOTE} "
        "parallelism].",
    ),
    click.option(
        "--rate-limit",
        type=click.FloatRange(0),
        default=0.0,
        **from_project("rateLimit"),
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
        help="Accept a plan that exceeds the safety caps (archiving more than "
        f"{DEFAULT_MAX_ARCHIVE_PERCENT:g}% of a chatbot's attributes, when it has at least "
        f"{DEFAULT_PERCENT_CAP_FROM}, or more than --max-archives).",
    ),
    click.option(
        "--max-archives",
        type=click.IntRange(0),
        default=DEFAULT_MAX_ARCHIVES,
        **from_project("maxArchives"),
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
        default=DEFAULT_MAX_CONTACT_READS,
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


def state_option(func: F) -> F:
    """``--state`` and ``--config`` for a command that needs only the state's location: it is
    called with ``state_path`` (the flag, BOTCTL_STATE, botctl.yaml's state, or the default)."""
    return stack(STATE, _config_option(expose=False))(func)


# --- typed options -------------------------------------------------------------------------
#
# A command is called with one frozen dataclass (``takes``) built from its parsed options:
# each option's parameter name is a field, the groups shared by several commands
# (``ConfigGroup``...) are fields of their own (``group``). ``build`` refuses an option without
# a field and a field without an option, so a renamed option is an error at its first run
# (and in tests/test_cli.py for every command), never a value that silently reads as False.

G = TypeVar("G")
T = TypeVar("T")


def group(cls: type[G]) -> G:
    """A field holding a group of options, built from the same parsed options."""
    return cast(G, field(metadata={"group": cls}))


@dataclass(frozen=True, kw_only=True)
class SelectionGroup:
    """--target, -l/--selector, --exclude."""

    targets: tuple[str, ...]
    selector: tuple[Requirement, ...]
    excludes: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ConfigGroup:
    """``config_options``: the configuration and which of its chatbots."""

    paths: tuple[Path, ...]
    config_file: FoundProject  # --config, loaded
    allow_unknown_models: bool
    disabled_warnings: frozenset[str]
    selection: SelectionGroup = group(SelectionGroup)


@dataclass(frozen=True, kw_only=True)
class BoundsGroup:
    """``request_bounds``: the bounds of one request."""

    request_timeout: float
    max_response_bytes: int
    retry_base_delay: float


@dataclass(frozen=True, kw_only=True)
class ServiceGroup:
    """``service_options``: the service, the state, and the pace."""

    api_url: str | None
    sandbox: bool
    state_path: str
    state_encryption: str | None  # "passphrase" or "none" for a new state; None: as it is
    no_reads: bool
    parallelism: int
    rate_limit: float
    debug: bool
    bounds: BoundsGroup = group(BoundsGroup)


@dataclass(frozen=True, kw_only=True)
class ContactGroup:
    """``contact_options``: contacts' values, for archives and renames."""

    no_contact_reads: bool
    max_contact_reads: int
    allow_archive_with_values: bool


@dataclass(frozen=True, kw_only=True)
class SafetyGroup:
    """``safety_options``."""

    force: bool
    max_archives: int


def whole_configuration(
    paths: tuple[Path, ...], config_file: FoundProject, allow_unknown_models: bool
) -> ConfigGroup:
    """The configuration of a command that selects no chatbots with -l/--target/--exclude
    (its own arguments name them): ``conversations pull``, ``preview acquire``."""
    return ConfigGroup(
        paths=paths,
        config_file=config_file,
        allow_unknown_models=allow_unknown_models,
        disabled_warnings=frozenset(),
        selection=SelectionGroup(targets=(), selector=(), excludes=()),
    )


def option_names(cls: type) -> list[str]:
    """The parameter names ``cls`` takes, groups flattened."""
    names: list[str] = []
    for f in fields(cls):
        inner = f.metadata.get("group")
        names += option_names(inner) if inner is not None else [f.name]
    return names


def build(cls: type[T], params: dict[str, Any]) -> T:
    """``cls`` from click's parameters: every field filled, every parameter used."""
    left = dict(params)
    built = _fill(cls, left)
    if left:
        raise TypeError(f"{cls.__name__} has no field for the option(s) {', '.join(sorted(left))}")
    return built


def _fill(cls: type[T], left: dict[str, Any]) -> T:
    values: dict[str, Any] = {}
    for f in fields(cast(Any, cls)):
        inner = f.metadata.get("group")
        if inner is not None:
            values[f.name] = _fill(inner, left)
        elif f.name in left:
            values[f.name] = left.pop(f.name)
        else:
            raise TypeError(f"no option gives {cls.__name__}.{f.name}")
    return cls(**values)


def takes(cls: type[T]) -> Callable[[Callable[[T], int]], Callable[..., int]]:
    """The command's function is called with one ``cls`` built from its options."""

    def decorate(func: Callable[[T], int]) -> Callable[..., int]:
        @functools.wraps(func)
        def command(**params: Any) -> int:
            return func(build(cls, params))

        command.options_type = cls  # type: ignore[attr-defined]
        return command

    return decorate


def forwards(cls: type) -> Callable[[F], F]:
    """For a command that takes another command's options and hands them on (``promote``:
    ``apply``'s) through ``build(cls, ...)``: tests/test_cli.py checks its options against
    ``cls``."""

    def mark(func: F) -> F:
        func.forwards_to = cls  # type: ignore[attr-defined]
        return func

    return mark


def options_type(command: click.Command) -> type | None:
    """The dataclass a command's function takes (``takes``), if any."""
    return cast("type | None", getattr(command.callback, "options_type", None))


def selection(options: SelectionGroup) -> Selection:
    from botctl.config.selection import Selection

    return Selection(targets=options.targets, selector=options.selector, excludes=options.excludes)


def service(options: ServiceGroup) -> ServiceOptions:
    """How the run talks to the service (``debug`` traces every request to stderr)."""
    from botctl.service.options import ServiceOptions

    trace = (lambda line: err(f"debug: {line}")) if options.debug else None
    watch = limit_watch()
    return ServiceOptions(
        api_url=options.api_url,
        sandbox=options.sandbox,
        rate_limit=options.rate_limit,
        timeout=options.bounds.request_timeout,
        max_response_bytes=options.bounds.max_response_bytes,
        retry_base_delay=options.bounds.retry_base_delay,
        no_reads=options.no_reads,
        trace=trace,
        stats=watch.stats,
        on_wait=watch.wait,
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


def workspace(
    config: ConfigGroup,
    service_group: ServiceGroup | None = None,
    safety: SafetyGroup | None = None,
    contacts: ContactGroup | None = None,
    *,
    strict: bool = False,
    lock_timeout: float = 0.0,
    reassert: bool = False,
    skip_missing: bool = False,
    changed_since: str | None = None,
) -> Workspace:
    """The run's configuration from the options of the command and the project file."""
    from botctl.pipeline.workspace import Workspace
    from botctl.reconcile.safety import SafetyPolicy

    found = config.config_file.get()
    paths = config.paths or (found.paths if found is not None else ())
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
    project_disabled = found.disabled_warnings if found is not None else frozenset()
    ws = Workspace(
        paths=paths,
        environ=os.environ,
        selection=selection(config.selection),
        allow_unknown_models=config.allow_unknown_models,
        disabled_warnings=config.disabled_warnings | project_disabled,
        strict=strict,
        lock_timeout=lock_timeout,
        reassert=reassert,
        skip_missing=skip_missing,
        changed_since=changed_since or None,
        project_file=found.file if found is not None else None,
        paths_from_project=not config.paths,
    )
    if service_group is not None:
        ws = replace(
            ws,
            state_path=service_group.state_path,
            state_encryption=service_group.state_encryption,
            service=service(service_group),
            parallelism=service_group.parallelism,
        )
    if safety is not None:
        ws = replace(ws, policy=SafetyPolicy(max_archives=safety.max_archives), force=safety.force)
    if contacts is not None:
        ws = replace(
            ws,
            service=replace(ws.service, no_contact_reads=contacts.no_contact_reads),
            contacts=contact_policy(contacts),
        )
    return ws


def contact_policy(options: ContactGroup) -> ContactPolicy:
    from botctl.reconcile.usage import ContactPolicy

    return ContactPolicy(
        max_reads=options.max_contact_reads,
        allow_archive_with_values=options.allow_archive_with_values,
    )
