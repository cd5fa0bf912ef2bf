"""The diff table: Desired x Live x State -> changes, operations and confidence."""

from __future__ import annotations

from typing import Any

import pytest

from botctl.errors import ImpossibleChangeError
from botctl.models import Live, State
from botctl.plan import FLAG_CUTS_OFF_USERS, Change, Plan
from botctl.reconcile.diff import compute_plan, missing_error
from botctl.reconcile.safety import SafetyPolicy
from botctl.sealing import Secret
from botctl.values import mask_secrets, same_value
from tests.factories import bot, desired, live, live_bot, state

TEXT: dict[str, Any] = {"name": "tier", "type": "text", "label": "Tier", "archived": False}


def changes(plan: Plan) -> list[Change]:
    return [change for _, change in plan.changes()]


def _one(plan: Plan) -> tuple[str, str, str, Any, Any]:
    (c,) = changes(plan)
    return (c.path, c.action, c.confidence, c.before, c.after)


@pytest.mark.parametrize(
    ("live_settings", "readable", "state_settings", "expected"),
    [
        # read now and equal: nothing to do
        ({"name": "A"}, True, None, None),
        # read now and different: verified update
        ({"name": "B"}, True, None, ("name", "update", "verified", "B", "A")),
        # not readable, state says equal: assumed in sync
        ({}, False, {"name": "A"}, None),
        # not readable, state says different: assumed update
        ({}, False, {"name": "B"}, ("name", "update", "assumed", "B", "A")),
        # neither: unknown, sent
        ({}, False, None, ("name", "update", "unknown", None, "A")),
        # readable list but the field is not returned: falls back to state
        ({"model": "auto"}, True, {"name": "A"}, None),
        # verified beats state: the dashboard changed it back
        ({"name": "B"}, True, {"name": "A"}, ("name", "update", "verified", "B", "A")),
    ],
)
def test_settings_confidence_table(
    live_settings: dict[str, Any],
    readable: bool,
    state_settings: dict[str, Any] | None,
    expected: tuple[str, str, str, Any, Any] | None,
) -> None:
    plan = compute_plan(
        desired(bot(settings={"name": "A"})),
        live(live_bot(settings=live_settings, readable=readable)),
        state(settings=state_settings) if state_settings is not None else State(),
    )
    if expected is None:
        assert changes(plan) == []
        assert plan.empty
    else:
        assert _one(plan) == expected
        assert [op.body for op in plan.operations] == [{"name": "A"}]


def test_only_changed_fields_are_sent_and_nested_objects_whole() -> None:
    spec = bot(
        settings={"name": "A", "temp": 0.2, "styles": {"theme": "dark", "buttonColor": "#fff"}}
    )
    observed = {"name": "A", "temp": 0.5, "styles": {"theme": "dark", "buttonColor": "#000"}}
    plan = compute_plan(desired(spec), live(live_bot(settings=observed)), State())
    assert [c.path for c in changes(plan)] == ["styles.buttonColor", "temp"]
    (op,) = plan.operations
    assert op.kind == "update_settings"
    assert op.body == {"styles": {"theme": "dark", "buttonColor": "#fff"}, "temp": 0.2}


def test_unmanaged_setting_is_never_compared() -> None:
    plan = compute_plan(
        desired(bot(settings={"name": "A"})),
        live(live_bot(settings={"name": "A", "model": "auto", "temp": 0.9})),
        State(),
    )
    assert plan.empty
    assert plan.unverified == 0


def test_integer_and_float_temperatures_are_equal() -> None:
    assert same_value(1, 1.0)
    plan = compute_plan(
        desired(bot(settings={"temp": 1})), live(live_bot(settings={"temp": 1.0})), State()
    )
    assert plan.empty


