"""AttributeSets and Defaults resolved into BotSpecs (botctl.config.resolve): tables for
merging, precedence, selectors and conflicts; problems located in the document the value came
from, each once; and where each resolved value came from."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from botctl.config.loader import load_fleet
from botctl.config.resolve import Fleet
from botctl.errors import ConfigError, Problem
from botctl.models import BotSpec
from botctl.resources.attribute_model import CustomAttribute


def chatbot(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if labels:
        metadata["labels"] = labels
    return {
        "apiVersion": "botctl/v1",
        "kind": "Chatbot",
        "metadata": metadata,
        "spec": {"chatbotId": f"id-{name}", **spec},
    }


def defaults(name: str, selector: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "botctl/v1",
        "kind": "Defaults",
        "metadata": {"name": name},
        "spec": {"selector": selector or {}, **spec},
    }


def attribute_set(name: str, *attributes: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "botctl/v1",
        "kind": "AttributeSet",
        "metadata": {"name": name},
        "spec": {"customAttributes": list(attributes), **spec},
    }


def attr(name: str, type_: str = "text", **fields: Any) -> dict[str, Any]:
    return {"name": name, "type": type_, **fields}


def write_docs(directory: Path, *docs: dict[str, Any], name: str = "fleet.yaml") -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return path


def fleet(tmp_path: Path, *docs: dict[str, Any], **options: Any) -> Fleet:
    path = write_docs(tmp_path, *docs)
    return load_fleet([path], environ=options.pop("environ", {}), **options)


def bot(tmp_path: Path, *docs: dict[str, Any], name: str = "a") -> BotSpec:
    return next(b.spec for b in fleet(tmp_path, *docs).bots if b.spec.name == name)


def problems_of(tmp_path: Path, *docs: dict[str, Any], **options: Any) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        fleet(tmp_path, *docs, **options)
    return info.value.problems


def write_text(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# --- merging settings: field by field, the chatbot's own values win -----------------------

MERGES: list[tuple[str, list[dict[str, Any]], dict[str, Any] | None, dict[str, Any]]] = [
    # id, settings of each matching Defaults (in document order), the chatbot's own, result
    (
        "defaults only",
        [{"temp": 0.3, "model": "gpt-5-mini"}],
        None,
        {"temp": 0.3, "model": "gpt-5-mini"},
    ),
    ("own wins", [{"temp": 0.3}], {"temp": 0.7}, {"temp": 0.7}),
    ("later defaults win", [{"temp": 0.3}, {"temp": 0.5}], None, {"temp": 0.5}),
    ("own wins over all", [{"temp": 0.3}, {"temp": 0.5}], {"temp": 0.1}, {"temp": 0.1}),
    ("disjoint fields add up", [{"temp": 0.3}], {"name": "A"}, {"temp": 0.3, "name": "A"}),
    (
        "styles merge field by field",
        [{"styles": {"theme": "dark", "buttonColor": "#000"}}],
        {"styles": {"buttonColor": "#fff"}},
        {"styles": {"theme": "dark", "buttonColor": "#fff"}},
    ),
    (
        "styles from two defaults and the chatbot",
        [{"styles": {"theme": "dark"}}, {"styles": {"alignChatButton": "left"}}],
        {"styles": {"buttonColor": "#fff"}},
        {"styles": {"theme": "dark", "buttonColor": "#fff", "alignChatButton": "left"}},
    ),
    (
        "lead form merges two levels deep",
        [{"collectCustomerInformation": {"title": "T", "email": {"active": True, "label": "E"}}}],
        {"collectCustomerInformation": {"email": {"label": "Your e-mail"}}},
        {
            "collectCustomerInformation": {
                "title": "T",
                "email": {"active": True, "label": "Your e-mail"},
            }
        },
    ),
    (
        "lists replace whole",
        [{"domains": ["a.example", "b.example"]}],
        {"domains": ["c.example"]},
        {"domains": ["c.example"]},
    ),
    (
        "null: not managed, despite defaults",
        [{"temp": 0.3, "name": "D"}],
        {"temp": None},
        {"name": "D"},
    ),
    ("null replaces a whole object", [{"styles": {"theme": "dark"}}], {"styles": None}, {}),
    ("a later defaults' null unsets an earlier one", [{"temp": 0.3}, {"temp": None}], None, {}),
]


@pytest.mark.parametrize(
    ("layers", "own", "expected"), [m[1:] for m in MERGES], ids=[m[0] for m in MERGES]
)
def test_settings_merge(
    tmp_path: Path,
    layers: list[dict[str, Any]],
    own: dict[str, Any] | None,
    expected: dict[str, Any],
) -> None:
    docs = [defaults(f"d{i}", settings=s) for i, s in enumerate(layers)]
    spec = {"settings": own} if own is not None else {}
    resolved = bot(tmp_path, *docs, chatbot("a", **spec))
    assert resolved.settings.json_fields == expected


PRECEDENCE: list[tuple[str, list[dict[str, Any]], dict[str, Any], tuple[bool, float | None]]] = [
    # id, Defaults specs (besides the selector), the chatbot's own spec, (prune, cap)
    ("botctl's defaults", [], {}, (False, None)),
    ("from defaults", [{"prune": True, "safety": {"maxArchivePercent": 50}}], {}, (True, 50)),
    ("own false wins over defaults' true", [{"prune": True}], {"prune": False}, (False, None)),
    ("later defaults win", [{"prune": True}, {"prune": False}], {}, (False, None)),
    (
        "own safety wins",
        [{"safety": {"maxArchivePercent": 50}}],
        {"safety": {"maxArchivePercent": 10}},
        (False, 10),
    ),
    ("a defaults' ~ gives nothing", [{"prune": True}, {"prune": None}], {}, (True, None)),
]


@pytest.mark.parametrize(
    ("layers", "own", "expected"), [p[1:] for p in PRECEDENCE], ids=[p[0] for p in PRECEDENCE]
)
def test_prune_and_safety_precedence(
    tmp_path: Path,
    layers: list[dict[str, Any]],
    own: dict[str, Any],
    expected: tuple[bool, float | None],
) -> None:
    docs = [defaults(f"d{i}", **spec) for i, spec in enumerate(layers)]
    resolved = bot(tmp_path, *docs, chatbot("a", **own))
    assert (resolved.prune, resolved.max_archive_percent) == expected


@pytest.mark.parametrize(
    ("layers", "own", "expected"),
    [
        ([["crm_*"]], None, ("crm_*",)),
        ([["crm_*"]], ["legacy"], ("crm_*", "legacy")),
        (
            [["crm_*"], ["hubspot_*", "crm_*"]],
            ["legacy", "hubspot_*"],
            ("crm_*", "hubspot_*", "legacy"),
        ),
        ([], ["legacy"], ("legacy",)),
    ],
)
def test_ignore_attributes_accumulate_each_once(
    tmp_path: Path, layers: list[list[str]], own: list[str] | None, expected: tuple[str, ...]
) -> None:
    docs = [defaults(f"d{i}", ignoreAttributes=patterns) for i, patterns in enumerate(layers)]
    spec: dict[str, Any] = {"ignoreAttributes": own} if own is not None else {}
    [resolved] = fleet(tmp_path, *docs, chatbot("a", **spec)).bots
    assert resolved.spec.ignore_attributes == expected
    # Each pattern is said to come from the first document that gives it.
    origins = [resolved.origin(("spec", "ignoreAttributes", i)) for i in range(len(expected))]
    first = [origin[0].name for origin in origins if origin is not None]
    givers = [f"d{i}" for i, patterns in enumerate(layers) for _ in patterns] + ["a"] * len(
        own or []
    )
    given = [p for patterns in layers for p in patterns] + list(own or [])
    assert first == [givers[given.index(p)] for p in expected]


# --- which chatbots a Defaults document applies to -------------------------------------------

SELECTORS: list[tuple[dict[str, Any], dict[str, str], bool]] = [
    ({}, {}, True),  # an empty selector matches every chatbot
    ({"matchLabels": {"team": "support"}}, {"team": "support"}, True),
    ({"matchLabels": {"team": "support"}}, {"team": "sales"}, False),
    ({"matchLabels": {"team": "support"}}, {}, False),
    ({"matchLabels": {"team": "support", "tier": "paid"}}, {"team": "support"}, False),
    (
        {"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod", "staging"]}]},
        {"env": "staging"},
        True,
    ),
    ({"matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}]}, {}, False),
    (
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
        {"env": "prod"},
        True,
    ),
    ({"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}, {}, True),
    (
        {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]},
        {"env": "dev"},
        False,
    ),
    ({"matchExpressions": [{"key": "beta", "operator": "Exists"}]}, {"beta": ""}, True),
    ({"matchExpressions": [{"key": "beta", "operator": "Exists"}]}, {}, False),
    ({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}, {}, True),
    ({"matchExpressions": [{"key": "legacy", "operator": "DoesNotExist"}]}, {"legacy": "y"}, False),
    (
        {
            "matchLabels": {"team": "support"},
            "matchExpressions": [{"key": "env", "operator": "In", "values": ["prod"]}],
        },
        {"team": "support", "env": "dev"},
        False,
    ),
]


@pytest.mark.parametrize(("selector", "labels", "applies"), SELECTORS)
def test_defaults_selector(
    tmp_path: Path, selector: dict[str, Any], labels: dict[str, str], applies: bool
) -> None:
    resolved = fleet(
        tmp_path, defaults("d", selector, settings={"temp": 0.3}), chatbot("a", labels)
    )
    [a] = resolved.bots
    assert (a.spec.settings.temp == 0.3) is applies
    assert a.defaults == (("d",) if applies else ())
    assert any("[BC203]" in w for w in resolved.warnings) is not applies


# --- attribute sets ----------------------------------------------------------------------------

CRM = attribute_set(
    "crm", attr("plan_tier", label="Plan tier"), attr("seats", "number", label="Seats")
)
BILLING = attribute_set("billing", attr("invoice_due", "date", label="Invoice due"))


def names(spec: BotSpec) -> list[str]:
    return [a.name for a in spec.attributes]


def test_sets_come_first_in_inclusion_order_then_own(tmp_path: Path) -> None:
    resolved = bot(
        tmp_path,
        CRM,
        BILLING,
        chatbot("a", attributeSets=["billing", "crm"], customAttributes=[attr("own_one")]),
    )
    assert names(resolved) == ["invoice_due", "plan_tier", "seats", "own_one"]
    assert resolved.attributes[2] == CustomAttribute(name="seats", type="number", label="Seats")


def test_sets_of_defaults_and_own_accumulate_each_once(tmp_path: Path) -> None:
    resolved = fleet(
        tmp_path,
        CRM,
        BILLING,
        defaults("d", attributeSets=["crm"]),
        chatbot("a", attributeSets=["billing", "crm"]),
    )
    [a] = resolved.bots
    assert a.sets == ("crm", "billing")
    assert names(a.spec) == ["plan_tier", "seats", "invoice_due"]


def test_own_declaration_replaces_the_sets_and_says_so_once_per_chatbot(tmp_path: Path) -> None:
    own = attr("plan_tier", label="Plan (support's own)")
    resolved = fleet(
        tmp_path,
        CRM,
        chatbot("a", attributeSets=["crm"], customAttributes=[own]),
        chatbot("b", attributeSets=["crm"], customAttributes=[own]),
    )
    a = resolved.bots[0].spec
    assert names(a) == ["seats", "plan_tier"]
    assert a.attributes[-1].label == "Plan (support's own)"
    overrides = [w for w in resolved.warnings if "[BC201]" in w]
    assert len(overrides) == 2  # one per chatbot, each at its own declaration
    assert all(
        "plan_tier: declared by chatbot, overrides set crm (" in w and "fleet.yaml:7)" in w
        for w in overrides
    )


def test_identical_declarations_in_two_sets_are_one_attribute(tmp_path: Path) -> None:
    twin = attribute_set("twin", attr("plan_tier", label="Plan tier"))
    resolved = bot(tmp_path, CRM, twin, chatbot("a", attributeSets=["crm", "twin"]))
    assert names(resolved) == ["plan_tier", "seats"]


def test_conflicting_sets_are_one_error_naming_both_places_and_the_chatbots(
    tmp_path: Path,
) -> None:
    other = attribute_set("other", attr("plan_tier", "number", label="Plan tier"))
    bots = [chatbot(f"bot{i}", {"team": "x"}) for i in range(5)]
    found = problems_of(
        tmp_path,
        CRM,
        other,
        defaults("d", {"matchLabels": {"team": "x"}}, attributeSets=["crm", "other"]),
        *bots,
    )
    [problem] = found
    assert (problem.line, problem.col) == (20, 11)  # the second declaration's name
    assert problem.message == (
        "attribute 'plan_tier' is declared differently here and in set crm "
        f'({tmp_path / "fleet.yaml"}:7): type "text" vs "number"; both sets are included by '
        "chatbot bot0, bot1, bot2 and 2 more (declare it in the chatbot to choose, or make the "
        "sets agree)"
    )


def test_a_chatbots_own_declaration_settles_a_conflict(tmp_path: Path) -> None:
    other = attribute_set("other", attr("plan_tier", "number", label="Plan tier"))
    own = attr("plan_tier", label="Chosen")
    resolved = fleet(
        tmp_path, CRM, other, chatbot("a", attributeSets=["crm", "other"], customAttributes=[own])
    )
    assert resolved.bots[0].spec.attributes[-1].label == "Chosen"
    assert "overrides set crm (" in resolved.warnings[0]
    assert "set other (" in resolved.warnings[0]


# --- problems, located where the value is written, each once ------------------------------


def test_an_invalid_value_in_defaults_is_reported_once_in_the_defaults(tmp_path: Path) -> None:
    path = write_text(
        tmp_path,
        "defaults.yaml",
        "apiVersion: botctl/v1\nkind: Defaults\nmetadata: {name: d}\nspec:\n"
        "  selector: {}\n  settings:\n    temp: 3\n    styles: {theme: blue}\n",
    )
    write_docs(tmp_path, chatbot("a"), chatbot("b"), chatbot("c"), name="bots.yaml")
    with pytest.raises(ConfigError) as info:
        load_fleet([tmp_path], environ={})
    assert [str(p) for p in info.value.problems] == [
        f"{path}:7:11: temp: must be at most 1, got 3",
        f"{path}:8:21: theme: must be one of 'light' or 'dark', got \"blue\"",
    ]


def test_a_chatbots_own_invalid_value_is_located_in_the_chatbot(tmp_path: Path) -> None:
    write_docs(tmp_path, defaults("d", settings={"styles": {"theme": "dark"}}), name="d.yaml")
    path = write_text(
        tmp_path,
        "bot.yaml",
        "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: a}\nspec:\n  chatbotId: x\n"
        "  settings:\n    styles: {buttonColor: red}\n    tmep: 1\n",
    )
    with pytest.raises(ConfigError) as info:
        load_fleet([tmp_path], environ={})
    assert [str(p) for p in info.value.problems] == [
        f'{path}:7:27: buttonColor: must be a hex colour such as #0a84ff or #fff, got "red"',
        f"{path}:8:5: unknown key 'tmep' (did you mean 'temp'?)",
    ]


def test_a_warning_from_a_shared_set_is_reported_once(tmp_path: Path) -> None:
    shared = attribute_set("crm", attr("renewal-date", "date", label="Renewal"))
    bots = [chatbot(f"b{i}", attributeSets=["crm"]) for i in range(11)]
    resolved = fleet(tmp_path, shared, *bots)
    assert len(resolved.warnings) == 1
    assert "[BC101]: attribute name 'renewal-date'" in resolved.warnings[0]


def test_a_warning_from_defaults_is_reported_once(tmp_path: Path) -> None:
    resolved = fleet(
        tmp_path,
        defaults("d", settings={"model": "gpt-9"}),
        *[chatbot(f"b{i}") for i in range(5)],
        allow_unknown_models=True,
    )
    [warning] = resolved.warnings
    assert warning.split(": ", 1)[1].startswith("warning[BC102]: model: 'gpt-9' is not a known")


BOT_A = "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: a}\nspec:\n  chatbotId: x\n"
SET_CRM = (
    "apiVersion: botctl/v1\nkind: AttributeSet\nmetadata: {name: crm}\nspec:\n"
    "  customAttributes: [{name: plan_tier, type: text}]\n"
)
DEFAULTS_HEAD = "apiVersion: botctl/v1\nkind: Defaults\nmetadata: {name: d}\nspec:\n"

LOCATED = [
    # id, the documents (of one file), line, col, message fragment
    (
        "unknown set, in a chatbot",
        BOT_A + "  attributeSets: [crn]\n---\n" + SET_CRM,
        6,
        19,
        "attributeSets: no AttributeSet named 'crn' (did you mean 'crm'?)",
    ),
    (
        "unknown set, in defaults",
        DEFAULTS_HEAD + "  selector: {}\n  attributeSets: [billing]\n---\n" + BOT_A,
        6,
        19,
        "attributeSets: no AttributeSet named 'billing'",
    ),
    (
        "In without values",
        DEFAULTS_HEAD + "  selector:\n    matchExpressions:\n    - {key: env, operator: In}\n"
        "---\n" + BOT_A,
        7,
        7,
        "operator In needs a non-empty list of values",
    ),
    (
        "Exists with values",
        DEFAULTS_HEAD
        + "  selector:\n    matchExpressions:\n    - {key: k, operator: Exists, values: [x]}\n"
        "---\n" + BOT_A,
        7,
        42,
        "operator Exists takes no values",
    ),
    (
        "unknown operator",
        DEFAULTS_HEAD + "  selector:\n    matchExpressions:\n    - {key: k, operator: Has}\n"
        "---\n" + BOT_A,
        7,
        26,
        "operator: must be one of 'In', 'NotIn', 'Exists' or 'DoesNotExist', got \"Has\"",
    ),
    (
        "Defaults cannot set what is the chatbot's own",
        DEFAULTS_HEAD + "  selector: {}\n  chatbotId: y\n---\n" + BOT_A,
        6,
        3,
        "unknown key 'chatbotId'",
    ),
    (
        "a set without attributes",
        "apiVersion: botctl/v1\nkind: AttributeSet\nmetadata: {name: s}\nspec: {}\n---\n" + BOT_A,
        4,
        7,
        "missing required key 'customAttributes'",
    ),
    (
        "a name twice in a set",
        "apiVersion: botctl/v1\nkind: AttributeSet\nmetadata: {name: s}\nspec:\n"
        "  customAttributes: [{name: x, type: text}, {name: x, type: date}]\n---\n"
        + BOT_A
        + "  attributeSets: [s]\n",
        5,
        52,
        "duplicate attribute name 'x' (also item 1 of customAttributes)",
    ),
    (
        "two sets of one name",
        SET_CRM + "---\n" + SET_CRM + "---\n" + BOT_A + "  attributeSets: [crm]\n",
        9,
        18,
        "duplicate attribute set 'crm' (also in ",
    ),
    (
        "a kind that does not exist",
        BOT_A.replace("kind: Chatbot", "kind: Default"),
        2,
        7,
        "kind: must be one of 'Chatbot', 'AttributeSet', 'Defaults' or 'ConversationTest', "
        'got "Default" '
        "(did you mean 'Defaults'?)",
    ),
    (
        "an unknown warning code",
        BOT_A + "  lint: {disable: [BC101, BC999]}\n",
        6,
        27,
        "'BC999' is not a warning code; known: BC101 attribute-name-style, ",
    ),
    (
        "a set's name is a handle",
        BOT_A + "  attributeSets: [Crm]\n",
        6,
        19,
        "attributeSets: must be lowercase letters, digits, '.', '_' or '-'",
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "col", "message"), [x[1:] for x in LOCATED], ids=[x[0] for x in LOCATED]
)
def test_fleet_errors_are_located(
    tmp_path: Path, text: str, line: int, col: int, message: str
) -> None:
    write_text(tmp_path, "fleet.yaml", text)
    with pytest.raises(ConfigError) as info:
        load_fleet([tmp_path], environ={})
    [problem] = [p for p in info.value.problems if p.severity == "error"]
    assert (problem.line, problem.col) == (line, col), str(problem)
    assert message in problem.message


def test_the_same_set_name_in_a_chatbot_and_as_unused_warns(tmp_path: Path) -> None:
    resolved = fleet(
        tmp_path, CRM, defaults("d", {"matchLabels": {"team": "nobody"}}), chatbot("a")
    )
    assert [w.split(": ", 1)[1] for w in resolved.warnings] == [
        "warning[BC202]: attribute set 'crm' is included by no chatbot",
        "warning[BC203]: defaults 'd' match no chatbot (selector: team=nobody)",
    ]


# --- warning codes: silenced per document, per project / run, or made errors -----------------

NAMED = attribute_set("crm", attr("Plan-Tier", label="Plan"))


@pytest.mark.parametrize(
    ("docs", "options", "expected"),
    [
        ([NAMED, chatbot("a", attributeSets=["crm"])], {}, ["BC101"]),
        (
            [
                {**NAMED, "spec": {**NAMED["spec"], "lint": {"disable": ["BC101"]}}},
                chatbot("a", attributeSets=["crm"]),
            ],
            {},
            [],
        ),
        (
            [
                {**NAMED, "spec": {**NAMED["spec"], "lint": {"disable": ["attribute-name-style"]}}},
                chatbot("a", attributeSets=["crm"]),
            ],
            {},
            [],
        ),
        # The chatbot's lint does not silence what is written, and reported, in the set.
        ([NAMED, chatbot("a", attributeSets=["crm"], lint={"disable": ["BC101"]})], {}, ["BC101"]),
        (
            [NAMED, chatbot("a", attributeSets=["crm"])],
            {"disabled_warnings": frozenset({"BC101"})},
            [],
        ),
        (
            [NAMED, chatbot("a", attributeSets=["crm"])],
            {"disabled_warnings": frozenset({"BC102"})},
            ["BC101"],
        ),
        ([NAMED], {}, ["BC202", "BC101"]),  # sorted by place: the set's name comes first
        ([chatbot("a", customAttributes=[attr("Tier")], lint={"disable": ["BC101"]})], {}, []),
    ],
)
def test_warning_codes_and_silencing(
    tmp_path: Path, docs: list[dict[str, Any]], options: dict[str, Any], expected: list[str]
) -> None:
    if not any(d["kind"] == "Chatbot" for d in docs):
        docs = [*docs, chatbot("z")]
    resolved = fleet(tmp_path, *docs, **options)
    assert [w.split("[", 1)[1][:5] for w in resolved.warnings] == expected


def test_strict_makes_warnings_errors_but_not_silenced_ones(tmp_path: Path) -> None:
    docs = [NAMED, chatbot("a", attributeSets=["crm"]), defaults("d", {"matchLabels": {"x": "y"}})]
    found = problems_of(tmp_path, *docs, strict=True, disabled_warnings=frozenset({"BC203"}))
    assert [(p.severity, p.code) for p in found] == [("error", "BC101")]
    assert str(found[0]).split(": ", 1)[1].startswith("error[BC101]: attribute name 'Plan-Tier'")


# --- where each value came from --------------------------------------------------------------


def test_origins_name_the_document_and_line(tmp_path: Path) -> None:
    d_path = write_text(
        tmp_path,
        "defaults.yaml",
        "apiVersion: botctl/v1\nkind: Defaults\nmetadata: {name: d}\nspec:\n  selector: {}\n"
        "  settings:\n    styles:\n      theme: dark\n      buttonColor: '#000'\n  prune: true\n",
    )
    b_path = write_text(
        tmp_path,
        "bot.yaml",
        "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: a}\nspec:\n  chatbotId: x\n"
        "  settings:\n    styles: {buttonColor: '#fff'}\n",
    )
    [a] = load_fleet([d_path, b_path], environ={}).bots

    def where(*path: str) -> tuple[str, int] | None:
        origin = a.origin(path)
        return (
            None if origin is None else (Path(origin[0].doc.file).name, origin[0].line(origin[1]))
        )

    assert where("spec", "settings", "styles", "theme") == ("defaults.yaml", 8)
    assert where("spec", "settings", "styles", "buttonColor") == ("bot.yaml", 7)
    assert where("spec", "prune") == ("defaults.yaml", 10)
    assert where("spec", "chatbotId") == ("bot.yaml", 5)
    assert where("spec", "apiKeyEnv") is None  # botctl's default
