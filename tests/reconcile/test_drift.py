"""Drift classes, value by value: the table of (live, configuration, record) -> class, and the
property that drift and plan always agree."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from botctl.models import BotRecord, Desired, Live, State
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import acknowledge, acknowledgements_for, compute_drift
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import ChatbotSettings
from tests.factories import bot, desired, live, live_bot

NOTHING = object()  # no record of the value


def record_of(
    settings: dict[str, Any] | None = None,
    attributes: dict[str, dict[str, Any]] | None = None,
    *,
    verified: bool = True,
) -> State:
    values = settings or {}
    attrs = {k: CustomAttribute(**v) for k, v in (attributes or {}).items()}
    record = BotRecord(
        bot="support",
        settings=ChatbotSettings.model_validate(values, strict=False),
        attributes=attrs,
        verified_settings=set(values) if verified else set(),
        verified_attributes=set(attrs) if verified else set(),
    )
    return State(lineage="L", serial=1, bots={"bot-1": record})


@pytest.mark.parametrize(
    ("live_value", "declared", "recorded", "expected"),
    [
        ("A", "A", "A", None),  # in sync
        ("A", "A", NOTHING, None),  # in sync, nothing recorded: still in sync
        ("A", "A", "B", None),  # in sync even if the record is stale
        ("B", "A", "A", "changed_outside"),  # the dashboard moved it
        ("A", "B", "A", "pending"),  # the configuration moved, not applied yet
        ("C", "B", "A", "conflict"),  # both moved
        ("B", "A", NOTHING, "unknown_origin"),  # nothing recorded to tell who moved
    ],
)
def test_a_readable_setting(
    live_value: str, declared: str, recorded: Any, expected: str | None
) -> None:
    state = State() if recorded is NOTHING else record_of({"name": recorded})
    report = compute_drift(
        desired(bot(settings={"name": declared})),
        live(live_bot(settings={"name": live_value})),
        state,
    )
    assert [i.drift_class for i in report.items] == ([expected] if expected else [])
    assert report.has_drift is bool(expected)


@pytest.mark.parametrize(
    ("declared", "recorded", "expected", "unverified"),
    [
        (0.2, 0.2, None, 1),  # cannot be read; as last applied: in sync as far as anyone knows
        (0.2, 0.5, "pending", 1),  # the configuration moved since: pending (assumed)
        (0.2, NOTHING, None, 1),  # never applied, cannot be read: unknown, not drift
    ],
)
def test_an_unreadable_setting(
    declared: float, recorded: Any, expected: str | None, unverified: int
) -> None:
    state = State() if recorded is NOTHING else record_of({"temp": recorded}, verified=False)
    report = compute_drift(
        desired(bot(settings={"temp": declared})), live(live_bot(settings={})), state
    )
    assert [i.drift_class for i in report.items] == ([expected] if expected else [])
    assert report.unverified == unverified


TIER = {"name": "tier", "type": "text", "label": "Tier"}


@pytest.mark.parametrize(
    ("live_attrs", "declared", "recorded", "expected"),
    [
        ([TIER], [TIER], {}, []),
        ([{**TIER, "label": "Edited"}], [TIER], {"tier": TIER}, ["changed_outside"]),
        ([TIER], [{**TIER, "label": "New"}], {"tier": TIER}, ["pending"]),
        ([{**TIER, "label": "X"}], [{**TIER, "label": "New"}], {"tier": TIER}, ["conflict"]),
        ([{**TIER, "label": "X"}], [TIER], {}, ["unknown_origin"]),
        ([], [TIER], {}, ["pending"]),  # declared, never created: attributes are never deleted
        ([TIER], [], {"tier": TIER}, ["pending"]),  # dropped from YAML: its archive is pending
        ([TIER], [], {}, ["unmanaged"]),
        # A label the YAML does not declare is not botctl's: a dashboard edit of it is no drift.
        ([{**TIER, "label": "Edited"}], [{"name": "tier", "type": "text"}], {}, []),
    ],
)
def test_an_attribute(
    live_attrs: list[dict[str, Any]],
    declared: list[dict[str, Any]],
    recorded: dict[str, dict[str, Any]],
    expected: list[str],
) -> None:
    report = compute_drift(
        desired(bot(attributes=declared)),
        live(live_bot(attributes=live_attrs)),
        record_of(attributes=recorded) if recorded else State(),
    )
    assert [i.drift_class for i in report.items] == expected


def test_changed_outside_says_whether_the_record_was_verified_or_only_sent() -> None:
    spec = desired(bot(settings={"name": "A"}))
    seen = live(live_bot(settings={"name": "B"}))
    (verified,) = compute_drift(spec, seen, record_of({"name": "A"})).items
    (sent,) = compute_drift(spec, seen, record_of({"name": "A"}, verified=False)).items
    assert (verified.basis, sent.basis) == ("verified", "sent")
    assert verified.to_document()["live"] == "B"


def test_missing_and_unmanaged_chatbots() -> None:
    config = Desired(
        bots=(bot(), bot("sales", "bot-2", settings={"name": "S"})),
        declared_ids=frozenset({"bot-1", "bot-2", "bot-elsewhere"}),
    )
    seen = Live(
        bots={
            "bot-1": live_bot(exists=False),
            "bot-2": live_bot("bot-2", {"name": "Edited"}),
        },
        listed={"BOTCTL_API_KEY": {"bot-2": "S", "faq": "FAQ", "bot-elsewhere": "Other"}},
    )
    report = compute_drift(config, seen, State())
    assert [(i.drift_class, i.bot.chatbot_id) for i in report.items] == [
        ("unknown_origin", "bot-2"),
        ("missing", "bot-1"),
    ]
    # Listed, declared by no document (another document's chatbot is not "unmanaged").
    assert [c.chatbot_id for c in report.unmanaged_chatbots] == ["faq"]
    document = report.to_document()
    assert document["missing"] == [{"chatbotId": "bot-1", "bot": "support"}]
    assert document["summary"]["unmanaged_chatbots"] == 1


def test_acknowledged_items_are_skipped_while_unchanged_and_unexpired() -> None:
    spec = desired(bot(settings={"name": "A"}))
    report = compute_drift(spec, live(live_bot(settings={"name": "B"})), record_of({"name": "A"}))
    now = datetime(2026, 11, 23, tzinfo=UTC)
    entries = acknowledgements_for(report, now + timedelta(days=7))
    quiet = acknowledge(report, entries, now)
    assert (quiet.has_drift, quiet.summary()["acknowledged"]) == (False, 1)
    later = acknowledge(report, entries, now + timedelta(days=8))
    assert later.has_drift
    assert [i.path for i in later.expired] == ["name"]
    moved = compute_drift(spec, live(live_bot(settings={"name": "C"})), record_of({"name": "A"}))
    assert acknowledge(moved, entries, now).has_drift  # another live value: not what was accepted


# --- the property: drift and plan agree -----------------------------------------------------

VALUES = {
    "name": st.sampled_from(["A", "B", "C"]),
    "model": st.sampled_from(["gpt-5-mini", "gpt-4o-mini", "auto"]),
    "temp": st.sampled_from([0.1, 0.5]),  # never readable in the documented read
}
LABELS = st.sampled_from(["Tier", "Plan", "Level"])
ATTRIBUTE_NAMES = st.sets(st.sampled_from(["a", "b", "c"]))


def attribute(name: str, label: str, archived: bool = False) -> dict[str, Any]:
    return {"name": name, "type": "text", "label": label, "archived": archived}


@st.composite
def worlds(draw: st.DrawFn) -> tuple[Desired, Live, State]:
    """A configuration, what the service holds and what the state records, each drawn apart."""
    declared = {key: draw(values) for key, values in VALUES.items()}
    declared_attrs = [attribute(n, draw(LABELS)) for n in sorted(draw(ATTRIBUTE_NAMES))]
    seen = live_bot(
        settings={key: draw(VALUES[key]) for key in ("name", "model")},
        attributes=[
            attribute(n, draw(LABELS), draw(st.booleans())) for n in sorted(draw(ATTRIBUTE_NAMES))
        ],
        readable=draw(st.booleans()),
        attributes_readable=draw(st.booleans()),
        exists=draw(st.sampled_from([True, True, True, False])),
    )
    if draw(st.booleans()):
        state = State()
    else:
        recorded = {key: draw(values) for key, values in VALUES.items() if draw(st.booleans())}
        recorded_attrs = {n: attribute(n, draw(LABELS)) for n in draw(ATTRIBUTE_NAMES)}
        state = record_of(recorded, recorded_attrs, verified=draw(st.booleans()))
    return desired(bot(settings=declared, attributes=declared_attrs)), live(seen), state


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_drift_agrees_with_plan(world: tuple[Desired, Live, State]) -> None:
    config, seen, state = world
    plan = compute_plan(config, seen, state).to_document()
    report = compute_drift(config, seen, state)
    drift = report.to_document()
    listed = {
        (c["chatbotId"], c["key"])
        for key in ("changed_outside", "pending", "conflicts", "unknown_origin")
        for c in drift[key]
    }
    for change in plan["changes"]:
        if change["confidence"] == "verified":
            assert (change["chatbotId"], change["key"]) in listed, change
    for key in ("changed_outside", "conflicts", "unknown_origin"):
        for item in drift[key]:
            assert item["live"] is not None or item["resource"] == "attribute", item
    counted = [c for c in plan["changes"] if c["confidence"] in ("verified", "assumed")]
    if not report.has_drift:
        assert counted == []
        assert plan["missing"] == []
        assert plan["unmanaged"] == []
    else:
        assert counted or plan["missing"] or plan["unmanaged"]