@pytest.mark.parametrize(
    ("declared", "live_attrs", "managed", "expected_action", "kind", "confidence"),
    [
        (TEXT, [], {}, "create", "create_attribute", "verified"),
        (TEXT, None, {}, "create", "ensure_attribute", "unknown"),
        (TEXT, [{**TEXT, "label": "Old"}], {}, "update", "update_attribute", "verified"),
        ({**TEXT, "archived": True}, [TEXT], {}, "archive", "update_attribute", "verified"),
        (TEXT, [{**TEXT, "archived": True}], {}, "unarchive", "update_attribute", "verified"),
        (TEXT, None, {"tier": {**TEXT, "label": "Old"}}, "update", "update_attribute", "assumed"),
    ],
)
def test_attribute_transitions(
    declared: dict[str, Any],
    live_attrs: list[dict[str, Any]] | None,
    managed: dict[str, dict[str, Any]],
    expected_action: str,
    kind: str,
    confidence: str,
) -> None:
    plan = compute_plan(
        desired(bot(attributes=[declared])),
        live(live_bot(attributes=live_attrs or [], attributes_readable=live_attrs is not None)),
        state(attributes=managed),
    )
    (change,) = changes(plan)
    (op,) = plan.operations
    assert (change.action, op.kind, change.confidence) == (expected_action, kind, confidence)
    if op.kind == "update_attribute":
        assert op.body["archived"] is declared["archived"]  # always explicit


def test_create_always_sends_a_label() -> None:
    plan = compute_plan(
        desired(bot(attributes=[{"name": "score", "type": "number"}])),
        live(live_bot(attributes=[])),
        State(),
    )
    (op,) = plan.operations
    assert op.body == {"name": "score", "type": "number", "label": "score", "archived": False}


def test_type_change_is_impossible_and_explained() -> None:
    with pytest.raises(ImpossibleChangeError, match="cannot change an attribute's type"):
        compute_plan(
            desired(bot(attributes=[{**TEXT, "type": "number"}])),
            live(live_bot(attributes=[TEXT])),
            State(),
        )


def test_dropped_managed_attribute_is_archived_unmanaged_is_reported() -> None:
    live_attrs = [TEXT, {"name": "stray", "type": "text", "label": "Stray"}]
    plan = compute_plan(
        desired(bot(attributes=[])),
        live(live_bot(attributes=live_attrs)),
        state(attributes={"tier": TEXT}),
    )
    assert [(c.path, c.action) for c in changes(plan)] == [("tier", "archive")]
    assert [u.name for u in plan.unmanaged] == ["stray"]


def test_prune_archives_unmanaged_but_not_archived_ones() -> None:
    live_attrs: list[dict[str, Any]] = [
        {"name": "stray", "type": "text", "label": "Stray"},
        {"name": "old", "type": "text", "label": "Old", "archived": True},
    ]
    plan = compute_plan(
        desired(bot(attributes=[], prune=True)), live(live_bot(attributes=live_attrs)), State()
    )
    assert [(c.path, c.action) for c in changes(plan)] == [("stray", "archive")]
    assert plan.unmanaged == ()


def test_redeclared_archived_attribute_is_unarchived_not_created() -> None:
    plan = compute_plan(
        desired(bot(attributes=[TEXT])),
        live(live_bot(attributes=[{**TEXT, "archived": True}])),
        State(),
    )
    assert [op.kind for op in plan.operations] == ["update_attribute"]
    assert changes(plan)[0].action == "unarchive"


def test_a_missing_chatbot_is_reported_and_the_others_still_planned() -> None:
    plan = compute_plan(
        desired(bot(), bot("sales", "bot-2", settings={"name": "S"})),
        live(live_bot(exists=False), live_bot("bot-2", {"name": "Old"})),
        State(),
    )
    assert [b.chatbot_id for b in plan.missing] == ["bot-1"]
    assert [(op.bot.name, op.body) for op in plan.operations] == [("sales", {"name": "S"})]
    error = missing_error(plan)
    assert error is not None
    assert "support: chatbot bot-1 does not exist in the account of $BOTCTL_API_KEY" in str(error)
    assert missing_error(compute_plan(desired(bot()), live(live_bot()), State())) is None


