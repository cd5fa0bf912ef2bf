"""Pure parts of the wiring: stale-plan checks and post-apply verification."""

from __future__ import annotations

from typing import Any, cast

import pytest

from botctl.errors import PlanError, StalePlanError
from botctl.models import Live, State
from botctl.plan import Dependency, Plan
from botctl.reconcile.apply import ApplyReport, OpResult
from botctl.reconcile.freshness import check_fresh, resolve_secrets, verify_applied
from botctl.sealing import FingerprintKey, Secret, seal_strings
from botctl.values import JsonValue
from tests.factories import live, live_bot, operation, state


def plan_with(*deps: Dependency, serial: int | None = 3, lineage: str | None = "L") -> Plan:
    return Plan(depends_on=deps, state_serial=serial, state_lineage=lineage)


def state_at(serial: int | None = 3, lineage: str | None = "L", **record: Any) -> State:
    st = state(**record) if record else State()
    st.lineage, st.serial = lineage, serial or 0
    return st


NOW = live(
    live_bot(
        settings={"styles": {"theme": "light"}},
        attributes=[{"name": "tier", "type": "text", "label": "T"}],
    )
)


def test_fresh_plan_passes() -> None:
    dep = Dependency("bot-1", "settings", "name", "A")
    check_fresh(plan_with(dep), live(live_bot(settings={"name": "A"})), state_at(), None)


def test_a_state_written_since_is_fine_when_nothing_relied_on_moved() -> None:
    """Another apply ran (serial 3 -> 9), recording other chatbots: the plan is still true."""
    relied = Dependency("bot-1", "settings", "temp", 0.2, source="state")
    now = state_at(serial=9, settings={"temp": 0.2})
    now.bots["bot-2"] = now.bots["bot-1"]  # another chatbot, written by the other apply
    check_fresh(plan_with(relied), Live(), now, None)


@pytest.mark.parametrize(
    ("plan", "now", "message"),
    [
        (plan_with(), state_at(lineage="other"), "another state lineage"),
        (plan_with(serial=None, lineage=None), state_at(serial=1, lineage="new"), "None -> 1"),
        (
            plan_with(Dependency("bot-1", "settings", "styles.theme", "dark")),
            state_at(),
            "the service changed since the plan was made. Moved:\n"
            "  - bot-1 settings styles.theme: 'dark' -> 'light'",
        ),
        (
            plan_with(Dependency("bot-1", "attribute", "tier", None)),
            state_at(),
            "bot-1 attribute tier: None -> {",
        ),
        (
            plan_with(Dependency("bot-1", "settings", "temp", 0.2, source="state")),
            state_at(serial=4, settings={"temp": 0.5}),
            "the state changed since the plan was made (serial 3 -> 4): another apply "
            "recorded other values for chatbots this plan writes to. Moved:\n"
            "  - bot-1 settings temp: 0.2 -> 0.5",
        ),
        (
            plan_with(Dependency("bot-1", "attribute", "old", None, source="state")),
            state_at(serial=4, attributes={"old": {"name": "old", "type": "text"}}),
            "bot-1 attribute old: None -> {'name': 'old'",
        ),
    ],
)
def test_stale_plans_are_refused_saying_what_moved(plan: Plan, now: State, message: str) -> None:
    with pytest.raises(StalePlanError) as caught:
        check_fresh(plan, NOW, now, None)
    assert message in str(caught.value)


SALT = FingerprintKey("ab" * 32, b"a state key for tests")


def test_a_value_relied_on_that_held_a_secret_is_compared_by_fingerprint_and_never_shown() -> None:
    sealed = SALT.seal("token s3cr3t")
    dep = Dependency("bot-1", "settings", "instructions", sealed, secret=True)
    same = live(live_bot(settings={"instructions": "token s3cr3t"}))
    check_fresh(plan_with(dep), same, state_at(), SALT)
    moved = live(live_bot(settings={"instructions": "token 0ther"}))
    with pytest.raises(StalePlanError) as caught:
        check_fresh(plan_with(dep), moved, state_at(), SALT)
    assert "bot-1 settings instructions: (secret) -> (secret)" in str(caught.value)
    assert "0ther" not in str(caught.value)


def test_a_sealed_value_recorded_in_the_state_is_compared_as_recorded() -> None:
    recorded = state_at(settings={"name": "N"})
    recorded.bots["bot-1"].sealed_settings["instructions"] = SALT.seal("x")
    relied = Dependency("bot-1", "settings", "instructions", SALT.seal("x"), source="state")
    check_fresh(plan_with(relied), Live(), recorded, SALT)
    recorded.bots["bot-1"].sealed_settings["instructions"] = SALT.seal("y")
    with pytest.raises(StalePlanError, match=r"instructions: \(secret\) -> \(secret\)"):
        check_fresh(plan_with(relied), Live(), recorded, SALT)


def saved_plan(text: JsonValue) -> Plan:
    """A plan as read from a file: its request holds a secret as pieces."""
    sealed_body = seal_strings(
        {"instructions": text}, [Secret("s3cr3t", "TOKEN"), Secret("d", "OPT", True)], SALT
    )
    op = operation(body=cast(dict[str, Any], sealed_body))
    return Plan(operations=(op,), state_serial=3, state_lineage="L")


