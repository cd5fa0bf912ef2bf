"""``botctl agent sync|suspend|resume|status``: steer a running agent over its control API
(``agent.remote``), authenticated with the control token."""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, TypeVar

import click

from botctl.cli.drift import Duration
from botctl.cli.options import group, stack, takes
from botctl.errors import EXIT_ERROR, EXIT_OK

F = TypeVar("F", bound=Callable[..., Any])
CONTROL_TOKEN_ENV = "BOTCTL_CONTROL_TOKEN"
AGENT_URL_ENV = "BOTCTL_AGENT_URL"
DEFAULT_URL = "http://127.0.0.1:9464"
VALUE_WIDTH = 80  # characters of a value shown in `agent status`'s text


def _url(ctx: click.Context, param: click.Parameter, value: str) -> str:
    if not value.startswith(("http://", "https://")):
        raise click.BadParameter(f"{value[:80]!r}: give the agent's http:// or https:// URL")
    return value


def control_token_option(help: str) -> Callable[[F], F]:
    """``--control-token-env``, on the loop and on every verb (with its help)."""
    return click.option(
        "--control-token-env",
        metavar="VAR",
        default=CONTROL_TOKEN_ENV,
        show_default=True,
        help=help,
    )


@dataclass(frozen=True, kw_only=True)
class RemoteGroup:
    url: str
    control_token_env: str
    output: Literal["text", "json"]


remote_options = stack(
    click.option(
        "--url",
        envvar=AGENT_URL_ENV,
        metavar="URL",
        default=DEFAULT_URL,
        show_default=True,
        callback=_url,
        help=f"The agent's listener (or the Service in front of its replicas; {AGENT_URL_ENV}).",
    ),
    control_token_option("Variable holding the control token (the agent's own)."),
    click.option(
        "--format",
        "output",
        type=click.Choice(["text", "json"]),
        default="text",
        show_default=True,
        help="json: the agent's answer as it is.",
    ),
)
BY = click.option(
    "--by",
    metavar="NAME",
    default=None,
    help="Who asks, for the agent's log and status (default: your user name).",
)


def _remote(o: RemoteGroup) -> Any:
    from botctl.agent.remote import Remote

    return Remote(o.url, os.environ.get(o.control_token_env) or None, o.control_token_env)


def _say(o: RemoteGroup, doc: dict[str, Any], text: Callable[[], str]) -> None:
    from botctl.values import controls_shown, json_controls_escaped

    token = os.environ.get(o.control_token_env, "")
    shown = json_controls_escaped(json.dumps(doc, indent=2)) if o.output == "json" else text()
    if len(token) >= 4:  # never echoed, whatever an agent answers
        shown = shown.replace(token, "(secret)")
    click.echo(controls_shown(shown) if o.output == "text" else shown)


def _by(given: str | None) -> str | None:
    if given:
        return given
    try:
        return getpass.getuser()
    except (OSError, KeyError):
        return None


@dataclass(frozen=True, kw_only=True)
class SyncOptions:
    override_window: bool
    reason: str | None
    by: str | None
    wait: bool
    timeout: timedelta
    remote: RemoteGroup = group(RemoteGroup)


@click.command("sync")
@click.option(
    "--override-window",
    is_flag=True,
    help="Apply in this cycle although a --deny-window holds (once; needs --reason, logged).",
)
@click.option("--reason", metavar="TEXT", help="Why (logged; needed with --override-window).")
@BY
@click.option(
    "--wait/--no-wait",
    default=True,
    show_default=True,
    help="Wait for the cycle to finish and say what it did (exit 1 if it failed).",
)
@click.option(
    "--timeout",
    type=Duration(),
    default="5m",
    show_default=True,
    help="How long to wait for the cycle.",
)
@remote_options
@takes(SyncOptions)
def sync(o: SyncOptions) -> int:
    """Run a cycle of a running agent now (ending a backoff).

    \b
    Examples:
      botctl agent sync --url http://127.0.0.1:9464
      botctl agent sync --override-window --reason "hotfix INC-42"
    """
    if o.override_window and not o.reason:
        raise click.UsageError("--override-window needs --reason: it is logged with the apply")
    remote = _remote(o.remote)
    body = {"by": _by(o.by), "reason": o.reason, "overrideWindow": o.override_window}
    asked = remote.control("sync", body)
    _say(o.remote, asked, lambda: _asked_words(asked))
    if not o.wait:
        return EXIT_OK
    cycle = remote.wait_for_cycle(int(asked["cycle"]), o.timeout.total_seconds())
    _say(o.remote, cycle, lambda: _cycle_words(cycle))
    return EXIT_ERROR if cycle.get("result") == "failed" else EXIT_OK


def _asked_words(asked: dict[str, Any]) -> str:
    words = f"cycle {asked['cycle']} asked for: runs {asked['when']}"
    if asked.get("windowOverride"):
        words += "; it applies although the deny window holds (override logged)"
    elif asked.get("held"):
        words += f"; it applies nothing: {asked['held']}"
    elif not asked.get("applies"):
        words += "; plan only (the agent has no --auto-apply): it applies nothing"
    return words


def _cycle_words(cycle: dict[str, Any]) -> str:
    words = f"cycle {cycle['number']}: {cycle['result']}"
    revision = (cycle.get("revision") or "").removeprefix("dir:")[:12]
    if revision:
        words += f" at {revision}"
    if cycle.get("applied") or cycle.get("failed"):
        words += f" ({cycle.get('applied', 0)} applied, {cycle.get('failed', 0)} failed)"
    if cycle.get("held"):
        words += f"; held: {cycle['held']}"
    if cycle.get("error"):
        words += f"\n{cycle['error']}"
    return words