def test_private_visibility_is_flagged() -> None:
    plan = compute_plan(
        desired(bot(settings={"visibility": "private"})),
        live(live_bot(settings={"visibility": "public"})),
        State(),
    )
    assert changes(plan)[0].flags == (FLAG_CUTS_OFF_USERS,)


def test_no_reads_no_state_sends_everything_then_state_converges() -> None:
    spec = bot(settings={"name": "A", "temp": 0.1}, attributes=[TEXT])
    first = compute_plan(desired(spec), Live(), State())
    assert {c.confidence for c in changes(first)} == {"unknown"}
    st = State()
    for op in first.operations:
        st.apply_operation(op)
    st.lineage = "x"
    assert compute_plan(desired(spec), Live(), st).empty


def test_secrets_are_masked_in_changes_but_not_in_operations() -> None:
    spec = bot(settings={"instructions": "token s3cr3t here"}, secrets=(Secret("s3cr3t", "T"),))
    plan = compute_plan(desired(spec), Live(), State())
    assert "s3cr3t" not in str(plan.to_document())
    assert plan.operations[0].body["instructions"] == "token s3cr3t here"
    assert next(plan.changes())[1].after == "(secret)"  # short: masked where it stands, whole
    # The substring net: a secret of 8 characters or more, wherever it is in text...
    assert mask_secrets(["a s3cr3t-t0k"], frozenset({"s3cr3t-t0k"})) == ["a (secret)"]
    # ...and not a shorter one, which would mangle other text; it is masked where it stands.
    assert mask_secrets(["v1.2", "1"], frozenset({"1"})) == ["v1.2", "(secret)"]


def test_plan_is_deterministic_whatever_the_order() -> None:
    a, b = bot("a", "id-a", {"name": "x"}), bot("b", "id-b", {"name": "y"})
    one = compute_plan(desired(a, b), Live(), State())
    two = compute_plan(desired(b, a), Live(), State())
    assert one.to_document() == two.to_document()


def _many(n: int) -> list[dict[str, Any]]:
    return [{"name": f"a{i:02d}", "type": "text", "label": f"A{i}"} for i in range(n)]


@pytest.mark.parametrize(
    ("active", "archived", "refused"),
    [
        (10, 3, False),  # exactly 30 %: at the limit
        (10, 4, True),  # one past it
        (9, 9, False),  # fewer than 10 attributes: no percentage cap
    ],
)
def test_archive_percentage_cap(active: int, archived: int, refused: bool) -> None:
    attrs = _many(active)
    keep = attrs[archived:]
    plan = compute_plan(
        desired(bot(attributes=keep)),
        live(live_bot(attributes=attrs)),
        state(attributes={a["name"]: a for a in attrs}),
    )
    assert sum(c.action == "archive" for c in changes(plan)) == archived
    assert bool(plan.violations) is refused


def test_per_document_override_and_run_cap() -> None:
    attrs = _many(10)
    managed = {a["name"]: a for a in attrs}
    overridden = bot(attributes=[], max_archive_percent=100)
    plan = compute_plan(
        desired(overridden), live(live_bot(attributes=attrs)), state(attributes=managed)
    )
    assert plan.violations == ()
    capped = compute_plan(
        desired(overridden),
        live(live_bot(attributes=attrs)),
        state(attributes=managed),
        SafetyPolicy(max_archives=9),
    )
    assert capped.violations == ("the run archives 10 attributes (more than 9)",)


def test_single_precision_read_back_is_not_a_change() -> None:
    assert same_value({"temp": 0.2}, {"temp": 0.20000000298023224})
    assert not same_value(0.2, 0.25)
    assert not same_value(["a", "b"], ["b", "a"])  # order of messages matters


# --- records outside the contract, and letter case -----------------------------------------------

OFF_CONTRACT: list[dict[str, Any]] = [
    {"name": "has space", "type": "text", "label": "Odd"},
    {"name": "pick", "type": "select"},
    {"name": "flag", "type": "boolean", "archived": 0},
]


