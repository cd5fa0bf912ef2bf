"""``botctl agent``: the GitOps loop (see ``botctl.agent``), and ``botctl agent
sync|suspend|resume|status`` to steer a running one (``cli.agent_control``).

``agent`` is a group whose first argument decides: one of the verbs is that subcommand;
anything else runs the loop with the arguments as they are (``botctl agent SOURCE ...``, as
documented before the verbs existed). A source directory named like a verb is written
``./sync``."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import click
from click.core import ParameterSource

from botctl.cli.agent_control import VERBS, control_token_option
from botctl.cli.agent_gates import gate_options, gate_settings, gating_for
from botctl.cli.drift import Duration
from botctl.cli.options import (
    ALLOW_UNKNOWN_MODELS,
    DISABLE_WARNING,
    ConfigGroup,
    FoundProject,
    ProjectOption,
    SafetyGroup,
    SelectionGroup,
    ServiceGroup,
    build,
    byte_size,
    group,
    safety_options,
    selection_options,
    service_options,
    takes,
    workspace,
)
from botctl.defaults import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_DRAIN_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_WATCHDOG,
    OLD_STATE_KEY_ENV,
    REVISION_MAX_BYTES,
    REVISION_MAX_FILE_BYTES,
    REVISION_MAX_FILES,
    STATE_KEY_ENV,
)
from botctl.errors import EXIT_ERROR, EXIT_OK, BotctlError

if TYPE_CHECKING:
    from botctl.agent.auth import Access
    from botctl.agent.gating import GateSettings
    from botctl.agent.log import Log
    from botctl.agent.loop import Agent, AgentSettings
    from botctl.agent.sdnotify import SystemdNotifier
    from botctl.config.project import Project

DEFAULT_LISTEN = "127.0.0.1:9464"
# Seconds past --drain-timeout a stop may take (the lease released, notifications flushed)
# before whatever still runs is abandoned.
STOP_GRACE = 10.0


def _listen(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    try:
        number = int(port)
        if not sep or not host or not 0 <= number <= 65535:
            raise ValueError
        ipaddress.ip_address(host) if host[0].isdigit() or ":" in host else None
    except ValueError:
        raise click.BadParameter(
            f"{value!r}: give HOST:PORT, e.g. {DEFAULT_LISTEN} (port 0: any free)"
        ) from None
    return host, number


def _events(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> frozenset[str]:
    from botctl.agent.notify import DEFAULT_EVENTS, EVENTS

    words = [w.strip() for text in value for w in text.split(",") if w.strip()]
    unknown = sorted(set(words) - set(EVENTS))
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r}: choose from {', '.join(EVENTS)}")
    return frozenset(words or DEFAULT_EVENTS)


def _urls(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[str, ...]:
    from botctl.values import url_origin

    for url in value:
        if not url.startswith(("http://", "https://")) or len(url.split("://", 1)[1]) < 1:
            # Never the URL itself: a Slack webhook's path is its credential.
            raise click.BadParameter(f"{url_origin(url)!r}...: give an http:// or https:// URL")
    return value


def _windows(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[Any, ...]:
    from botctl.agent.windows import EXAMPLE, WindowError, parse_window

    found = []
    for text in value:
        try:
            found.append(parse_window(text))
        except WindowError as exc:
            raise click.BadParameter(f"{text!r}: {exc} (as {EXAMPLE!r})") from None
    return tuple(found)


def _seconds(value: timedelta | None) -> float | None:
    return None if value is None else value.total_seconds()


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    source: str
    interval: timedelta
    auto_apply: bool
    self_heal: bool
    reassert_every: timedelta | None
    watch_budget: float
    watch_slice: timedelta
    listen: tuple[str, int]
    allowed_hosts: tuple[str, ...]
    max_connections: int
    watchdog: timedelta
    webhook_secret_env: str | None
    notify_urls: tuple[str, ...]
    notify_on: frozenset[str]
    log_format: Literal["text", "json"]
    drain_timeout: float
    lease: timedelta
    backoff_max: timedelta
    cache_dir: Path
    fetch_timeout: timedelta
    max_revision_files: int
    max_revision_bytes: int
    acknowledged_file: Path | None
    history: int
    page_refresh: int
    allow_unknown_models: bool
    disabled_warnings: frozenset[str]
    control_token_env: str
    deny_windows: tuple[Any, ...]  # agent.windows.DenyWindow
    test: bool
    rollback_on_failure: bool
    stages: tuple[Any, ...]  # agent.stages' Stage
    soak: timedelta | None
    yield_lease: bool
    selection: SelectionGroup = group(SelectionGroup)
    service: ServiceGroup = group(ServiceGroup)
    safety: SafetyGroup = group(SafetyGroup)


@click.command("run", hidden=True)
@click.argument("source")
@click.option(
    "--interval",
    type=Duration(),
    default="60s",
    show_default=True,
    help="Time between fetches of the source (a webhook asks for one at once); the drift "
    "watch reads no chatbot more often than this.",
)
@click.option(
    "--auto-apply",
    is_flag=True,
    help="Apply each new revision (default: plan only; chatbots show OutOfSync).",
)
@click.option(
    "--self-heal",
    is_flag=True,
    help="Re-apply values changed outside (a dashboard edit) as soon as drift finds them; "
    "needs --auto-apply.",
)
@click.option(
    "--reassert-every",
    type=Duration(),
    default=None,
    metavar="DURATION",
    help="With --self-heal: also re-send the write-only settings (apply --reassert) this "
    "often, so an edit no read can see is undone within that period.",
)
@click.option(
    "--watch-budget",
    type=click.FloatRange(0, 100, min_open=True),
    default=20,
    show_default=True,
    metavar="PERCENT",
    help="The drift watch sends at most this share of each API key's rate limit (--rate-limit, "
    "or the limit the service announces): a slice of chatbots at a time, those read longest "
    "ago first, so the fleet is covered every (its reads / the budget) seconds, at least "
    "--interval; no limit known, the whole fleet every --interval. A push never waits for it.",
)
@click.option(
    "--watch-slice",
    type=Duration(),
    default="10s",
    show_default=True,
    metavar="DURATION",
    help="Time between two slices of the drift watch at its budget: longer means larger "
    "slices, fewer chatbot-list reads, statuses refreshed in bigger steps.",
)
@click.option(
    "--listen",
    default=DEFAULT_LISTEN,
    show_default=True,
    callback=_listen,
    metavar="HOST:PORT",
    help="Where to serve /healthz, /readyz, /metrics, /status, the status page and "
    "/hooks/git (port 0: any free; the port is logged).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME",
    help="A name the listener answers for in the Host header (repeatable; *.example.com for "
    "its subdomains, * for any). IP addresses and localhost are always answered; any other "
    "name is refused (421), against DNS rebinding.",
)
@click.option(
    "--max-connections",
    type=click.IntRange(2),
    metavar="N",
    default=DEFAULT_MAX_CONNECTIONS,
    show_default=True,
    help="Connections the listener keeps open at once; past it the oldest idle or half-sent "
    "one is closed (each has 10 s to send its request head).",
)
@click.option(
    "--watchdog",
    type=Duration(),
    default=DEFAULT_WATCHDOG,
    show_default=True,
    help="/healthz fails (503) when the loop has made no progress this long after its next "
    "cycle was due: no cycle started or finished, no request sent or answered.",
)
@click.option(
    "--webhook-secret-env",
    metavar="VAR",
    help="Variable holding the webhook secret: POST /hooks/git accepts GitHub's "
    "X-Hub-Signature-256 or GitLab's X-Gitlab-Token made with it (without it, 401).",
)
@click.option(
    "--notify",
    "notify_urls",
    multiple=True,
    metavar="URL",
    callback=_urls,
    help="POST a JSON notification (Slack-compatible `text`, and the `event`) to URL (repeatable).",
)
@click.option(
    "--notify-on",
    "notify_on",
    multiple=True,
    callback=_events,
    metavar="EVENTS",
    help="Which events to notify: failed, test_failed, drift, healed, recovered, synced "
    "(comma-separated; default: all but synced).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="json: one JSON object per line.",
)
@click.option(
    "--drain-timeout",
    type=click.FloatRange(0),
    default=DEFAULT_DRAIN_TIMEOUT,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM or SIGINT, wait this long for an apply's requests in flight, then exit 0.",
)
@click.option(
    "--lease",
    type=Duration(),
    default="30s",
    show_default=True,
    help="The state lock is held as a lease renewed every third of this: a standby agent "
    "takes over within it when the active one dies or freezes. Nothing is sent to the service "
    "unless a third of it is left (a holder paused past it sends nothing when it resumes).",
)
@click.option(
    "--backoff-max",
    type=Duration(),
    default="5m",
    show_default=True,
    help="Longest wait between failing cycles (doubling from 2 s).",
)
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    default=Path(".botctl/agent"),
    show_default=True,
    help="Where a git source is fetched (the agent's own repository) and revisions are "
    "copied; each agent takes a slot of its own (slot-0, slot-1...): agents started from one "
    "directory never share one.",
)
@click.option(
    "--fetch-timeout",
    type=Duration(),
    default="60s",
    show_default=True,
    help="Deadline of each git command of the source (a fetch above all): past it the git "
    "process group is killed and the cycle fails (and backs off) naming the fetch.",
)
@click.option(
    "--max-revision-files",
    type=click.IntRange(1),
    default=REVISION_MAX_FILES,
    show_default=True,
    metavar="N",
    help="Most YAML files one revision may hold; more: an invalid revision, not applied.",
)
@click.option(
    "--max-revision-bytes",
    type=byte_size,
    default=REVISION_MAX_BYTES,
    show_default=f"{REVISION_MAX_BYTES >> 20}MiB",
    metavar="SIZE",
    help="Most bytes of YAML one revision may hold (K, M, G: binary units); more: an invalid "
    f"revision. One file may hold {REVISION_MAX_FILE_BYTES >> 20} MiB.",
)
@click.option(
    "--acknowledged",
    "acknowledged_file",
    type=click.Path(path_type=Path, dir_okay=False, exists=True),
    metavar="FILE",
    help="Drift this file acknowledges (drift --accept) is neither counted nor healed.",
)
@click.option(
    "--history",
    type=click.IntRange(1, 1000),
    default=20,
    show_default=True,
    help="Cycles kept in /status and on the page.",
)
@click.option(
    "--page-refresh",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    metavar="SECONDS",
    help="How often the status page reloads itself.",
)
@control_token_option(
    "Variable holding the control token (16 characters or more): botctl agent sync, "
    "suspend and resume need it as a bearer token; /status and the page need it too once it "
    "is set, and always when --listen is not on loopback (unset there: 401)."
)
@click.option(
    "--deny-window",
    "deny_windows",
    multiple=True,
    callback=_windows,
    metavar="WINDOW",
    help="When nothing is applied: DAYS HH:MM-HH:MM [ZONE], e.g. 'Sat-Sun 00:00-24:00 "
    "Europe/Berlin', 'Mon-Fri 22:00-06:00' (UTC; an end before the start crosses midnight). "
    "Repeatable. Drift is still read and reported.",
)
@gate_options
@ALLOW_UNKNOWN_MODELS
@DISABLE_WARNING
@selection_options
@service_options
@safety_options
@takes(AgentOptions)
def run_agent(o: AgentOptions) -> int:
    """Run the GitOps loop: pull SOURCE, reconcile it continuously.

    SOURCE is a directory, or a branch of a git repository: git+<url>#<branch>:<path>
    (fetched shallow into --cache-dir; https credentials from git's own helpers or
    BOTCTL_GIT_TOKEN). Its botctl.yaml, at the path's root, is honoured as by every command,
    but the API URL and the state are the operator's, fixed: --api-url (BOTCTL_API_URL) and
    --state (BOTCTL_STATE, default .botctl/state.json); a revision naming others is invalid.
    A revision reads only the variables BOTCTL_ALLOW_ENV exposes (README, Trust).

    Every --interval and at once on a signed webhook: fetch; validate a new revision (one
    that fails is reported, located, and not applied: the last good one stays); with
    --auto-apply, apply it, reading only the chatbots it changes. Between fetches the drift
    watch reads the fleet a slice at a time within --watch-budget of each key's rate limit,
    and with --self-heal applies what changed outside; each chatbot's status (Synced,
    OutOfSync, Drifted, Failed, Missing) comes from its last read. Failing cycles back off
    exponentially. Only the holder of the state's lease writes: start two for high
    availability. SIGTERM or SIGINT drains an apply in flight, records it, releases the
    lease and exits 0.

    Steer a running agent with `botctl agent sync|suspend|resume|status --url URL`
    (`botctl agent sync --help`), authenticated with the control token the variable
    --control-token-env names (BOTCTL_CONTROL_TOKEN), which also guards /status and the
    page whenever it is set or --listen is not on loopback. Nothing is applied while
    suspended or inside a --deny-window. A source directory named like a verb (sync,
    suspend, resume, status, run) is written ./sync.

    \b
    Examples:
      botctl agent bots/ --sandbox                       # try it: plan only, page on :9464
      botctl agent 'git+https://github.com/acme/bots.git#main:bots' \\
          --auto-apply --self-heal --state s3://acme-botctl/state.json \\
          --webhook-secret-env HOOK_SECRET --notify https://hooks.slack.com/...
    """
    from botctl.agent.control import Controls
    from botctl.agent.log import Log, Redactor
    from botctl.agent.loop import Agent
    from botctl.agent.notify import Notifier
    from botctl.agent.source import RevisionLimits, open_source
    from botctl.agent.status import AgentStatus
    from botctl.store.backend import redact
    from botctl.store.backends import open_backend
    from botctl.store.lock import Lease
    from botctl.trust import ExposedEnviron, Exposure

    gates = _check_options(o)
    access = _access(o)
    state = o.service.state_path
    open_backend(state).close()  # a bad --state is a clear error now, not in every cycle

    secrets: set[str] = set()
    own = _own_secrets(o)
    redactor = Redactor(os.environ, {DEFAULT_API_KEY_ENV, *own}, secrets)
    log = Log(o.log_format, lambda line: click.echo(line, err=True), redactor)
    limits = RevisionLimits(o.max_revision_files, total_bytes=o.max_revision_bytes)
    src = open_source(o.source, o.cache_dir, timeout=o.fetch_timeout.total_seconds(), limits=limits)
    status = AgentStatus(
        src.description,
        history=o.history,
        watchdog=o.watchdog.total_seconds(),
        controls=Controls(o.deny_windows),
    )
    _open_files(log)
    if src.slot is not None:
        log.info("cache", f"revisions are kept under {src.slot.path}")
    # A revision's files read only the variables the operator exposes, never the agent's own
    # secrets (the webhook's included): README, Trust.
    environ = ExposedEnviron(os.environ, Exposure.of(os.environ, never=own))
    settings = _settings(o)
    lease = Lease(state, duration=o.lease.total_seconds())
    notifier = Notifier(o.notify_urls, o.notify_on, redactor, log, status.metrics)
    make_workspace = _workspaces(o, environ, secrets)
    gating = gating_for(gates, status.metrics.registry)
    runner = Agent(src, make_workspace, settings, status, lease, log, notifier, redactor, gating)
    if not access.loopback and not access.configured:
        log.warning("control", _unguarded(o))
    _serve(o, runner, redact(os.fspath(state)), access)
    sys.stderr.flush()
    return EXIT_OK


def _workspaces(
    o: AgentOptions, environ: Mapping[str, str], secrets: set[str]
) -> Callable[[Path], Any]:
    """Each revision's workspace. An option given neither as a flag nor in the environment
    takes a revision's own botctl.yaml value (each revision may carry one), as every command
    takes its project file's; but the API URL and the state are the operator's, fixed for the
    agent's lifetime: a revision whose botctl.yaml names others is invalid (README, Trust)."""
    from botctl.config.project import PROJECT_FILE_NAMES, load_project

    ctx = click.get_current_context()
    given = dict(ctx.params)
    open_to_project = [
        p
        for p in ctx.command.params
        if isinstance(p, ProjectOption)
        and p.name not in (None, "state_path", "api_url")
        and ctx.get_parameter_source(p.name) is ParameterSource.DEFAULT
    ]

    def make_workspace(directory: Path) -> Any:
        file = next((directory / n for n in PROJECT_FILE_NAMES if (directory / n).is_file()), None)
        found = None
        if file is not None:
            found = load_project(file, environ, boundary=directory)
            _check_pinned(found, o)
        params = dict(given)
        for p in open_to_project:
            value = found.value(p.project_field) if found is not None else None
            if value is not None and p.name is not None:
                params[p.name] = p.type_cast_value(ctx, value)
        revision = build(AgentOptions, params)
        config = ConfigGroup(
            paths=() if found is not None else (directory,),
            config_file=FoundProject(found),
            allow_unknown_models=revision.allow_unknown_models,
            disabled_warnings=revision.disabled_warnings,
            selection=revision.selection,
        )
        ws = workspace(config, revision.service, revision.safety)
        # One set of secrets for every revision's workspace: the loader adds to it, and each
        # run's client is handed a redactor of all it holds (those of older revisions too).
        return replace(ws, secrets=secrets, environ=environ)

    return make_workspace


