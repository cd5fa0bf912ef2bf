"""The status page (``/``): every chatbot, its status, drift and last change at a glance, what
it would be sent or what drifted (value by value), and the recent cycles; banners for what
holds applying (a suspension, a deny window) and for a refused revision. Plain HTML: no
JavaScript, refreshed by a meta refresh, every text escaped (control characters shown as
``\\xNN``: a value cannot reorder what is shown around it)."""

from __future__ import annotations

import json
from html import escape
from typing import Any

from botctl.values import controls_shown

_COLOURS = {
    "Synced": "#1a7f37",
    "OutOfSync": "#9a6700",
    "Drifted": "#bc4c00",
    "Failed": "#cf222e",
    "TestFailed": "#a40e26",
    "Missing": "#8250df",
    "Unknown": "#57606a",
}
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1f2328}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}.status{font-weight:600;color:#fff;border-radius:1em;padding:.1rem .6rem}
code{font-size:.9em}.error{color:#cf222e;white-space:pre-wrap}.held{color:#9a6700}
.banner{border:1px solid;border-radius:.4rem;padding:.6rem .8rem;white-space:pre-wrap}
.banner.hold{background:#fff8c5;border-color:#d4a72c}
.banner.error{background:#ffebe9;border-color:#ff8182}
table.diff{margin:.3rem 0}.diff td,.diff th{font-size:.9em}
.value{font-family:ui-monospace,monospace;white-space:pre-wrap;word-break:break-all;max-width:32rem}
"""
_COLUMNS = (
    "Chatbot",
    "Id",
    "Status",
    "Drift",
    "Revision",
    "Last applied",
    "Last sync",
    "Last change",
    "Last error / held",
)


def _text(value: Any) -> str:
    return "—" if value is None or value == "" else escape(controls_shown(str(value)))


def _value(value: Any) -> str:
    """A value of the diff: text as it is, anything else as JSON."""
    if value is None:
        return "—"
    shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return escape(controls_shown(shown))


def _short(revision: str | None) -> str:
    return _text((revision or "").removeprefix("dir:")[:12])


def _banners(doc: dict[str, Any]) -> str:
    found = []
    suspended = doc.get("suspended")
    if suspended:
        by = f" by {_text(suspended['by'])}" if suspended.get("by") else ""
        why = f": {_text(suspended['reason'])}" if suspended.get("reason") else ""
        found.append(
            f'<p id="suspended" class="banner hold"><b>Suspended</b>{by} since '
            f"{_text(suspended['since'])}{why}. Nothing is applied; drift is still read and "
            "reported. <code>botctl agent resume</code> ends it.</p>"
        )
    window = doc.get("denyWindow")
    if window:
        until = _text(window["until"]) if window.get("until") else "no end within a week"
        found.append(
            f'<p id="window" class="banner hold"><b>Deny window</b> <code>'
            f"{_text(window['window'])}</code> holds until {until}: nothing is applied "
            "(<code>botctl agent sync --override-window --reason TEXT</code> applies once).</p>"
        )
    invalid = doc.get("invalidRevision")
    if invalid:
        found.append(
            f'<p id="invalid" class="banner error">Revision <code>{_short(invalid["revision"])}'
            f"</code> is invalid and was not applied:\n{_text(invalid['error'])}</p>"
        )
    return "\n".join(found)


def _diff(bot: dict[str, Any], columns: int) -> str:
    """The chatbot's entries under its row: open unless it is in sync."""
    diff = bot.get("diff") or {}
    items = diff.get("items") or []
    if not items:
        return ""
    rows = []
    for item in items:
        values = "".join(
            f'<td class="value">{_value(item.get(key))}</td>'
            for key in ("live", "desired", "lastApplied")
        )
        detail = item.get("reason") or item.get("action") or ""
        rows.append(
            f'<tr class="entry"><td>{_text(item["class"])}</td><td>{_text(item["resource"])}</td>'
            f"<td><code>{_text(item['path'])}</code></td>{values}<td>{_text(detail)}</td></tr>"
        )
    omitted = diff.get("omitted") or 0
    more = f"<p>… and {omitted} more (the counts are under Drift)</p>" if omitted else ""
    opened = "" if bot["status"] == "Synced" else " open"
    return (
        f'<tr class="diff" data-chatbot-id="{_text(bot["chatbotId"])}"><td colspan="{columns}">'
        f"<details{opened}><summary>{len(items) + omitted} value(s) out of sync</summary>"
        '<table class="diff"><thead><tr><th>Class</th><th>Resource</th><th>Path</th>'
        "<th>Live</th><th>Desired</th><th>Last applied</th><th>Action / reason</th></tr>"
        f"</thead><tbody>{''.join(rows)}</tbody></table>{more}</details></td></tr>"
    )


def _stages(stages: list[dict[str, Any]]) -> str:
    """Each stage (--stages): its chatbots, the revision it last received, its gate."""
    if not stages:
        return ""
    rows = [
        f'<tr class="stage"><td><code>{_text(s["stage"])}</code></td>'
        f"<td>{_text(', '.join(s['chatbots']))}</td>"
        f"<td><code>{_short(s['revision'])}</code></td>"
        f'<td class="gate">{_text(s["gate"])}</td>'
        f'<td class="error">{_text("; ".join(s["reasons"]))}</td></tr>'
        for s in stages
    ]
    return (
        '<h2>Stages</h2>\n<table id="stages"><thead><tr><th>Stage</th><th>Chatbots</th>'
        "<th>Revision</th><th>Gate</th><th>Why</th></tr></thead>\n"
        f"<tbody>{''.join(rows)}</tbody></table>"
    )


def _trouble(bot: dict[str, Any]) -> str:
    """A chatbot's last error (red), or else what holds the revision back from it (amber:
    its tests failed, a stage not open yet)."""
    error, held = bot["lastError"], bot.get("held")
    if error or not held:
        return f'<td class="error">{_text(error)}</td>'
    return f'<td class="held">held: {_text(held)}</td>'


def _chatbots(doc: dict[str, Any]) -> str:
    rows = []
    for bot in doc["chatbots"]:
        colour = _COLOURS.get(bot["status"], "#57606a")
        drift = ", ".join(f"{_text(k)}: {v}" for k, v in sorted(bot["drift"].items()))
        applied = (
            f"<code>{_short(bot.get('lastAppliedRevision'))}</code> {_text(bot.get('lastApplied'))}"
            if bot.get("lastAppliedRevision")
            else "—"
        )
        rows.append(
            f'<tr class="chatbot" data-chatbot-id="{_text(bot["chatbotId"])}">'
            f'<td class="name">{_text(bot["name"])}</td>'
            f"<td><code>{_text(bot['chatbotId'])}</code></td>"
            f'<td><span class="status" style="background:{colour}">{_text(bot["status"])}'
            "</span></td>"
            f"<td>{_text(drift)}</td>"
            f"<td><code>{_short(bot['revision'])}</code></td>"
            f'<td class="applied">{applied}</td>'
            f"<td>{_text(bot['lastSync'])}</td><td>{_text(bot['lastChange'])}</td>"
            f"{_trouble(bot)}</tr>"
        )
        rows.append(_diff(bot, len(_COLUMNS)))
    return "".join(rows)


def _cycles(doc: dict[str, Any]) -> str:
    cycles = []
    for cycle in doc["cycles"]:
        note, kind = cycle.get("error"), "error"
        override = cycle.get("windowOverride")
        if not note and override:
            note, kind = f"deny window overridden: {override.get('reason')}", "held"
        elif not note:
            note, kind = cycle.get("held"), "held"
        cycles.append(
            f'<tr class="cycle"><td>{cycle["number"]}</td><td>{_text(cycle["started"])}</td>'
            f"<td>{_text(cycle['trigger'])}</td><td>{_text(cycle['result'])}</td>"
            f"<td><code>{_short(cycle['revision'])}</code></td>"
            f"<td>{cycle['applied']}</td><td>{cycle['failed']}</td>"
            f"<td>{cycle['durationSeconds']}</td>"
            f'<td class="{kind}">{_text(note)}</td></tr>'
        )
    return "".join(cycles)


def render_page(doc: dict[str, Any], refresh: int) -> str:
    counts = " · ".join(f"{_text(k)}: {v}" for k, v in doc["summary"].items() if v)
    head = "".join(f"<th>{name}</th>" for name in _COLUMNS)
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<title>botctl agent: {_text(doc["source"])}</title><style>{_STYLE}</style></head>
<body><h1>botctl agent</h1>
<p>Source <code>{_text(doc["source"])}</code> · role <b id="role">{_text(doc["role"])}</b> ·
revision <code id="revision">{_short(doc["revision"])}</code> · applied
<code>{_short(doc["appliedRevision"])}</code> · last success
{_text(doc["lastSuccess"])} · next cycle {_text(doc["nextCycle"])}</p>
<p id="summary">{len(doc["chatbots"])} chatbot(s): {counts or "none yet"}</p>
{_banners(doc)}
{_stages(doc.get("stages") or [])}
<h2>Chatbots</h2>
<table id="chatbots"><thead><tr>{head}</tr></thead>
<tbody>{_chatbots(doc)}</tbody></table>
<h2>Recent cycles</h2>
<table id="cycles"><thead><tr><th>#</th><th>Started</th><th>Trigger</th><th>Result</th>
<th>Revision</th><th>Applied</th><th>Failed</th><th>Seconds</th><th>Error / held</th></tr>
</thead><tbody>{_cycles(doc)}</tbody></table>
<p>Refreshes every {refresh} s. JSON: <a href="status">/status</a> ·
<a href="metrics">/metrics</a></p></body></html>
"""
