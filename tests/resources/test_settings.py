"""The settings resource, field by field. FIELDS is the one test table a new writable setting
adds a row to (a top-level field, and each leaf of a nested object by its dotted path): the row
drives live parsing (both spellings), the diff, the request body, the state record and the
JSON Schema checks below."""

from __future__ import annotations

from typing import Any

import pytest

from botctl.config.document import json_schema
from botctl.plan import FLAG_CUTS_OFF_USERS, BotRef
from botctl.resources.base import BotPlan
from botctl.resources.settings import (
    ChatbotSettings,
    fold,
    model_leaves,
    plan_settings,
    read_live,
)

REF = BotRef("support", "bot-1", "BOTCTL_API_KEY")

# field (a nested leaf by its dotted path), a declared value, the snake_case key a live read
# may use, a different live value.
FIELDS: list[tuple[str, Any, str, Any]] = [
    ("name", "Support", "name", "Old"),
    ("instructions", "Be kind.", "instructions", "Be brief."),
    ("initialMessages", ["Hi"], "initial_messages", ["Hello"]),
    ("suggestedMessages", ["Pricing"], "suggested_messages", []),
    ("visibility", "public", "visibility", "private"),
    ("domains", ["example.com"], "domains", ["old.example"]),
    ("onlyAllowOnAddedDomains", False, "only_allow_on_added_domains", True),
    ("ipLimit", 20, "ip_limit", 5),
    ("ipLimitTimeframe", 3600, "ip_limit_timeframe", 60),
    ("ipLimitMessage", "Slow down", "ip_limit_message", "Wait"),
    ("model", "gpt-5-mini", "model", "auto"),
    ("temp", 0.2, "temp", 0.9),
    ("styles", {"theme": "dark"}, "styles", {"theme": "light"}),
    (
        "collectCustomerInformation",
        {"title": "Contact us"},
        "collect_customer_information",
        {"title": "Reach us"},
    ),
    ("styles.theme", "dark", "styles.theme", "light"),
    ("styles.buttonColor", "#0a84ff", "styles.button_color", "#fff"),
    ("styles.displayName", "Helper", "styles.display_name", "Bot"),
    ("styles.alignChatButton", "left", "styles.align_chat_button", "right"),
    ("styles.userMessageColor", "#ffffff80", "styles.user_message_color", "#000"),
    ("styles.autoOpenChatWindowAfter", 5, "styles.auto_open_chat_window_after", 0),
    (
        "collectCustomerInformation.title",
        "Contact us",
        "collect_customer_information.title",
        "Reach us",
    ),
    (
        "collectCustomerInformation.name.active",
        True,
        "collect_customer_information.name.active",
        False,
    ),
    (
        "collectCustomerInformation.name.label",
        "Name",
        "collect_customer_information.name.label",
        "Your name",
    ),
    (
        "collectCustomerInformation.email.active",
        True,
        "collect_customer_information.email.active",
        False,
    ),
    (
        "collectCustomerInformation.email.label",
        "Email",
        "collect_customer_information.email.label",
        "E-mail",
    ),
    (
        "collectCustomerInformation.phone.active",
        False,
        "collect_customer_information.phone.active",
        True,
    ),
    (
        "collectCustomerInformation.phone.label",
        "Phone",
        "collect_customer_information.phone.label",
        "Tel",
    ),
]
IDS = [row[0] for row in FIELDS]


def nest(path: str, value: Any) -> dict[str, Any]:
    """``{"a": {"b": value}}`` for ``a.b``; ``{field: value}`` for a top-level field."""
    top, _, rest = path.partition(".")
    return {top: nest(rest, value) if rest else value}


def at(values: Any, path: str) -> Any:
    """The value at a dotted path of nested mappings."""
    for part in path.split("."):
        values = values[part]
    return values


def test_the_table_covers_every_writable_field() -> None:
    assert sorted(i for i in IDS if "." not in i) == sorted(ChatbotSettings.model_fields)


def test_the_table_covers_every_nested_leaf() -> None:
    leaves = {leaf for field in ChatbotSettings.model_fields for leaf in model_leaves(field)}
    assert sorted(i for i in IDS if "." in i) == sorted(leaf for leaf in leaves if "." in leaf)


def observed(record: dict[str, Any]) -> ChatbotSettings:
    return read_live(record)[0]


def declared(field: str, value: Any) -> ChatbotSettings:
    return ChatbotSettings.model_validate(nest(field, value), strict=False)


