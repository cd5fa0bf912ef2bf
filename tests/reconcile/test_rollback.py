"""What apply --rollback-on-failure puts back: the previous settings as the plan read them or
the state recorded them, whole top-level fields, never attributes, never a guess."""

from __future__ import annotations

from botctl.plan import BotRef, Plan
from botctl.reconcile.apply import ApplyReport, OpResult
from botctl.reconcile.rollback import plan_rollback, previous_values
from botctl.sealing import Sealed
from tests.factories import live, live_bot, operation, state

OTHER = BotRef("other", "bot-2", "BOTCTL_API_KEY")


def applied(*ops: object) -> ApplyReport:
    return ApplyReport(tuple(OpResult(op, "applied") for op in ops))  # type: ignore[arg-type]


def test_previous_values_come_from_the_service_first_then_the_state() -> None:
    op = operation(body={"instructions": "New", "temp": 0.5, "styles": {"theme": "dark"}})
    plan = Plan(operations=(op,))
    before = previous_values(
        plan,
        live(live_bot(settings={"instructions": "Old", "styles": {"theme": "light"}})),
        state(settings={"instructions": "Older", "temp": 0.2}),
    )
    assert before[("bot-1", "settings")].values == {
        "instructions": "Old",
        "temp": 0.2,
        "styles.theme": "light",
    }
    rollback = plan_rollback(applied(op), {"bot-1"}, before)
    (restore,) = rollback.operations
    assert restore.body == {"instructions": "Old", "temp": 0.2, "styles": {"theme": "light"}}
    assert restore.state_record == restore.body
    assert rollback.not_restorable == ()


def test_a_nested_object_is_restored_whole_or_not_at_all() -> None:
    op = operation(body={"styles": {"theme": "dark", "buttonColor": "#000"}})
    before = previous_values(
        Plan(operations=(op,)),
        live(live_bot(settings={"styles": {"theme": "light", "alignChatButton": "left"}})),
        state(settings={}),
    )
    rollback = plan_rollback(applied(op), {"bot-1"}, before)
    assert rollback.operations == ()
    (missing,) = rollback.not_restorable
    assert (missing.field, missing.why) == (
        "styles",
        "its previous value was never read nor recorded by botctl",
    )
    known = previous_values(
        Plan(operations=(op,)),
        live(
            live_bot(
                settings={
                    "styles": {"theme": "light", "buttonColor": "#fff", "alignChatButton": "left"}
                }
            )
        ),
        state(settings={}),
    )
    (restore,) = plan_rollback(applied(op), {"bot-1"}, known).operations
    assert restore.body == {
        "styles": {"theme": "light", "buttonColor": "#fff", "alignChatButton": "left"}
    }


def test_a_recorded_secret_is_not_restorable() -> None:
    op = operation(body={"instructions": "New"})
    recorded = state(settings={})
    recorded.bots["bot-1"].sealed_settings["instructions"] = Sealed("hmac-sha256:abc")
    before = previous_values(Plan(operations=(op,)), live(live_bot(readable=False)), recorded)
    rollback = plan_rollback(applied(op), {"bot-1"}, before)
    assert rollback.operations == ()
    assert rollback.not_restorable[0].why == "held a secret: botctl keeps only its fingerprint"


def test_only_failed_chatbots_and_never_attributes() -> None:
    settings_op = operation(body={"name": "New"})
    attribute_op = operation(
        "create_attribute", "tier", {"name": "tier", "type": "text", "label": "T"}
    )
    other_op = operation(body={"name": "Other new"}, ref=OTHER)
    plan = Plan(operations=(settings_op, attribute_op, other_op))
    before = previous_values(
        plan,
        live(live_bot(settings={"name": "Old"}), live_bot("bot-2", settings={"name": "Other"})),
        state(settings={}),
    )
    report = ApplyReport(
        (
            OpResult(settings_op, "applied"),
            OpResult(attribute_op, "applied"),
            OpResult(other_op, "applied"),
        )
    )
    rollback = plan_rollback(report, {"bot-1"}, before)
    assert [(op.bot.name, op.body) for op in rollback.operations] == [("support", {"name": "Old"})]
    assert rollback.kept == (attribute_op,)