@dataclass(frozen=True, kw_only=True)
class SuspendOptions:
    reason: str | None
    by: str | None
    remote: RemoteGroup = group(RemoteGroup)


@click.command("suspend")
@click.option("--reason", metavar="TEXT", help="Why, shown in status and on the page.")
@BY
@remote_options
@takes(SuspendOptions)
def suspend(o: SuspendOptions) -> int:
    """Stop a running agent applying, until `botctl agent resume`.

    Drift is still read and reported; the suspension is kept in the state, so it holds on
    whichever replica takes over, and across restarts.
    """
    doc = _remote(o.remote).control("suspend", {"by": _by(o.by), "reason": o.reason})
    _say(o.remote, doc, lambda: _suspended_words(doc))
    return EXIT_OK


def _persisted_words(doc: dict[str, Any]) -> str:
    if doc.get("persisted") is True:
        return " Written to the state."
    if doc.get("error"):
        return f" NOT written to the state: {doc['error']}"
    if doc.get("note"):
        return f" Not written to the state yet: {doc['note']}."
    return ""


def _suspended_words(doc: dict[str, Any]) -> str:
    from botctl.agent.control import suspension_words
    from botctl.resources.agentrecord import Suspension

    found = Suspension(**doc["suspended"])
    already = "already " if doc.get("already") else ""
    return f"{already}{suspension_words(found)}.{_persisted_words(doc)}"


@dataclass(frozen=True, kw_only=True)
class ResumeOptions:
    by: str | None
    remote: RemoteGroup = group(RemoteGroup)


@click.command("resume")
@BY
@remote_options
@takes(ResumeOptions)
def resume(o: ResumeOptions) -> int:
    """Let a suspended agent apply again (a cycle runs at once)."""
    doc = _remote(o.remote).control("resume", {"by": _by(o.by)})

    def words() -> str:
        if doc.get("already"):
            return "not suspended: nothing to resume"
        return f"resumed; cycle {doc['cycle']} asked for.{_persisted_words(doc)}"

    _say(o.remote, doc, words)
    return EXIT_OK


@dataclass(frozen=True, kw_only=True)
class StatusOptions:
    remote: RemoteGroup = group(RemoteGroup)


@click.command("status")
@remote_options
@takes(StatusOptions)
def status(o: StatusOptions) -> int:
    """What a running agent knows: its role and revision, what holds it, each chatbot's status
    and what drifted or would be applied, value by value."""
    doc = _remote(o.remote).status()
    _say(o.remote, doc, lambda: status_words(doc))
    return EXIT_OK


def _value(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= VALUE_WIDTH else text[: VALUE_WIDTH - 1] + "…"


def _entry_words(item: dict[str, Any]) -> str:
    words = f"    {item['class']} {item['resource']} {item['path']}"
    if item["class"] in ("unmanaged", "missing"):
        return words
    if "live" in item or "desired" in item:
        unread = item.get("live") is None and item.get("confidence") in ("assumed", "unknown")
        live = "unknown (not readable)" if unread else _value(item.get("live"))
        words += f": live {live} · desired {_value(item.get('desired'))}"
    if item.get("lastApplied") is not None:
        words += f" · last applied {_value(item['lastApplied'])}"
    if item.get("reason"):
        words += f": {item['reason']}"
    return words


def _header_words(doc: dict[str, Any]) -> list[str]:
    short = (doc.get("revision") or "").removeprefix("dir:")[:12] or "none yet"
    lines = [f"agent {doc['source']}: {doc['role']}, revision {short}"]
    if doc.get("leaseHolder"):
        lines.append(f"lease held by {doc['leaseHolder']}")
    if doc.get("suspended"):
        from botctl.agent.control import suspension_words
        from botctl.resources.agentrecord import Suspension

        lines.append(suspension_words(Suspension(**doc["suspended"])) + ": applying nothing")
    window = doc.get("denyWindow")
    if window:
        lines.append(
            f"deny window {window['window']!r} holds until {window['until'] or 'past a week'}"
        )
    invalid = doc.get("invalidRevision")
    if invalid:
        lines.append(f"revision {invalid['revision'][:12]} is invalid:\n  {invalid['error']}")
    if doc.get("lastError"):
        lines.append(f"last error: {doc['lastError']}")
    counts = ", ".join(f"{k} {v}" for k, v in doc.get("summary", {}).items() if v)
    lines.append(f"{len(doc.get('chatbots', []))} chatbot(s): {counts or 'none yet'}")
    return lines


def status_words(doc: dict[str, Any]) -> str:
    lines = _header_words(doc)
    for bot in doc.get("chatbots", []):
        applied = bot.get("lastAppliedRevision")
        last = f", last applied {applied[:12]} at {bot['lastApplied']}" if applied else ""
        lines.append(f"  {bot['name']} ({bot['chatbotId']}): {bot['status']}{last}")
        if bot.get("lastError"):
            lines.append(f"    error: {bot['lastError']}")
        diff = bot.get("diff") or {}
        lines += [_entry_words(item) for item in diff.get("items", [])]
        if diff.get("omitted"):
            lines.append(f"    … and {diff['omitted']} more")
    return "\n".join(lines)


VERBS = (sync, suspend, resume, status)
