"""The status page (``/``): every chatbot, its status, drift and last change at a glance, and
the recent cycles. Plain HTML: no JavaScript, refreshed by a meta refresh, every text escaped."""

from __future__ import annotations

from html import escape
from typing import Any

_COLOURS = {
    "Synced": "#1a7f37",
    "OutOfSync": "#9a6700",
    "Drifted": "#bc4c00",
    "Failed": "#cf222e",
    "Missing": "#8250df",
    "Unknown": "#57606a",
}
_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5rem;color:#1f2328}
table{border-collapse:collapse;margin:.5rem 0 1.5rem}
th,td{border:1px solid #d0d7de;padding:.3rem .6rem;text-align:left;vertical-align:top}
th{background:#f6f8fa}.status{font-weight:600;color:#fff;border-radius:1em;padding:.1rem .6rem}
code{font-size:.9em}.error{color:#cf222e;white-space:pre-wrap}
"""


def _text(value: Any) -> str:
    return "—" if value is None or value == "" else escape(str(value))


def render_page(doc: dict[str, Any], refresh: int) -> str:
    counts = " · ".join(f"{_text(k)}: {v}" for k, v in doc["summary"].items() if v)
    rows = []
    for bot in doc["chatbots"]:
        colour = _COLOURS.get(bot["status"], "#57606a")
        drift = ", ".join(f"{_text(k)}: {v}" for k, v in sorted(bot["drift"].items()))
        rows.append(
            f'<tr class="chatbot" data-chatbot-id="{_text(bot["chatbotId"])}">'
            f'<td class="name">{_text(bot["name"])}</td>'
            f"<td><code>{_text(bot['chatbotId'])}</code></td>"
            f'<td><span class="status" style="background:{colour}">{_text(bot["status"])}'
            "</span></td>"
            f"<td>{_text(drift)}</td>"
            f"<td><code>{_text((bot['revision'] or '')[:12])}</code></td>"
            f"<td>{_text(bot['lastSync'])}</td><td>{_text(bot['lastChange'])}</td>"
            f'<td class="error">{_text(bot["lastError"])}</td></tr>'
        )
    cycles = []
    for cycle in doc["cycles"]:
        cycles.append(
            f'<tr class="cycle"><td>{cycle["number"]}</td><td>{_text(cycle["started"])}</td>'
            f"<td>{_text(cycle['trigger'])}</td><td>{_text(cycle['result'])}</td>"
            f"<td><code>{_text((cycle['revision'] or '')[:12])}</code></td>"
            f"<td>{cycle['applied']}</td><td>{cycle['failed']}</td>"
            f"<td>{cycle['durationSeconds']}</td>"
            f'<td class="error">{_text(cycle["error"])}</td></tr>'
        )
    invalid = doc.get("invalidRevision")
    invalid_html = (
        f'<p id="invalid" class="error">Revision <code>{_text(invalid["revision"][:12])}</code> '
        f"is invalid and was not applied:\n{_text(invalid['error'])}</p>"
        if invalid
        else ""
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{refresh}">
<title>botctl agent: {_text(doc["source"])}</title><style>{_STYLE}</style></head>
<body><h1>botctl agent</h1>
<p>Source <code>{_text(doc["source"])}</code> · role <b id="role">{_text(doc["role"])}</b> ·
revision <code id="revision">{_text((doc["revision"] or "")[:12])}</code> · applied
<code>{_text((doc["appliedRevision"] or "")[:12])}</code> · last success
{_text(doc["lastSuccess"])} · next cycle {_text(doc["nextCycle"])}</p>
<p id="summary">{len(doc["chatbots"])} chatbot(s): {counts or "none yet"}</p>
{invalid_html}
<h2>Chatbots</h2>
<table id="chatbots"><thead><tr><th>Chatbot</th><th>Id</th><th>Status</th><th>Drift</th>
<th>Revision</th><th>Last sync</th><th>Last change</th><th>Last error</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table>
<h2>Recent cycles</h2>
<table id="cycles"><thead><tr><th>#</th><th>Started</th><th>Trigger</th><th>Result</th>
<th>Revision</th><th>Applied</th><th>Failed</th><th>Seconds</th><th>Error</th></tr></thead>
<tbody>{"".join(cycles)}</tbody></table>
<p>Refreshes every {refresh} s. JSON: <a href="status">/status</a> ·
<a href="metrics">/metrics</a></p></body></html>
"""
