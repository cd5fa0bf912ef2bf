"""Golden renders: a plan and a drift report in every format. Regenerate after an intended
change with `BOTCTL_UPDATE_GOLDEN=1 uv run pytest tests/test_render.py` and review the diff."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from botctl.models import State
from botctl.plan import Plan
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import compute_drift
from botctl.reconcile.usage import annotate
from botctl.render import render_drift, render_plan
from botctl.resources.contacts import Usage
from tests.factories import bot, desired, live, live_bot, state

GOLDEN = Path(__file__).parent / "golden"
TIER: dict[str, Any] = {"name": "tier", "type": "text", "label": "Tier", "archived": False}


def sample_plan() -> Plan:
    support = bot(
        "support",
        "bot-1",
        settings={
            "name": "Support Bot",
            "instructions": "You help.\nBe kind.\nAnswer briefly.\n",
            "visibility": "private",
            "temp": 0.2,
            "styles": {"theme": "dark", "buttonColor": "#0a84ff"},
        },
        attributes=[
            TIER,
            {"name": "score", "type": "number", "label": "Score", "archived": True},
            {"name": "region", "type": "text", "label": "Region"},
        ],
    )
    observed = {
        "name": "Old Bot",
        "instructions": "You help.\nAnswer briefly.\n",
        "visibility": "public",
    }
    attrs = [
        {**TIER, "label": "Plan tier"},
        {"name": "score", "type": "number", "label": "Score"},
        {"name": "stray", "type": "text", "label": "Stray"},
        {"name": "made in the dashboard", "type": "select", "label": "Odd"},
    ]
    plan = compute_plan(
        desired(support),
        live(live_bot("bot-1", observed, attrs)),
        state("bot-1", settings={"temp": 0.2}),
    )
    # Archiving score retires the values 1,204 contacts carry (as the plan's read counted).
    return annotate(plan, {"bot-1": Usage({"score": 1204})})


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("BOTCTL_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


@pytest.mark.parametrize("fmt", ["text", "json", "markdown", "github"])
def test_plan_golden(fmt: str) -> None:
    check_golden(f"plan.{fmt}", render_plan(sample_plan(), fmt))


def test_text_colour_only_when_asked() -> None:
    plain = render_plan(sample_plan(), "text")
    coloured = render_plan(sample_plan(), "text", colour=True)
    assert "\x1b[" not in plain
    assert "\x1b[" in coloured


def test_json_contract_shape() -> None:
    data = json.loads(render_plan(sample_plan(), "json"))
    assert data["format_version"] == 1
    keys = {"chatbotId", "bot", "resource", "key", "action", "before", "after", "confidence"}
    assert all(keys <= set(change) for change in data["changes"])
    assert "styles.buttonColor" in {c["key"] for c in data["changes"]}
    assert data["summary"]["create"] == 1


def test_empty_plan_says_so() -> None:
    assert "No changes" in render_plan(Plan(), "text")


def test_drift_golden() -> None:
    spec = bot("support", "bot-1", settings={"name": "Support Bot"}, attributes=[TIER])
    report = compute_drift(
        desired(spec),
        live(
            live_bot(
                "bot-1",
                {"name": "Renamed in dashboard"},
                [
                    {**TIER, "label": "Edited"},
                    {"name": "x", "type": "text", "label": "X"},
                    {"name": "y", "type": "text", "archived": 0},
                ],
            )
        ),
        state("bot-1", settings={"name": "Support Bot"}, attributes={"tier": TIER}),
    )
    assert report.has_drift
    for fmt in ("text", "json", "markdown", "github"):
        check_golden(f"drift.{fmt}", render_drift(report, fmt))


def test_no_drift_when_in_sync() -> None:
    spec = bot("support", "bot-1", settings={"name": "A"})
    report = compute_drift(
        desired(spec), live(live_bot("bot-1", {"name": "A"}, [])), state(settings={"name": "A"})
    )
    assert not report.has_drift
    assert "No drift" in render_drift(report, "text")
    assert isinstance(State(), State)


def detail_plan() -> Plan:
    """List settings changed item by item: a reviewer sees the items, not two whole lists."""
    spec = bot(
        "support",
        "bot-1",
        settings={
            "domains": ["a.example", "example.org"],
            "initialMessages": ["Hi", "How can I help?", "Hello"],
            "suggestedMessages": ["Pricing"],
        },
    )
    observed = {
        "domains": ["a.example", "old.example"],
        "initialMessages": ["Hi", "How can I help?", "Hey"],
        "suggestedMessages": ["Pricing", "Contact"],
    }
    return compute_plan(desired(spec), live(live_bot("bot-1", observed, [])), State())


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_plan_detail_golden(fmt: str) -> None:
    check_golden(f"plan_detail.{fmt}", render_plan(detail_plan(), fmt))


def test_drift_detail_golden() -> None:
    spec = bot("support", "bot-1", settings={"domains": ["a.example", "b.example"]})
    report = compute_drift(
        desired(spec),
        live(live_bot("bot-1", {"domains": ["a.example", "b.example", "c.example"]}, [])),
        state("bot-1", settings={"domains": ["a.example", "b.example"]}),
    )
    (outside,) = report.of("changed_outside")
    assert [(d.op, d.where, d.after) for d in outside.detail] == [("add", "[2]", "c.example")]
    for fmt in ("text", "json", "markdown"):
        check_golden(f"drift_detail.{fmt}", render_drift(report, fmt))
