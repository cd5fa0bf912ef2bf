"""Pure renderers: Plan / DriftReport -> str, in a registry by format name.

``text`` is what a reviewer reads in a terminal or CI log (``render.text``); ``json`` the
versioned contract (see README); ``markdown`` a pull-request comment or job summary
(``render.markdown``, whose ``*_comment`` variants carry a marker and a size limit);
``github`` workflow-command annotations for GitHub Actions (``render.github``).
"""

from __future__ import annotations

from collections.abc import Callable

from botctl.plan import Plan
from botctl.reconcile.drift import DriftReport
from botctl.render.github import render_drift_github, render_github
from botctl.render.markdown import (
    COMMENT_LIMIT,
    DRIFT_MARKER,
    PLAN_MARKER,
    render_drift_comment,
    render_drift_markdown,
    render_markdown,
    render_plan_comment,
)
from botctl.render.text import (
    drift_summary,
    render_drift_json,
    render_drift_text,
    render_json,
    render_text,
    summary_line,
)

__all__ = [
    "COMMENT_LIMIT",
    "DRIFT_MARKER",
    "PLAN_MARKER",
    "drift_summary",
    "render_drift",
    "render_drift_comment",
    "render_plan",
    "render_plan_comment",
    "summary_line",
]

PlanRenderer = Callable[..., str]
PLAN_RENDERERS: dict[str, PlanRenderer] = {
    "text": render_text,
    "json": render_json,
    "markdown": render_markdown,
    "github": render_github,
}
DRIFT_RENDERERS: dict[str, Callable[..., str]] = {
    "text": render_drift_text,
    "json": render_drift_json,
    "markdown": render_drift_markdown,
    "github": render_drift_github,
}


def render_plan(plan: Plan, fmt_name: str, *, colour: bool = False) -> str:
    return PLAN_RENDERERS[fmt_name](plan, colour=colour)


def render_drift(report: DriftReport, fmt_name: str, *, colour: bool = False) -> str:
    return DRIFT_RENDERERS[fmt_name](report, colour=colour)