def _check_pinned(found: Project, o: AgentOptions) -> None:
    """A revision's botctl.yaml may repeat the agent's API URL and state, never change
    them: a commit must not move where the keys go, nor the state and its lease."""
    from botctl.values import mask_url_credentials

    pins = (
        ("apiUrl", o.service.api_url, "--api-url / BOTCTL_API_URL"),
        ("state", o.service.state_path, "--state / BOTCTL_STATE"),
    )
    for field, operator, flag in pins:
        written = getattr(found.settings, field)
        if written is None or (field == "apiUrl" and o.service.sandbox):
            continue
        if operator is not None and written.rstrip("/") == str(operator).rstrip("/"):
            continue
        raise BotctlError(
            f"{found.at(field)}: {field} {mask_url_credentials(written)!r} differs from the "
            f"agent's ({mask_url_credentials(str(operator)) if operator else 'none'}, {flag}): "
            f"the agent's {field} is its operator's, fixed for its lifetime; a revision may "
            "repeat it, never change it (remove it from botctl.yaml, or start the agent with "
            "it)"
        )


def _open_files(log: Log) -> None:
    """The soft limit on open files raised to the hard one, said in the log: a flood of
    connections meets the listener's cap, not the process's limit."""
    from botctl.agent.guard import raise_open_file_limit

    found = raise_open_file_limit()
    if found is None:
        return
    before, after = found
    if after > before:
        log.info("limits", f"open files: soft limit raised from {before} to {after}")
    else:
        log.info("limits", f"open files: limit {after}")