def plan(
    field: str,
    value: Any,
    observed: ChatbotSettings | None,
    recorded: ChatbotSettings | None = None,
) -> BotPlan:
    out = BotPlan()
    plan_settings(REF, declared(field, value), observed, recorded, frozenset(), out)
    return out


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_live_parsing_reads_both_spellings(field: str, value: Any, snake: str, other: Any) -> None:
    assert observed(nest(snake, other)).json_fields == nest(field, other)
    assert observed(nest(field, other)).json_fields == nest(field, other)


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_a_differing_live_value_is_one_request_with_the_whole_field(
    field: str, value: Any, snake: str, other: Any
) -> None:
    out = plan(field, value, observed(nest(snake, other)))
    (op,) = out.operations
    assert op.kind == "update_settings"
    assert op.body == nest(field, value)
    assert {c.confidence for c in op.changes} == {"verified"}
    assert [c.path.split(".")[0] for c in op.changes] == [field.split(".")[0]]
    if "." in field:
        assert [c.path for c in op.changes] == [field]


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_the_same_live_value_is_no_change(field: str, value: Any, snake: str, other: Any) -> None:
    out = plan(field, value, observed(nest(snake, value)))
    assert out.operations == []
    assert out.unverified == 0


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_unreadable_falls_back_to_state_then_unknown(
    field: str, value: Any, snake: str, other: Any
) -> None:
    assert plan(field, value, None, declared(field, value)).operations == []
    (op,) = plan(field, value, None, declared(field, other)).operations
    assert {c.confidence for c in op.changes} == {"assumed"}
    (op,) = plan(field, value, None, None).operations
    assert {c.confidence for c in op.changes} == {"unknown"}


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_a_success_folds_into_the_record(field: str, value: Any, snake: str, other: Any) -> None:
    (op,) = plan(field, value, None, None).operations
    recorded = fold(declared("name", "Kept") if field != "name" else ChatbotSettings(), op)
    assert at(recorded.json_fields, field) == value
    assert plan(field, value, None, recorded).operations == []


@pytest.mark.parametrize(("field", "value", "snake", "other"), FIELDS, ids=IDS)
def test_the_json_schema_describes_the_field(
    field: str, value: Any, snake: str, other: Any
) -> None:
    schema = json_schema()
    properties = schema["$defs"]["ChatbotSettings"]["properties"]
    *parents, leaf = field.split(".")
    for parent in parents:
        (ref,) = [b["$ref"] for b in properties[parent]["anyOf"] if "$ref" in b]
        properties = schema["$defs"][ref.rsplit("/", 1)[1]]["properties"]
    assert leaf in properties


@pytest.mark.parametrize(
    ("record", "kept"),
    [
        ({"temp": "0.2", "name": "N"}, {"name": "N"}),  # a string temperature: not observable
        ({"styles": {"theme": "blue", "buttonColor": "#fff"}}, {"styles": {"buttonColor": "#fff"}}),
        ({"styles": {"theme": "blue"}}, {}),  # a nested object left empty is not observed
        ({"domains": ["a", 3]}, {}),  # one wrong item: the list is not observable
        ({"styles": "dark", "ipLimit": True}, {}),  # wrong shapes, a boolean for an integer
    ],
)
def test_values_outside_the_contract_are_not_observable(
    record: dict[str, Any], kept: dict[str, Any]
) -> None:
    assert observed(record).json_fields == kept


def test_nested_objects_are_sent_whole_and_replace_the_record() -> None:
    out = BotPlan()
    want = ChatbotSettings.model_validate({"styles": {"theme": "dark", "buttonColor": "#fff"}})
    seen = observed({"styles": {"theme": "dark", "button_color": "#000"}})
    plan_settings(REF, want, seen, None, frozenset(), out)
    (op,) = out.operations
    assert [c.path for c in op.changes] == ["styles.buttonColor"]
    assert op.body == {"styles": {"theme": "dark", "buttonColor": "#fff"}}
    recorded = fold(ChatbotSettings.model_validate({"styles": {"displayName": "X"}}), op)
    assert recorded.json_fields == {"styles": {"theme": "dark", "buttonColor": "#fff"}}


@pytest.mark.parametrize(
    ("values", "path", "flagged"),
    [
        ({"visibility": "private"}, "visibility", True),
        ({"visibility": "public"}, "visibility", False),
        ({"onlyAllowOnAddedDomains": True}, "onlyAllowOnAddedDomains", True),
        ({"domains": ["a"], "onlyAllowOnAddedDomains": True}, "domains", True),
        ({"domains": ["a"], "onlyAllowOnAddedDomains": False}, "domains", False),
    ],
)
def test_changes_that_cut_users_off_are_flagged(
    values: dict[str, Any], path: str, flagged: bool
) -> None:
    out = BotPlan()
    plan_settings(
        REF, ChatbotSettings.model_validate(values, strict=False), None, None, frozenset(), out
    )
    (op,) = out.operations
    change = next(c for c in op.changes if c.path == path)
    assert (FLAG_CUTS_OFF_USERS in change.flags) is flagged