def test_off_contract_records_are_unmanageable_and_the_rest_planned_as_usual() -> None:
    """One attribute record outside the contract's rules aborted plan, drift and export."""
    plan = compute_plan(
        desired(bot(attributes=[TEXT, {"name": "seats", "type": "number"}], prune=True)),
        live(live_bot(attributes=[*OFF_CONTRACT, {**TEXT, "label": "Old"}])),
        state(attributes={"pick": {"name": "pick", "type": "text"}}),
    )
    assert [(c.path, c.action) for c in changes(plan)] == [("seats", "create"), ("tier", "update")]
    assert [(u.bot.name, u.name) for u in plan.unmanageable] == [
        ("support", "flag"),
        ("support", "has space"),
        ("support", "pick"),
    ]
    # Never archived, not even with prune or when botctl once managed the name.
    assert plan.unmanaged == ()
    assert all(op.subject in ("seats", "tier") for op in plan.operations)
    assert plan.summary()["unmanageable"] == 3


def test_a_declared_attribute_held_off_contract_is_a_warning_not_a_write() -> None:
    plan = compute_plan(
        desired(bot(attributes=[{"name": "pick", "type": "text"}, TEXT])),
        live(live_bot(attributes=[{"name": "pick", "type": "select"}])),
        State(),
    )
    assert [(c.path, c.action) for c in changes(plan)] == [("tier", "create")]
    assert plan.warnings == (
        "warning[BC304]: support: attribute 'pick' is declared, but the service holds it "
        'outside the contract\'s rules (type "select" is not one of text, number, boolean, '
        "date): botctl does not write it",
    )


@pytest.mark.parametrize(
    ("observed", "recorded"),
    [
        ([{"name": "seats", "type": "number"}], {}),  # read now
        (None, {"seats": {"name": "seats", "type": "number"}}),  # no reads: as recorded
        ([{"name": "seats", "type": "select"}], {}),  # held off contract
    ],
    ids=["live", "recorded", "off-contract"],
)
def test_a_name_that_differs_from_a_held_one_only_in_case_is_impossible(
    observed: list[dict[str, Any]] | None, recorded: dict[str, dict[str, Any]]
) -> None:
    """`Seats` beside a live `seats` passed validate and failed at apply on every run (the
    service refuses the create): it is an impossible change, planned as such."""
    seen = live_bot(attributes=observed or [], attributes_readable=observed is not None)
    with pytest.raises(ImpossibleChangeError) as caught:
        compute_plan(
            desired(bot(attributes=[{"name": "Seats", "type": "number"}])),
            live(seen),
            state(attributes=recorded),
        )
    assert (
        "attribute 'Seats' is declared, and the service holds 'seats', which differs only in "
        "letter case" in str(caught.value)
    )
    assert "declare it as 'seats'" in str(caught.value)


def test_names_that_match_exactly_are_planned_whatever_else_differs_in_case() -> None:
    """Two live names differing only in case (made elsewhere): each is its own attribute."""
    plan = compute_plan(
        desired(bot(attributes=[{"name": "seats", "type": "number", "label": "Seats"}])),
        live(
            live_bot(
                attributes=[
                    {"name": "Seats", "type": "number"},
                    {"name": "seats", "type": "number"},
                ]
            )
        ),
        State(),
    )
    assert [(c.path, c.action) for c in changes(plan)] == [("seats", "update")]
    assert [u.name for u in plan.unmanaged] == ["Seats"]


def test_secrets_are_masked_in_what_an_unmanageable_record_shows() -> None:
    plan = compute_plan(
        desired(
            bot(attributes=[{"name": "pick", "type": "text"}], secrets=(Secret("hunter2", "T"),))
        ),
        live(live_bot(attributes=[{"name": "pick", "type": "text", "label": ["hunter2"]}])),
        State(),
    )
    assert [u.reason for u in plan.unmanageable] == ['label ["(secret)"] is not text']
    assert "hunter2" not in "".join(plan.warnings)
    assert "(secret)" in plan.warnings[0]