def test_secrets_of_a_saved_plan_are_resolved_from_the_environment() -> None:
    plan = resolve_secrets(saved_plan("use s3cr3t, or d"), {"TOKEN": "s3cr3t", "OPT": "d"}, SALT)
    assert plan.operations[0].body == {"instructions": "use s3cr3t, or d"}
    assert plan.operations[0].state_record == {"instructions": "use s3cr3t, or d"}
    assert {secret.value for secret in plan.secrets} == {"s3cr3t", "d"}
    # Both are short (BC103): the whole request text that holds them is masked where it stands.
    assert plan.secret_values == {"s3cr3t", "d", "use s3cr3t, or d"}


def test_a_secret_that_changed_since_the_plan_refuses_it_naming_the_variable() -> None:
    with pytest.raises(StalePlanError) as caught:
        resolve_secrets(saved_plan("use s3cr3t"), {"TOKEN": "rotated"}, SALT)
    assert "the secret $TOKEN changed since the plan was made" in str(caught.value)
    assert "rotated" not in str(caught.value)


def test_a_secret_that_is_not_set_refuses_the_plan_naming_the_variable() -> None:
    with pytest.raises(PlanError) as caught:
        resolve_secrets(saved_plan("use s3cr3t, or d"), {}, SALT)
    message = str(caught.value)
    assert "not set: $OPT (the plan was made with the default" in message
    assert "$TOKEN." in message


def test_verification_reports_values_not_taken_as_sent() -> None:
    settings = operation(body={"styles": {"buttonColor": "#ABCDEF"}})
    attr = {"name": "tier", "type": "text", "label": "Tier  ", "archived": False}
    create = operation("create_attribute", "tier", attr)
    report = ApplyReport((OpResult(settings, "applied"), OpResult(create, "applied")))
    now = live(
        live_bot(
            settings={"styles": {"buttonColor": "#abcdef"}},
            attributes=[{"name": "tier", "type": "text", "label": "Tier"}],
        )
    )
    notes = verify_applied(report, now)
    assert notes == [
        "support: settings styles.buttonColor was sent as '#ABCDEF' but reads back as '#abcdef'",
        "support: attribute tier label was sent as 'Tier  ' but reads back as 'Tier'",
    ]


def test_verification_is_silent_when_values_cannot_be_read() -> None:
    op = operation(body={"temp": 0.2})
    report = ApplyReport((OpResult(op, "applied"),))
    assert verify_applied(report, live(live_bot(settings={"name": "x"}))) == []


def test_collector_paused_restores_what_it_found() -> None:
    import gc

    from botctl.pipeline.workspace import collector_paused

    def fail_while_paused() -> None:
        with collector_paused():
            assert not gc.isenabled()
            raise RuntimeError

    assert gc.isenabled()
    with pytest.raises(RuntimeError):
        fail_while_paused()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller that had it off keeps it off
    finally:
        gc.enable()


def test_garbage_made_while_paused_is_freed_by_the_next_young_collections() -> None:
    """Nothing built while paused is set aside where only a full collection finds it (the
    garbage of each run of a long-running process would wait for a rare one)."""
    import gc
    import weakref

    from botctl.pipeline.workspace import collector_paused

    class Node:
        def __init__(self) -> None:
            self.me = self

    with collector_paused():
        left = [weakref.ref(Node()) for _ in range(100)]  # unreachable cycles
    gc.collect(1)
    assert all(ref() is None for ref in left)


SECRET = 'hunter2 "quoted"\n'  # escaped differently by repr and JSON


def test_verification_masks_secrets_in_every_spelling() -> None:
    """A value from ${secret:...} that reads back differently is quoted (repr-escaped) by the
    warning: the secret shows as (secret), never in any escaped form."""
    sent = f"Use {SECRET} carefully"
    op = operation(body={"instructions": sent})
    attr = {"name": "tier", "type": "text", "label": SECRET, "archived": False}
    create = operation("create_attribute", "tier", attr)
    report = ApplyReport((OpResult(op, "applied"), OpResult(create, "applied")))
    now = live(
        live_bot(
            settings={"instructions": sent + "!"},
            attributes=[{"name": "tier", "type": "text", "label": SECRET.upper()}],
        )
    )
    notes = verify_applied(report, now, frozenset({SECRET}))
    assert notes == [
        "support: settings instructions was sent as 'Use (secret) carefully' but reads back as "
        "'Use (secret) carefully!'",
        "support: attribute tier label was sent as '(secret)' but reads back as "
        "'HUNTER2 \"QUOTED\"\\n'",
    ]


def test_a_stale_plan_names_what_moved_without_secrets() -> None:
    dep = Dependency("bot-1", "settings", "instructions", f"say {SECRET}")
    plan = Plan(
        depends_on=(dep,),
        state_serial=3,
        state_lineage="L",
        secrets=frozenset({Secret(SECRET, "TOKEN")}),
    )
    with pytest.raises(StalePlanError) as caught:
        check_fresh(plan, live(live_bot(settings={"instructions": SECRET})), state_at(), None)
    assert "bot-1 settings instructions: 'say (secret)' -> '(secret)'" in str(caught.value)
    assert "hunter2" not in str(caught.value)
