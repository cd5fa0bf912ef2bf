"""Which chatbots a run covers (botctl.config.selection): kubectl's label selector syntax,
--target globs, --exclude, and the errors that name what was meant."""

from __future__ import annotations

import pytest

from botctl.config.selection import (
    Requirement,
    Selection,
    SelectorError,
    parse_selector,
    select_names,
)
from botctl.errors import BotctlError

PARSED = [
    ("team=support", [("team", "=", {"support"})]),
    ("team==support", [("team", "=", {"support"})]),
    ("tier!=free", [("tier", "!=", {"free"})]),
    ("team=support,tier!=free", [("team", "=", {"support"}), ("tier", "!=", {"free"})]),
    ("env in (prod,staging)", [("env", "in", {"prod", "staging"})]),
    ("env in ( prod , staging )", [("env", "in", {"prod", "staging"})]),
    ("env notin (dev)", [("env", "notin", {"dev"})]),
    ("beta", [("beta", "exists", set())]),
    ("!legacy", [("legacy", "!exists", set())]),
    ("  team = support , beta ", [("team", "=", {"support"}), ("beta", "exists", set())]),
    ("app.kubernetes.io/part-of=crm", [("app.kubernetes.io/part-of", "=", {"crm"})]),
    ("index=,x", [("index", "=", {""}), ("x", "exists", set())]),  # an empty value, as kubectl
    ("inside=yes", [("inside", "=", {"yes"})]),  # a key that starts with "in"
    ("env in (a),team notin (b,c)", [("env", "in", {"a"}), ("team", "notin", {"b", "c"})]),
]


@pytest.mark.parametrize(("text", "expected"), PARSED)
def test_selector_syntax(text: str, expected: list[tuple[str, str, set[str]]]) -> None:
    assert [(r.key, r.operator, set(r.values)) for r in parse_selector(text)] == expected


BAD = [
    ("", "an empty selector"),
    ("team=support,", "expected a label key at column 14, got the end"),
    ("env in prod", "expected '(' after 'in' at column 8, got 'prod'"),
    ("env in (prod", "expected ',' or ')' at column 13, got the end"),
    ("team support", "expected '=', '==', '!=', 'in', 'notin', ',' or the end at column 6"),
    ("=x", "expected a label key at column 1"),
    ("team=sup port", "expected ',' or the end at column 10, got 'port'"),
    ("team=a b,c", "expected ',' or the end"),
    ("!", "expected a label key at column 2, got the end"),
    ("env in (a,,b)", "expected a label value at column 11, got ',b)'"),
]


@pytest.mark.parametrize(("text", "fragment"), BAD)
def test_selector_errors_say_where_and_what_was_expected(text: str, fragment: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_selector(text)
    assert fragment in str(info.value)


MATCHES = [
    # requirement, labels, matches (as in Kubernetes: != and notin match a missing label)
    ("team=support", {"team": "support"}, True),
    ("team=support", {"team": "sales"}, False),
    ("team=support", {}, False),
    ("team!=support", {"team": "sales"}, True),
    ("team!=support", {}, True),
    ("team!=support", {"team": "support"}, False),
    ("env in (prod,staging)", {"env": "staging"}, True),
    ("env in (prod,staging)", {"env": "dev"}, False),
    ("env in (prod,staging)", {}, False),
    ("env notin (dev)", {}, True),
    ("env notin (dev)", {"env": "dev"}, False),
    ("beta", {"beta": ""}, True),
    ("beta", {}, False),
    ("!legacy", {}, True),
    ("!legacy", {"legacy": "true"}, False),
]


@pytest.mark.parametrize(("text", "labels", "expected"), MATCHES)
def test_requirement_matching(text: str, labels: dict[str, str], expected: bool) -> None:
    [requirement] = parse_selector(text)
    assert requirement.matches(labels) is expected


def test_requirements_print_as_written() -> None:
    text = "team=support,tier!=free,env in (prod,staging),beta,!legacy,x notin (a)"
    assert ",".join(map(str, parse_selector(text))) == text


FLEET = [
    ("support-eu", {"team": "support", "region": "eu", "tier": "paid"}),
    ("support-us", {"team": "support", "region": "us", "tier": "free"}),
    ("sales-eu", {"team": "sales", "region": "eu"}),
    ("legacy", {"team": "support", "legacy": "true"}),
]


def sel(
    targets: tuple[str, ...] = (), selector: str = "", excludes: tuple[str, ...] = ()
) -> Selection:
    requirements = parse_selector(selector) if selector else ()
    return Selection(targets=targets, selector=requirements, excludes=excludes)


SELECTED = [
    (sel(), ["support-eu", "support-us", "sales-eu", "legacy"]),
    (sel(("sales-eu",)), ["sales-eu"]),
    (sel(("support-*",)), ["support-eu", "support-us"]),
    (sel(("*-eu", "legacy")), ["support-eu", "sales-eu", "legacy"]),
    (sel(("support-??",)), ["support-eu", "support-us"]),
    (sel(selector="team=support"), ["support-eu", "support-us", "legacy"]),
    (sel(selector="team=support,tier!=free"), ["support-eu", "legacy"]),
    (sel(selector="region in (eu,apac)"), ["support-eu", "sales-eu"]),
    (sel(selector="team=support,!legacy"), ["support-eu", "support-us"]),
    (sel(selector="team=support", excludes=("legacy",)), ["support-eu", "support-us"]),
    (sel(("support-*",), "tier=paid"), ["support-eu"]),
    (sel(excludes=("*-eu",)), ["support-us", "legacy"]),
]


@pytest.mark.parametrize(("selection", "expected"), SELECTED)
def test_selection(selection: Selection, expected: list[str]) -> None:
    assert select_names(FLEET, selection) == expected


UNMATCHED = [
    (sel(("suport-eu",)), "--target 'suport-eu' matches no chatbot (did you mean 'support-eu'"),
    (sel(("billing-*",)), "--target 'billing-*' matches no chatbot; chatbots: support-eu, "),
    (sel(excludes=("legcy",)), "--exclude 'legcy' matches no chatbot (did you mean 'legacy'?)"),
    (
        sel(selector="team=suport"),
        "the selection -l 'team=suport' matches no chatbot: no chatbot has team=suport (did "
        "you mean 'team=support'?); labels in use: legacy=true, region=eu, region=us, "
        "team=sales, team=support, tier=free, tier=paid",
    ),
    (
        sel(selector="teem=support"),
        "no chatbot has the label 'teem' (did you mean 'team'?)",
    ),
    (
        sel(("sales-eu",), "tier=paid"),
        "the selection --target 'sales-eu' -l 'tier=paid' matches no chatbot",
    ),
    (sel(("legacy",), excludes=("legacy",)), "matches no chatbot"),
]


@pytest.mark.parametrize(("selection", "fragment"), UNMATCHED)
def test_a_selection_that_matches_nothing_names_close_ones(
    selection: Selection, fragment: str
) -> None:
    with pytest.raises(BotctlError) as info:
        select_names(FLEET, selection)
    assert fragment in str(info.value)


def test_requirement_is_comparable() -> None:
    assert parse_selector("a=b") == (Requirement("a", "=", frozenset({"b"})),)
