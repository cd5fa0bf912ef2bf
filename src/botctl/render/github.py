"""GitHub Actions workflow commands: the text report folded in the log and inert (nothing in
it runs as a command), warnings and the summary as annotations. Every line is escaped by
``botctl.annotations``: text from the service or the YAML never forms a command of its own."""

from __future__ import annotations

from botctl.annotations import annotation, command, inert_block, located_annotation
from botctl.plan import FLAG_CUTS_OFF_USERS, Plan
from botctl.reconcile.drift import DriftReport
from botctl.render.text import (
    drift_summary,
    fmt,
    outside_line,
    render_drift_text,
    render_text,
    summary_line,
)


def render_github(plan: Plan, *, colour: bool = False) -> str:
    out = _folded("botctl plan", render_text(plan))
    out.extend(located_annotation("warning", w, title="botctl") for w in plan.warnings)
    out.extend(
        annotation("warning", v, title="botctl: safety cap exceeded") for v in plan.violations
    )
    out.extend(
        annotation(
            "warning", f"{b.name}: {c.path} -> {fmt(c.after)}", title="botctl: may cut users off"
        )
        for b, c in plan.flagged(FLAG_CUTS_OFF_USERS)
    )
    out.append(annotation("notice", summary_line(plan), title="botctl plan"))
    return "\n".join(out) + "\n"


def render_drift_github(report: DriftReport, *, colour: bool = False) -> str:
    """Each change made outside botctl a warning; the summary a warning (drift) or a notice."""
    out = _folded("botctl drift", render_drift_text(report))
    out.extend(
        annotation(
            "warning",
            f"{c.bot.name}: {outside_line(c).strip().removeprefix('! ')}",
            title="botctl: changed outside botctl",
        )
        for c in report.changed_outside
    )
    level = "warning" if report.has_drift else "notice"
    out.append(annotation(level, drift_summary(report), title="botctl drift"))
    return "\n".join(out) + "\n"


def _folded(title: str, text: str) -> list[str]:
    return [
        command("group", title),
        *inert_block(text.rstrip("\n").splitlines()),
        command("endgroup"),
    ]
