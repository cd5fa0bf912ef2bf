"""The per-chatbot diff of ``/status`` (``agent.diffview``): classes in order, bounded per
chatbot with the rest counted, values redacted before they are shortened."""

from __future__ import annotations

from botctl.agent.diffview import VALUE_CHARS, diffs, shown
from botctl.agent.log import Redactor
from botctl.plan import BotRef, Change, Operation, Plan, Unmanageable
from botctl.reconcile.drift import DriftItem, DriftReport

BOT = BotRef("support", "bot-1", "BOTCTL_API_KEY")
OTHER = BotRef("sales", "bot-2", "BOTCTL_API_KEY")
KEY = "sk-live-0123456789abcdef"


def redactor() -> Redactor:
    return Redactor({"BOTCTL_API_KEY": KEY}, ["BOTCTL_API_KEY"], set())


def test_every_class_is_shown_with_its_values_in_order() -> None:
    pending = Change("settings", "temp", "update", 0.7, 0.2, "verified")
    report = DriftReport(
        items=(
            DriftItem(BOT, "unmanaged", "attribute", "nickname", live={"name": "nickname"}),
            DriftItem(BOT, "changed_outside", "settings", "model", "gpt-5", "gpt-4o", "gpt-4o"),
            DriftItem(BOT, "pending", "settings", "temp", change=pending, last_applied=0.7),
            DriftItem(OTHER, "missing", "chatbot", "bot-2"),
        ),
        unverified=0,
        bots=(BOT, OTHER),
        unmanageable=(Unmanageable(BOT, "has space", "a name the contract refuses"),),
    )
    write_only = Change("settings", "apiSecret", "update", None, "(secret)", "unknown")
    plan = Plan(operations=(Operation(BOT, "update_settings", "settings", {}, {}, (write_only,)),))
    found = diffs(report, plan, redactor())
    assert [(e["class"], e["path"]) for e in found["bot-1"].entries] == [
        ("changed_outside", "model"),
        ("pending", "temp"),
        ("unmanaged", "nickname"),
        ("unreadable", "apiSecret"),
        ("unmanageable", "has space"),
    ]
    model, temp, nickname, secret, odd = found["bot-1"].entries
    assert (model["live"], model["desired"], model["lastApplied"]) == ("gpt-5", "gpt-4o", "gpt-4o")
    assert (temp["live"], temp["desired"], temp["action"]) == (0.7, 0.2, "update")
    assert nickname["live"] == {"name": "nickname"}
    assert (secret["live"], secret["desired"]) == (None, "(secret)")
    assert odd["reason"] == "a name the contract refuses"
    assert found["bot-2"].to_document() == {
        "items": [{"class": "missing", "resource": "chatbot", "path": "bot-2"}],
        "omitted": 0,
    }


def test_entries_past_the_limit_are_counted_not_shown() -> None:
    items = tuple(
        DriftItem(BOT, "unmanaged", "attribute", f"extra_{n:03d}", live=n) for n in range(60)
    )
    report = DriftReport(items=items, unverified=0, bots=(BOT,))
    found = diffs(report, Plan(), redactor(), limit=25)["bot-1"]
    assert len(found.entries) == 25
    assert found.omitted == 35
    assert found.entries[0]["path"] == "extra_000"


def test_a_long_value_is_redacted_before_it_is_cut() -> None:
    # The key straddles the cut: shortened first, its first half would show unmasked.
    value = "x" * (VALUE_CHARS - 10) + KEY + "y" * 50
    text = shown(value, redactor())
    assert isinstance(text, str)
    assert KEY[:8] not in text
    assert "more characters)" in text
    assert shown({"prompt": f"use {KEY}"}, redactor()) == {"prompt": "use (secret)"}
    assert shown(0.2, redactor()) == 0.2
