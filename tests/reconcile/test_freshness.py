"""Pure parts of the wiring: stale-plan checks and post-apply verification."""

from __future__ import annotations

import pytest

from botctl.errors import StalePlanError
from botctl.plan import Dependency, Plan
from botctl.reconcile.apply import ApplyReport, OpResult
from botctl.reconcile.freshness import check_fresh, verify_applied
from tests.factories import live, live_bot, operation


def plan_with(*deps: Dependency, serial: int | None = 3, lineage: str | None = "L") -> Plan:
    return Plan(depends_on=deps, state_serial=serial, state_lineage=lineage)


def test_fresh_plan_passes() -> None:
    dep = Dependency("bot-1", "settings", "name", "A")
    check_fresh(plan_with(dep), live(live_bot(settings={"name": "A"})), 3, "L")


@pytest.mark.parametrize(
    ("plan", "serial", "lineage", "message"),
    [
        (plan_with(), 4, "L", "serial 3 -> 4"),
        (plan_with(), 3, "other", "another state lineage"),
        (plan_with(serial=None, lineage=None), 1, "new", "serial None -> 1"),
        (
            plan_with(Dependency("bot-1", "settings", "styles.theme", "dark")),
            3,
            "L",
            "bot-1 settings styles.theme: 'dark' -> 'light'",
        ),
        (
            plan_with(Dependency("bot-1", "attribute", "tier", None)),
            3,
            "L",
            "bot-1 attribute tier: None -> {",
        ),
    ],
)
def test_stale_plans_are_refused_saying_what_moved(
    plan: Plan, serial: int | None, lineage: str | None, message: str
) -> None:
    now = live(
        live_bot(
            settings={"styles": {"theme": "light"}},
            attributes=[{"name": "tier", "type": "text", "label": "T"}],
        )
    )
    with pytest.raises(StalePlanError) as caught:
        check_fresh(plan, now, serial, lineage)
    assert message in str(caught.value)


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
    plan = Plan(depends_on=(dep,), state_serial=3, state_lineage="L", secrets=frozenset({SECRET}))
    with pytest.raises(StalePlanError) as caught:
        check_fresh(plan, live(live_bot(settings={"instructions": SECRET})), 3, "L")
    assert "bot-1 settings instructions: 'say (secret)' -> '(secret)'" in str(caught.value)
    assert "hunter2" not in str(caught.value)
