"""Text, what a reviewer reads in a terminal or CI log, and JSON, the versioned contract (see
README); the pieces of text the other formats reuse (summary lines, one change's lines)."""

from __future__ import annotations

import difflib
import json
from collections.abc import Callable, Iterable
from itertools import groupby

from botctl.annotations import inert, visible
from botctl.plan import (
    FLAG_CUTS_OFF_USERS,
    SCOPE_REASONS,
    BotRef,
    Change,
    ItemChange,
    Operation,
    Plan,
    Requests,
    Scope,
    Unmanageable,
)
from botctl.reconcile.drift import CLASSES, DriftItem, DriftReport
from botctl.reconcile.usage import usage_text
from botctl.resources.registry import kind_of
from botctl.values import JsonValue

SYMBOLS = {
    "create": "+",
    "update": "~",
    "archive": "-",
    "unarchive": "+",
    "reassert": "=",
    "rename": ">",
}
ITEM_SYMBOLS = {"add": "+", "remove": "-", "change": "~"}
COLOURS = {
    "create": "32",
    "update": "33",
    "archive": "31",
    "unarchive": "32",
    "reassert": "36",
    "rename": "35",
    "warn": "1;31",
}
FLAG_TEXT = {FLAG_CUTS_OFF_USERS: "may cut users off"}
UNMANAGED_NOTE = "(not declared; archived only with prune)"
UNMANAGEABLE_HEADING = (
    "Unmanageable live attributes (held outside the contract's rules: botctl never writes "
    "or archives them; fix them where they were made):"
)


class Style:
    """ANSI colour when enabled; plain text otherwise (never colour without a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def __call__(self, text: str, code: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.enabled else text


PLAIN = Style(False)


def fmt(value: JsonValue) -> str:
    """A value as JSON, shown: text from the service can carry no terminal escape sequence
    or runner command into any format that shows it (``annotations.visible``)."""
    if value is None:
        return "(none)"
    return visible(json.dumps(value, ensure_ascii=False, sort_keys=True))


def summary_line(plan: Plan) -> str:
    s = plan.summary()
    reassert = f", {s['reassert']} to reassert" if s["reassert"] else ""
    rename = f", {s['rename']} to rename" if s["rename"] else ""
    line = (
        f"Plan: {s['create']} to create, {s['update']} to update, {s['archive']} to archive, "
        f"{s['unarchive']} to unarchive{rename}{reassert} ({requests_phrase(plan.requests())})."
    )
    extras = []
    if s["unmanaged"]:
        extras.append(f"{s['unmanaged']} unmanaged attribute(s) left alone")
    if s["unmanageable"]:
        extras.append(f"{s['unmanageable']} unmanageable attribute(s) never written")
    if s["unverified"]:
        extras.append(f"{s['unverified']} managed value(s) could not be read back")
    flagged = len(plan.flagged(FLAG_CUTS_OFF_USERS))
    if flagged:
        extras.append(f"{flagged} change(s) may cut users off")
    if s["missing"]:
        extras.append(f"{s['missing']} chatbot(s) missing from the service")
    return line + (" " + "; ".join(extras) + "." if extras else "")


def requests_phrase(requests: Requests) -> str:
    """``3 request(s) to send``; with a rename's contacts, how many of them are theirs."""
    total = requests.total
    if total is None:
        return (
            f"{requests.writes:,} request(s) to send, and those of the contacts its renames "
            "move: not counted"
        )
    if not (requests.contact_reads or requests.contact_updates):
        return f"{total:,} request(s) to send"
    return (
        f"{total:,} request(s) to send: {requests.contact_updates:,} contact update(s) at most, "
        f"{requests.contact_reads:,} contact read(s)"
    )


# More requests than the service's v2 documents per window (100 per 10 s, API-NOTES): the
# limit will pace the run, so a plan without a known pace says that it cannot say how long.
PACED_FROM = 100


