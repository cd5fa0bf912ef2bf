"""Diffing values the state keeps only as fingerprints: the table of what the plan and drift
say, whether the declared or live value is the one recorded, and that no secret is shown."""

from __future__ import annotations

from typing import Any

import pytest

from botctl.models import BotRecord, LiveBot, State
from botctl.plan import Plan
from botctl.reconcile.diff import compute_plan
from botctl.reconcile.drift import compute_drift
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import ChatbotSettings
from botctl.sealing import FingerprintKey, Secret
from tests.factories import bot, desired, live, live_bot

SALT = "5a" * 32
STATE_KEY = b"a state key for tests"
KEY = FingerprintKey(SALT, STATE_KEY)
NEW, OLD = "n3w-t0ken", "0ld-t0ken"


def sealed_state(instructions: str, label: str | None = None) -> State:
    """What botctl recorded, read back from a file: values holding a secret, sealed."""
    record = BotRecord(
        bot="support",
        settings=ChatbotSettings(name="Bot"),
        sealed_settings={"instructions": KEY.seal(instructions)},
    )
    if label is not None:
        record.attributes["tier"] = CustomAttribute(name="tier", type="text")
        record.sealed_attributes["tier"] = {"label": KEY.seal(label)}
    return State(lineage="L", serial=2, salt=SALT, state_key=STATE_KEY, bots={"bot-1": record})


def spec(token: str = NEW, **extra: Any) -> Any:
    return bot(
        settings={"name": "Bot", "instructions": f"use {token}"},
        secrets=(Secret(token, "TOKEN"),),
        **extra,
    )


def unreadable() -> LiveBot:
    return live_bot(readable=False, attributes_readable=False)


def one_change(plan: Plan) -> tuple[str, str, Any, Any]:
    [(_, change)] = list(plan.changes())
    return change.action, change.confidence, change.before, change.after


@pytest.mark.parametrize(
    ("recorded", "seen", "expected"),
    [
        # Recorded as declared: its fingerprint is the declared value's. Nothing to do.
        (f"use {NEW}", unreadable(), None),
        # Recorded another secret (rotated since): assumed different, never shown.
        (f"use {OLD}", unreadable(), ("update", "assumed", "(secret)", "use (secret)")),
        # Read now: the live value decides, as always; a value read where the configuration
        # holds a secret is shown masked whole (it may hold the old one).
        (
            f"use {NEW}",
            live_bot(settings={"name": "Bot", "instructions": f"use {OLD}"}),
            ("update", "verified", "(secret)", "use (secret)"),
        ),
        (f"use {OLD}", live_bot(settings={"name": "Bot", "instructions": f"use {NEW}"}), None),
    ],
)
def test_sealed_settings_in_the_plan(
    recorded: str, seen: LiveBot, expected: tuple[str, str, Any, Any] | None
) -> None:
    plan = compute_plan(desired(spec()), live(seen), sealed_state(recorded))
    if expected is None:
        assert plan.empty
    else:
        assert one_change(plan) == expected
        assert plan.operations[0].body == {"instructions": f"use {NEW}"}
    assert OLD not in str(plan.to_document())
    assert NEW not in str(plan.to_document())


def test_a_sealed_attribute_label() -> None:
    declared = spec(attributes=[{"name": "tier", "type": "text", "label": f"T {NEW}"}])
    same = compute_plan(
        desired(declared), live(unreadable()), sealed_state(f"use {NEW}", f"T {NEW}")
    )
    assert same.empty
    rotated = compute_plan(
        desired(declared), live(unreadable()), sealed_state(f"use {NEW}", f"T {OLD}")
    )
    action, confidence, before, after = one_change(rotated)
    assert (action, confidence) == ("update", "assumed")
    assert before["label"] == "(secret)"
    assert after["label"] == "T (secret)"
    assert rotated.operations[0].body == {"label": f"T {NEW}", "archived": False}


def test_a_sealed_value_a_field_cannot_hold_as_a_stand_in_is_unknown() -> None:
    """``visibility`` takes public or private only: a sealed one that matches nothing cannot
    be compared at all, so its value is unknown, and sent."""
    declared = bot(settings={"visibility": "public"}, secrets=(Secret("public", "VIS"),))
    record = BotRecord(bot="support", sealed_settings={"visibility": KEY.seal("private")})
    st = State(lineage="L", serial=2, salt=SALT, state_key=STATE_KEY, bots={"bot-1": record})
    plan = compute_plan(desired(declared), live(unreadable()), st)
    assert one_change(plan) == ("update", "unknown", None, "(secret)")


@pytest.mark.parametrize(
    ("recorded", "now", "drift_class"),
    [
        (f"use {OLD}", f"use {OLD}", "pending"),  # the configuration moved (a new secret)
        (f"use {NEW}", f"use {OLD}", "changed_outside"),  # the service moved
        ("use 0ther", f"use {OLD}", "conflict"),  # both moved: it matches neither
    ],
)
def test_drift_compares_sealed_values_by_fingerprint(
    recorded: str, now: str, drift_class: str
) -> None:
    seen = live_bot(settings={"name": "Bot", "instructions": now})
    report = compute_drift(desired(spec()), live(seen), sealed_state(recorded))
    [item] = report.items
    assert item.drift_class == drift_class
    document = str(report.to_document())
    for secret in (NEW, OLD, "0ther"):
        assert secret not in document