def _listening(host: str, port: int) -> socket.socket:
    try:
        return socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
        )
    except OSError as exc:
        why = str(exc.strerror).split(" (while attempting")[0]
        raise BotctlError(f"--listen {host}:{port}: cannot listen: {why}") from None


def _stop(runner: Agent, systemd: SystemdNotifier, deadline: _StopDeadline, signum: int) -> None:
    deadline.arm()
    systemd.send("STOPPING=1")
    runner.request_stop(signum)


def _check_options(o: AgentOptions) -> GateSettings:
    """Options that contradict each other, or name a variable that is empty: usage errors.
    The gates' settings (``agent.gating.GateSettings``), checked too."""
    if o.self_heal and not o.auto_apply:
        raise click.UsageError("--self-heal re-applies the applied revision: add --auto-apply")
    if o.reassert_every is not None and not o.self_heal:
        raise click.UsageError("--reassert-every heals what no read can see: add --self-heal")
    secret_env = o.webhook_secret_env
    if secret_env and not os.environ.get(secret_env):
        raise click.UsageError(f"--webhook-secret-env {secret_env}: the variable is empty or unset")
    return gate_settings(o)


def _settings(o: AgentOptions) -> AgentSettings:
    from botctl.agent.loop import AgentSettings

    return AgentSettings(
        interval=o.interval.total_seconds(),
        auto_apply=o.auto_apply,
        self_heal=o.self_heal,
        reassert_every=_seconds(o.reassert_every),
        backoff_max=o.backoff_max.total_seconds(),
        drain_timeout=o.drain_timeout,
        acknowledged=o.acknowledged_file,
        watch_budget=o.watch_budget,
        watch_slice=max(0.1, o.watch_slice.total_seconds()),
        yield_lease=o.yield_lease,
    )