def pace_line(plan: Plan) -> str | None:
    """How long the plan's requests take at the pace the run keeps to (``--rate-limit``,
    per API key); without one, that it is not known, when it matters (a rename's contacts, or
    more requests than a window of the service's limit). Never a guess."""
    requests = plan.requests()
    total, seconds, rate = requests.total, requests.seconds, requests.rate_limit
    if rate > 0:
        if seconds is None:
            return (
                f"Time at --rate-limit {rate:g}/s per API key: not known (the contacts its "
                "renames move were not counted)."
            )
        return f"Time at --rate-limit {rate:g}/s per API key: about {duration(seconds)}."
    if total is not None and total <= PACED_FROM and not requests.contact_updates:
        return None
    return (
        "Time: not estimated: no rate limit is known (--rate-limit, or rateLimit in "
        "botctl.yaml, gives the pace to estimate at); the service's own limit paces the run."
    )


def duration(seconds: float) -> str:
    """``0.4 s``, ``51 s``, ``14 min 3 s``, ``2 h 5 min``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    if whole < 3600:
        return f"{whole // 60} min {whole % 60} s"
    return f"{whole // 3600} h {whole % 3600 // 60} min"


READS_NONE = (
    "Reads: none (--no-reads): nothing was read from the service; current values are what "
    "botctl last applied (assumed) or unknown."
)


def _is_multiline(change: Change) -> bool:
    return any(isinstance(v, str) and "\n" in v for v in (change.before, change.after))


def _unified(before: JsonValue, after: JsonValue, indent: str) -> list[str]:
    old = before.splitlines() if isinstance(before, str) else []
    new = after.splitlines() if isinstance(after, str) else []
    lines = difflib.unified_diff(old, new, "before", "after", lineterm="", n=2)
    return [f"{indent}{visible(line)}" for line in lines]  # every format shows them: inert


def _item_line(item: ItemChange) -> str:
    symbol = ITEM_SYMBOLS[item.op]
    if item.op == "add":
        return f"      {symbol} {item.where} {fmt(item.after)}"
    if item.op == "remove":
        return f"      {symbol} {item.where} {fmt(item.before)}"
    return f"      {symbol} {item.where} {fmt(item.before)} -> {fmt(item.after)}"


def change_lines(change: Change, style: Style) -> list[str]:
    symbol = style(SYMBOLS[change.action], COLOURS[change.action])
    flags = "".join(
        " " + style(f"[!] {FLAG_TEXT.get(flag, flag)}", COLOURS["warn"]) for flag in change.flags
    )
    where = f"{change.resource} {change.path}"
    if change.action == "reassert":
        return [
            f"  {symbol} reassert {where}: {fmt(change.after)}  ({change.confidence}: cannot "
            "be read back; sent again as last applied)"
        ]
    lines = kind_of(change.resource).render_lines(change, fmt)
    if lines is not None:
        head = f"  {symbol} {change.action} {subject(change)}  ({change.confidence}){flags}"
        return [head, *(f"      {line}" for line in lines)]
    if _is_multiline(change):
        head = f"  {symbol} {where}  ({change.confidence}){flags}"
        return [head, *_unified(change.before, change.after, "      ")]
    before = "(unknown)" if change.confidence == "unknown" else fmt(change.before)
    # A sub-field a nested object sent whole no longer holds: the request removes it.
    after = "(removed)" if change.after is None else fmt(change.after)
    head = f"  {symbol} {where}: {before} -> {after}  ({change.confidence}){flags}"
    return [head, *(_item_line(item) for item in change.detail)]


def subject(change: Change) -> str:
    """``attribute plan (1,204 contacts carry a value)``; a rename ``attribute plan -> tier``."""
    where = f"{change.resource} {change.path}"
    if change.action == "rename" and isinstance(change.before, dict):
        where = f"{change.resource} {change.before.get('name')} -> {change.path}"
    counted = usage_text(change)
    return f"{where} ({counted})" if counted else where


def warning_line(warning: str) -> str:
    """A warning as shown: coded ones (``warning[BC302]: ...``, or located
    ``file:line:col: warning[BC101]: ...``) already say so."""
    return (
        warning
        if warning.startswith("warning") or ": warning" in warning
        else (f"warning: {warning}")
    )


SCOPE_LISTED = 20  # chatbots of a scope named one by one; JSON lists every one


def scope_lines(scope: Scope | None) -> list[str]:
    """``Scope: 3 of 500 chatbots changed since <sha>``, and each chatbot with why."""
    if scope is None:
        return []
    out = [scope.line()]
    for item in scope.bots[:SCOPE_LISTED]:
        why = ", ".join(SCOPE_REASONS[r] for r in item.reasons)
        out.append(f"  {visible(item.bot.name)} ({visible(item.bot.chatbot_id)}): {why}")
    if len(scope.bots) > SCOPE_LISTED:
        out.append(f"  ... and {len(scope.bots) - SCOPE_LISTED} more (the JSON lists each)")
    return out


def render_text(plan: Plan, *, colour: bool = False) -> str:
    style = Style(colour)
    out = [summary_line(plan)]
    pace = pace_line(plan)
    if pace is not None:
        out.append(pace)
    if plan.reads == "none":
        out.append(READS_NONE)
    out.extend(scope_lines(plan.scope))
    out.extend(warning_line(w) for w in plan.warnings)
    out.extend(style(f"safety cap exceeded: {v}", COLOURS["warn"]) for v in plan.violations)
    out.extend(style(missing_line(b), COLOURS["warn"]) for b in plan.missing)
    unmanaged_by_bot = {
        name: [f"{u.resource} {u.name}" for u in group]
        for name, group in groupby(plan.unmanaged, lambda u: u.bot.name)
    }
    for bot, ops in by_bot(plan.operations):
        out.append("")
        out.append(style(f"{bot.name} ({bot.chatbot_id})", "1"))
        for op in ops:
            for change in op.changes:
                out.extend(change_lines(change, style))
        for name in unmanaged_by_bot.pop(bot.name, []):
            out.append(f"  ? unmanaged {name} {UNMANAGED_NOTE}")
    for bot_name, names in unmanaged_by_bot.items():
        out.append("")
        out.append(style(bot_name, "1"))
        out.extend(f"  ? unmanaged {name} {UNMANAGED_NOTE}" for name in names)
    out.extend(unmanageable_lines(plan.unmanageable, style))
    if plan.empty:
        out.append("")
        out.append(no_changes_line(plan))
    return inert("\n".join(out), colour=colour) + "\n"


def missing_line(bot: BotRef, code: Callable[[str], str] = str) -> str:
    """A chatbot of the configuration the service does not list (``code``: how Markdown
    quotes its handle and id)."""
    return (
        f"missing: {code(bot.name)} ({code(bot.chatbot_id)}) is not listed by the service; "
        "nothing is planned for it"
    )


def no_changes_line(plan: Plan) -> str:
    """An empty plan's last word: never that the service matches the configuration while
    chatbots of it are missing."""
    if plan.missing:
        return "Nothing to send to the chatbots the service lists."
    return "No changes. The service matches the configuration."


def unmanageable_line(item: Unmanageable) -> str:
    """One unmanageable attribute: its name as the service holds it (any text, so quoted),
    and why botctl cannot manage it."""
    name = fmt(item.name) if item.name is not None else "(no name)"
    return f"  ! attribute {name}: {item.reason}"


def unmanageable_lines(items: Iterable[Unmanageable], style: Style) -> list[str]:
    out: list[str] = []
    for bot_name, group in groupby(items, lambda u: u.bot.name):
        if not out:
            out += ["", style(UNMANAGEABLE_HEADING, "1")]
        out.append(f"{bot_name}:")
        out.extend(unmanageable_line(item) for item in group)
    return out


def by_bot(operations: Iterable[Operation]) -> list[tuple[BotRef, list[Operation]]]:
    return [(bot, list(ops)) for bot, ops in groupby(operations, lambda op: op.bot)]


def render_json(plan: Plan, *, colour: bool = False) -> str:
    return json.dumps(plan.to_document(), indent=2, ensure_ascii=False) + "\n"


# --- drift --------------------------------------------------------------------------------------

DRIFT_HEADINGS = {
    "changed_outside": "Changed outside botctl (the service moved from the recorded value):",
    "pending": "Pending (the configuration moved; the service still holds the recorded value):",
    "conflict": "Conflicts (the service and the configuration both moved):",
    "unknown_origin": (
        "Unknown origin (the service differs from the configuration and nothing is recorded "
        "to tell who moved; `botctl refresh` records a baseline once they agree):"
    ),
    "missing": "Missing (the service no longer lists these chatbots of the configuration):",
    "unmanaged": (
        "Unmanaged live attributes (declare them, archive them with prune: true, or leave "
        "them alone with ignoreAttributes):"
    ),
}


def _moved(last: JsonValue, now: JsonValue) -> tuple[JsonValue, JsonValue]:
    """For two attribute records, only the recorded fields that differ."""
    if isinstance(last, dict) and isinstance(now, dict):
        keys = sorted(k for k in last if last.get(k) != now.get(k))
        return {k: last.get(k) for k in keys}, {k: now.get(k) for k in keys}
    return last, now


def drift_lines(item: DriftItem, style: Style) -> list[str]:
    where = f"{item.resource} {item.path}"
    if item.drift_class == "pending" and item.change is not None:
        return change_lines(item.change, style)
    if item.drift_class == "missing":
        return [
            f"  ! chatbot {item.bot.chatbot_id} is not listed by the account of "
            f"${item.bot.api_key_env}"
        ]
    if item.drift_class == "unmanaged":
        return [f"  ? {item.resource} {item.path}"]
    absent = kind_of(item.resource).absent_shown
    now = fmt(item.live) if item.live is not None or absent is None else absent
    if item.drift_class == "unknown_origin":
        return [f"  ? {where}: now {now}, configuration {fmt(item.desired)}"]
    last, live = _moved(item.last_applied, item.live)
    shown = fmt(live) if item.live is not None else now
    head = f"  ! {where}: recorded {fmt(last)} ({item.basis}), now {shown}"
    if item.drift_class == "conflict":
        head += f", configuration {fmt(item.desired)}"
    return [head, *(_item_line(d) for d in item.detail)]


def drift_summary(report: DriftReport) -> str:
    s = report.summary()
    state = "Drift detected" if report.has_drift else "No drift"
    line = (
        f"{state}: {s['changed_outside']} changed outside botctl, {s['pending']} pending, "
        f"{s['conflicts']} conflict(s), {s['unknown_origin']} of unknown origin, "
        f"{s['missing']} missing chatbot(s), {s['unmanaged']} unmanaged attribute(s); "
        f"{s['unverified']} managed value(s) could not be verified."
    )
    if s["unmanageable"]:
        line += f" {s['unmanageable']} unmanageable attribute(s) never written."
    if s["acknowledged"] or s["expired_acknowledgements"]:
        line += (
            f" {s['acknowledged']} acknowledged item(s) skipped; "
            f"{s['expired_acknowledgements']} acknowledgement(s) expired."
        )
    return line


def render_drift_text(report: DriftReport, *, colour: bool = False) -> str:
    style = Style(colour)
    out = [drift_summary(report)]
    out.extend(scope_lines(report.scope))
    out.extend(warning_line(w) for w in report.warnings)
    for drift_class in CLASSES:
        items = report.of(drift_class)
        if not items:
            continue
        out += ["", style(DRIFT_HEADINGS[drift_class], "1")]
        for bot_name, group in groupby(items, lambda i: i.bot.name):
            lines = [line for item in group for line in drift_lines(item, style)]
            out.append(f"{bot_name}:")
            out.extend(lines)
    out.extend(unmanageable_lines(report.unmanageable, style))
    if report.expired:
        out += ["", style("Acknowledgements expired (counted again):", "1")]
        out.extend(f"{i.bot.name}: {i.resource} {i.path}" for i in report.expired)
    if report.unmanaged_chatbots:
        out += ["", "Chatbots no document declares (not botctl's; not counted as drift):"]
        out.extend(
            f"  {visible(c.chatbot_id)} {fmt(c.name)} (account of ${c.api_key_env})"
            for c in report.unmanaged_chatbots
        )
    return inert("\n".join(out), colour=colour) + "\n"


def render_drift_json(report: DriftReport, *, colour: bool = False) -> str:
    return json.dumps(report.to_document(), indent=2, ensure_ascii=False) + "\n"
