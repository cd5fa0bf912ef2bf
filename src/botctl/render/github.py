"""GitHub Actions workflow commands: the text report folded in the log and inert (nothing in
it runs as a command), warnings and the summary as annotations. Every line is escaped by
``botctl.annotations``: text from the service or the YAML never forms a command of its own."""

from __future__ import annotations

from collections.abc import Iterable

from botctl.annotations import annotation, command, inert_block, located_annotation
from botctl.plan import FLAG_CUTS_OFF_USERS, Plan, Unmanageable
from botctl.reconcile.drift import DriftClass, DriftReport
from botctl.render.text import (
    PLAIN,
    drift_lines,
    drift_summary,
    fmt,
    render_drift_text,
    render_text,
    summary_line,
    unmanageable_line,
)

# Drift classes a person must look at: each item an annotation of its own.
ANNOTATED: dict[DriftClass, str] = {
    "changed_outside": "botctl: changed outside botctl",
    "conflict": "botctl: conflict (the service and the configuration both moved)",
    "unknown_origin": "botctl: unknown origin",
    "missing": "botctl: missing chatbot",
}


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
    out.extend(_unmanageable(plan.unmanageable))
    if plan.scope is not None:
        out.append(annotation("notice", plan.scope.line(), title="botctl plan: scope"))
    out.append(annotation("notice", summary_line(plan), title="botctl plan"))
    return "\n".join(out) + "\n"


def render_drift_github(report: DriftReport, *, colour: bool = False) -> str:
    """Each item a person must look at a warning (changed outside, conflict, unknown origin,
    missing); the summary a warning (drift) or a notice."""
    out = _folded("botctl drift", render_drift_text(report))
    out.extend(
        annotation(
            "warning",
            f"{item.bot.name}: {drift_lines(item, PLAIN)[0].strip().lstrip('!? ')}",
            title=title,
        )
        for drift_class, title in ANNOTATED.items()
        for item in report.of(drift_class)
    )
    out.extend(_unmanageable(report.unmanageable))
    level = "warning" if report.has_drift else "notice"
    out.append(annotation(level, drift_summary(report), title="botctl drift"))
    return "\n".join(out) + "\n"


def _unmanageable(items: Iterable[Unmanageable]) -> list[str]:
    return [
        annotation(
            "warning",
            f"{u.bot.name}:{unmanageable_line(u).strip().removeprefix('!')}",
            title="botctl: unmanageable attribute (never written)",
        )
        for u in items
    ]


def _folded(title: str, text: str) -> list[str]:
    return [
        command("group", title),
        *inert_block(text.rstrip("\n").splitlines()),
        command("endgroup"),
    ]