def _own_secrets(o: AgentOptions) -> set[str]:
    """The variables of the agent's own secrets: masked everywhere, never exposed to a
    revision's files."""
    from botctl.agent.source import TOKEN_VARIABLE

    secret_env = o.webhook_secret_env
    return {
        TOKEN_VARIABLE,
        STATE_KEY_ENV,
        OLD_STATE_KEY_ENV,
        o.control_token_env,
        *([secret_env] if secret_env else []),
    }


def _unguarded(o: AgentOptions) -> str:
    return (
        f"--listen {o.listen[0]} is beyond loopback and {o.control_token_env} is unset: "
        "/status and the page answer 401 and the control API is off until the agent is "
        "started with a control token"
    )


def _access(o: AgentOptions) -> Access:
    """Who may read /status and steer (``agent.auth``): a token too weak is refused now."""
    from botctl.agent.auth import Access, is_loopback, weak_token

    token = os.environ.get(o.control_token_env) or None
    weak = weak_token(token) if token else None
    if weak is not None:
        raise click.UsageError(f"the control token in {o.control_token_env} is too short: {weak}")
    return Access(token, loopback=is_loopback(o.listen[0]), variable=o.control_token_env)


def _serve(o: AgentOptions, runner: Agent, state: str, access: Access) -> None:
    """Listen, run the loop until a signal stops it, then close everything."""
    from botctl.agent.guard import ConnectionGuard, Throttle
    from botctl.agent.hosts import AllowedHosts
    from botctl.agent.listener import HEAD_TIMEOUT, make_app, make_server
    from botctl.agent.sdnotify import SystemdNotifier
    from botctl.agent.source import GitSource
    from botctl.agent.steering import Steering

    status, log, src = runner.status, runner.log, runner.source
    steering = Steering(runner)
    secret_env = o.webhook_secret_env
    app = make_app(
        status,
        runner.trigger,
        runner.redact,
        webhook_secret=lambda: os.environ.get(secret_env) if secret_env else None,
        branch=src.branch if isinstance(src, GitSource) else None,
        refresh=o.page_refresh,
        allowed_hosts=AllowedHosts.of(o.allowed_hosts),
        access=access,
        steering=steering,
    )
    host, port = o.listen
    sock = _listening(host, port)
    systemd = SystemdNotifier(os.environ)
    # Past --drain-timeout plus STOP_GRACE seconds after the first signal, whatever still runs
    # is abandoned: git's process groups killed, and the process exits (1).
    deadline = _StopDeadline(o.drain_timeout + STOP_GRACE, log)
    # Errors repeated many times a second (accept failing with EMFILE, uvicorn's warnings on
    # bad requests) are logged once a minute, with a count of the others.
    throttle = Throttle(lambda message: log.warning("listener", message))
    uvicorn_log, through = logging.getLogger("uvicorn.error"), throttle.handler()
    closed = status.metrics.connections_closed
    guard = ConnectionGuard(
        o.max_connections, HEAD_TIMEOUT, lambda reason: closed.labels(reason=reason).inc()
    )

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(throttle.loop_errors())
        runner.notifier.start()
        server = make_server(app, host, port, guard)
        serving = asyncio.create_task(server.serve(sockets=[sock]))
        bound = sock.getsockname()[1]
        log.info(
            "listen", f"listening on http://{host}:{bound}", source=src.description, state=state
        )
        systemd.send("READY=1")
        watching = asyncio.create_task(systemd.keep_watch(status.watchdog))
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, _stop, runner, systemd, deadline, sig)
        try:
            await runner.run()
        finally:
            watching.cancel()
            await steering.close()
            server.should_exit = True
            await runner.notifier.close(timeout=min(5.0, runner.settings.drain_timeout))
            await serving
            runner.lease.close()
            log.info("stop", "stopped: lease released")

    uvicorn_log.addHandler(through)
    uvicorn_log.propagate = False
    try:
        asyncio.run(main())
    finally:
        uvicorn_log.removeHandler(through)
        sock.close()


class _StopDeadline:
    """The last resort of a stop: a timer armed by the first signal that, should the agent
    still run when it fires (a state backend or a thread that does not answer), kills every
    git process group and exits at once."""

    def __init__(self, seconds: float, log: Log) -> None:
        self.seconds = seconds
        self.log = log
        self._timer: threading.Timer | None = None

    def arm(self) -> None:
        if self._timer is None:
            self._timer = threading.Timer(self.seconds, self._fire)
            self._timer.daemon = True
            self._timer.start()

    def _fire(self) -> None:
        from botctl import gitexec

        gitexec.kill_all()
        with contextlib.suppress(Exception):
            self.log.error("stop", f"still running {self.seconds:g} s after the signal: exiting")
        sys.stderr.flush()
        os._exit(EXIT_ERROR)


class AgentGroup(click.Group):
    """``botctl agent``: a verb (``sync``, ``suspend``, ``resume``, ``status``) as its first
    argument is that subcommand; anything else (a SOURCE, an option, ``--help``) runs the loop
    with every argument as given. The loop is also the hidden subcommand ``run``."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        if args and args[0] in self.commands:
            return super().make_context(info_name, args, parent, **extra)
        return run_agent.make_context(info_name, args, parent, **extra)


agent = AgentGroup(
    "agent",
    commands=[run_agent, *VERBS],
    help="Run the GitOps loop on SOURCE, or steer a running agent (sync, suspend, resume, status).",
)
