"""The configuration loader (botctl.config): one fixture per error, located as file:line:col;
all problems at once; files, directories and documents; ${VAR} interpolation; the produced
BotSpec; the checked-in examples and JSON Schema."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from botctl import contract
from botctl.config.document import json_schema
from botctl.config.interpolate import InterpolationError, Interpolator
from botctl.config.loader import load_desired, load_fleet
from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.errors import ConfigError, Problem
from botctl.models import BotSpec, Desired
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import (
    ChatbotSettings,
    CollectCustomerInformation,
    LeadField,
    Styles,
)
from botctl.sealing import Secret

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "config"
EXAMPLES = ROOT / "examples"
SCHEMA = ROOT / "schemas" / "botctl.schema.json"

HEADER = """\
apiVersion: botctl/v1
kind: Chatbot
metadata:
  name: {name}
spec:
  chatbotId: {chatbot_id}
"""


def bot_yaml(name: str = "support", chatbot_id: str = "ckl123abc456", spec: str = "") -> str:
    """A valid document; ``spec`` holds extra lines of spec (indented by two spaces)."""
    return HEADER.format(name=name, chatbot_id=chatbot_id) + spec


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def load(*paths: Path, environ: Mapping[str, str] | None = None, **options: Any) -> Desired:
    return load_desired(list(paths), environ=environ or {}, **options)


def problems(
    *paths: Path, environ: Mapping[str, str] | None = None, **options: Any
) -> list[Problem]:
    with pytest.raises(ConfigError) as info:
        load(*paths, environ=environ, **options)
    return info.value.problems


def one_bot(path: Path, environ: Mapping[str, str] | None = None, **options: Any) -> BotSpec:
    desired = load(path, environ=environ, **options)
    assert len(desired.bots) == 1
    return desired.bots[0]


def located(problem: Problem) -> str:
    return f"{Path(problem.file).name}:{problem.line}:{problem.col}"


# --- one fixture per error -----------------------------------------------------------------

ERRORS = [
    # fixture, line, col (of the offending key or value), message fragment
    ("unknown_key", 7, 3, "unknown key 'setings' (did you mean 'settings'?)"),
    ("unknown_key_nested", 10, 7, "unknown key 'buttonColour' (did you mean 'buttonColor'?)"),
    ("wrong_api_version", 1, 13, "apiVersion: must be one of 'botctl/v1', got \"botctl/v2\""),
    (
        "wrong_kind",
        2,
        7,
        "kind: must be one of 'Chatbot', 'AttributeSet', 'Defaults' or 'ConversationTest', "
        'got "ChatBot" '
        "(did you mean 'Chatbot'?)",
    ),
    ("missing_spec", 1, 1, "missing required key 'spec'"),
    ("missing_chatbot_id", 6, 3, "missing required key 'chatbotId'"),
    ("temp_too_high", 9, 11, "temp: must be at most 1"),
    ("temp_string", 8, 11, 'temp: must be a number, got string "0.2"'),
    ("int_is_bool", 8, 14, "ipLimit: must be an integer, got boolean true"),
    (
        "bad_hex_colour",
        8,
        40,
        'buttonColor: must be a hex colour such as #0a84ff or #fff, got "#0a84fg"',
    ),
    ("bad_enum", 8, 17, "visibility: must be one of 'public' or 'private', got \"internal\""),
    ("unknown_model", 8, 12, "'gpt-5-mni' is not a known model (did you mean 'gpt-5-mini'?)"),
    ("bad_attribute_name", 9, 14, "name: must start with a letter"),
    ("bad_attribute_type", 9, 13, "type: must be one of 'text', 'number', 'boolean' or 'date'"),
    ("duplicate_attribute", 10, 14, "duplicate attribute name 'plan_tier' (also item 1"),
    ("duplicate_yaml_key", 10, 5, "duplicate key 'temp' (first at line 8)"),
    ("yaml_syntax_error", 9, 4, "invalid YAML: while parsing a block mapping"),
    ("unset_variable", 8, 11, "environment variable BOT_DISPLAY_NAME is not set"),
    ("malformed_variable", 9, 21, "malformed reference '${LIMIT WINDOW}'"),
    ("not_a_mapping", 1, 1, "a document must be a mapping"),
    ("bad_metadata_name", 4, 9, "name: must be lowercase letters, digits"),
    ("bad_api_key_env", 7, 14, "apiKeyEnv: must be an environment variable name"),
    ("prune_not_bool", 7, 10, 'prune: must be true or false, got string "false"'),
    ("safety_out_of_range", 8, 24, "maxArchivePercent: must be at most 100"),
    ("recursive_alias", 8, 14, "invalid YAML: an alias refers to itself"),
    (
        "impossible_date",
        9,
        11,
        "invalid value '2024-02-30': day is out of range for month (quote it if it is meant",
    ),
    ("tagged_not_a_number", 9, 14, "invalid value 'abc': invalid literal for int()"),
    ("temp_not_finite", 9, 11, "temp: must be a finite number, got .nan"),
    (
        "control_character",
        4,
        12,
        "invalid YAML: character #x0007: control characters are not allowed",
    ),
    (
        "date_not_string",
        9,
        11,
        "name: must be a string, got date 2024-01-01 (quote it to make it a string)",
    ),
]


@pytest.mark.parametrize(("fixture", "line", "col", "fragment"), ERRORS, ids=[e[0] for e in ERRORS])
def test_each_error_is_located(fixture: str, line: int, col: int, fragment: str) -> None:
    path = FIXTURES / f"{fixture}.yaml"
    with pytest.raises(ConfigError) as info:
        load(path)
    found = info.value.problems
    assert len(found) == 1, "\n".join(map(str, found))
    problem = found[0]
    assert problem.severity == "error"
    assert str(problem).startswith(f"{path}:{line}:{col}: "), str(problem)
    assert fragment in problem.message
    assert str(problem) in str(info.value)
    assert str(info.value).endswith("1 error(s) in the configuration; nothing was sent.")


def test_every_error_fixture_is_tested() -> None:
    valid = {
        "full",
        "merge_keys",
        "multi",
        "strict_attribute_name",
        "valid_minimal",
        "warnings_only",
        "many_errors",
    }
    on_disk = {p.stem for p in FIXTURES.glob("*.yaml")}
    assert on_disk - valid == {fixture for fixture, *_ in ERRORS}


@pytest.mark.parametrize("fixture", ["full", "merge_keys", "multi", "valid_minimal"])
def test_the_valid_fixtures_load(fixture: str) -> None:
    desired = load(FIXTURES / f"{fixture}.yaml", environ={"COMPANY_NAME": "Acme"})
    assert desired.bots
    assert desired.warnings == ()


def test_not_utf8_is_located_at_the_first_bad_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(bot_yaml().encode() + "  settings:\n    name: Café Bot\n".encode("latin-1"))
    [problem] = problems(path)
    offset = len(bot_yaml().encode()) + len(b"  settings:\n    name: Caf")
    assert str(problem) == f"{path}:8:14: not UTF-8 text (byte {offset})"


def test_not_utf8_after_multibyte_characters_counts_characters(tmp_path: Path) -> None:
    path = tmp_path / "mixed.yaml"
    path.write_bytes("# café ☕ \xff".encode()[:-2] + b"\xff\n")
    [problem] = problems(path)
    assert (problem.line, problem.col) == (1, 10)


# --- all problems at once ------------------------------------------------------------------


def test_every_problem_of_a_file_is_reported_sorted_and_located() -> None:
    path = FIXTURES / "many_errors.yaml"
    found = problems(path)
    assert found == sorted(found)
    assert [(located(p), p.message.split(":")[0]) for p in found] == [
        ("many_errors.yaml:8:5", "unknown key 'modle' (did you mean 'model'?)"),
        ("many_errors.yaml:9:11", "temp"),
        ("many_errors.yaml:10:17", "visibility"),
        (
            "many_errors.yaml:11:21",
            "environment variable VISITOR_NAME is not set (set it, or give a default",
        ),
        ("many_errors.yaml:13:31", "type"),
    ]
    assert all(p.file == str(path) and p.severity == "error" for p in found)


def test_problems_of_several_files_are_all_reported(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", bot_yaml("alpha", "bot-a", "  settings: {temp: -1}\n"))
    b = write(tmp_path, "b.yaml", bot_yaml("beta", "bot-b", "  prune: yes please\n"))
    with pytest.raises(ConfigError) as info:
        load(b, a)
    assert [str(p) for p in info.value.problems] == [
        f"{a}:7:20: temp: must be at least 0, got -1",
        f'{b}:7:10: prune: must be true or false, got string "yes please"',
    ]
    assert "2 error(s)" in str(info.value)


def test_interpolation_errors_are_not_repeated_by_validation(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(spec='  settings:\n    model: ${MODEL}\n    styles: {buttonColor: "${BRAND}"}\n'),
    )
    assert [(p.line, p.col, p.message.split(" (")[0]) for p in problems(path)] == [
        (8, 12, "environment variable MODEL is not set"),
        (9, 27, "environment variable BRAND is not set"),
    ]


# --- files, documents, directories --------------------------------------------------------


def test_multi_document_file_skips_empty_documents() -> None:
    path = FIXTURES / "multi.yaml"
    desired = load(path)
    assert [(b.name, b.chatbot_id, b.source) for b in desired.bots] == [
        ("support", "bot-support", f"{path}:3"),
        ("sales", "bot-sales", f"{path}:11"),
    ]


def test_errors_in_a_later_document_carry_the_file_line(tmp_path: Path) -> None:
    text = bot_yaml("first", "bot-1") + "---\n" + bot_yaml("second", "bot-2", "  prune: 1\n")
    path = write(tmp_path, "bots.yaml", text)
    assert [str(p) for p in problems(path)] == [
        f"{path}:14:10: prune: must be true or false, got integer 1"
    ]


def test_directory_is_searched_recursively_for_yaml_and_yml(tmp_path: Path) -> None:
    write(tmp_path, "b.yaml", bot_yaml("b", "bot-b"))
    write(tmp_path, "a/nested/c.yml", bot_yaml("c", "bot-c"))
    write(tmp_path, "a/a.yaml", bot_yaml("a", "bot-a"))
    write(tmp_path, "README.md", "apiVersion: not a config\n")
    write(tmp_path, "notes.txt", ": : : not yaml")
    write(tmp_path, "bot.json", "{}")
    write(tmp_path, "a/backup.yaml.orig", "kind: broken")
    (tmp_path / "dir.yaml").mkdir()
    desired = load(tmp_path)
    assert [b.name for b in desired.bots] == ["a", "c", "b"]  # sorted by path
    assert [Path(b.source).relative_to(tmp_path) for b in desired.bots] == [
        Path("a/a.yaml:1"),
        Path("a/nested/c.yml:1"),
        Path("b.yaml:1"),
    ]


def test_a_file_named_twice_is_loaded_once(tmp_path: Path) -> None:
    path = write(tmp_path, "bot.yaml", bot_yaml())
    assert len(load(path, tmp_path, path).bots) == 1


def test_missing_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert [str(p) for p in problems(missing)] == [f"{missing}:1:1: no such file or directory"]


def test_empty_directory(tmp_path: Path) -> None:
    write(tmp_path, "notes.txt", "no bots here")
    assert [str(p) for p in problems(tmp_path)] == [
        f"{tmp_path}:1:1: no *.yaml or *.yml files in directory"
    ]


@pytest.mark.parametrize("text", ["", "# just a comment\n", "---\n---\n", "--- ~\n"])
def test_no_chatbot_documents_found(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, "empty.yaml", text)
    assert [str(p) for p in problems(path)] == [f"{path}:1:1: no chatbot documents found"]


# --- across documents ----------------------------------------------------------------------


def test_duplicate_metadata_name_across_files_reports_both(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", bot_yaml("support", "bot-a"))
    b = write(tmp_path, "b.yaml", "# the same handle\n" + bot_yaml("support", "bot-b"))
    assert [str(p) for p in problems(tmp_path)] == [
        f"{a}:4:9: duplicate metadata.name 'support' (also in {b}:5)",
        f"{b}:5:9: duplicate metadata.name 'support' (also in {a}:4)",
    ]


def test_duplicate_chatbot_id_across_files_reports_both(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", bot_yaml("support", "ckl123"))
    b = write(tmp_path, "sub/b.yml", bot_yaml("sales", "ckl123"))
    assert [str(p) for p in problems(tmp_path)] == [
        f"{a}:6:14: duplicate chatbotId 'ckl123' (also in {b}:6)",
        f"{b}:6:14: duplicate chatbotId 'ckl123' (also in {a}:6)",
    ]


def test_duplicates_within_one_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bots.yaml", bot_yaml("x", "id-1") + "---\n" + bot_yaml("x", "id-2"))
    assert [(p.line, p.col) for p in problems(path)] == [(4, 9), (11, 9)]


# --- interpolation -------------------------------------------------------------------------


INTERPOLATIONS = [
    # text, environment, result
    ("no variables", {}, "no variables"),
    ("costs $5 or $HOME", {}, "costs $5 or $HOME"),
    ("${VAR}", {"VAR": "value"}, "value"),
    ("a ${VAR} b ${VAR}", {"VAR": "x"}, "a x b x"),
    ("[${VAR}]", {"VAR": ""}, "[]"),  # set but empty
    ("${VAR:-fallback}", {}, "fallback"),  # unset
    ("${VAR:-fallback}", {"VAR": ""}, "fallback"),  # empty, as in a shell
    ("${VAR:-fallback}", {"VAR": "set"}, "set"),
    ("${VAR:-}", {}, ""),
    ("${URL:-https://example.com:8443/help}", {}, "https://example.com:8443/help"),
    ("${GREETING:-Hello there, friend}", {}, "Hello there, friend"),
    ("$${X}", {"X": "ignored"}, "${X}"),  # escape
    ("$${X} and ${X}", {"X": "x"}, "${X} and x"),
    ("$${", {}, "${"),
    ("line 1\nline ${N}\n", {"N": "2"}, "line 1\nline 2\n"),
    ("${secret:TOKEN}", {"TOKEN": "t0k"}, "t0k"),
    ("${secret:TOKEN:-dflt}", {}, "dflt"),
    ("${_under_score9}", {"_under_score9": "ok"}, "ok"),
]


@pytest.mark.parametrize(("text", "environ", "result"), INTERPOLATIONS)
def test_interpolator(text: str, environ: dict[str, str], result: str) -> None:
    assert Interpolator(environ)(text) == result


def test_interpolator_does_not_interpolate_twice() -> None:
    assert Interpolator({"A": "${B}", "B": "no"})("${A}") == "${B}"


@pytest.mark.parametrize(
    ("text", "secrets"),
    [
        ("${secret:TOKEN}", {Secret("t0k", "TOKEN")}),
        (
            "${secret:TOKEN:-dflt} ${secret:MISSING:-dflt2}",
            {Secret("t0k", "TOKEN"), Secret("dflt2", "MISSING", defaulted=True)},
        ),
        ("${secret:EMPTY:-dflt}", {Secret("dflt", "EMPTY", defaulted=True)}),
        ("${TOKEN}", set()),
        ("${secret:EMPTY}", set()),  # nothing to mask
    ],
)
def test_interpolator_collects_secrets_with_their_variables(
    text: str, secrets: set[Secret]
) -> None:
    # The operator exposes TOKEN as plain text too (the default keeps such names to secrets).
    interpolate = Interpolator({"TOKEN": "t0k", "EMPTY": "", "BOTCTL_ALLOW_ENV": "default,TOKEN"})
    interpolate(text)
    assert interpolate.secrets == secrets
    assert set(interpolate.last_secrets) == secrets


def test_a_secret_never_shows_in_a_repr() -> None:
    assert "t0k" not in repr(Secret("t0k", "TOKEN"))
    assert repr(Secret("t0k", "TOKEN")) == "Secret($TOKEN)"


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (bot_yaml(chatbot_id="${secret:ID}"), 6),
        (bot_yaml(name="${secret:ID}"), 4),
        (bot_yaml(spec="  customAttributes:\n    - {name: '${secret:ID}', type: text}\n"), 8),
        (bot_yaml(spec="  apiKeyEnv: ${secret:ID}\n"), 7),
    ],
)
def test_a_secret_is_refused_where_it_would_identify_something(
    tmp_path: Path, text: str, line: int
) -> None:
    """Names and ids are shown in every plan and kept in the state: a secret there could be
    neither masked nor fingerprinted."""
    path = write(tmp_path, "bot.yaml", text)
    found = [p for p in problems(path, environ={"ID": "x1"}) if "may only be used" in p.message]
    assert [p.line for p in found] == [line]
    assert "in spec.settings or in an attribute's label or description" in found[0].message


def test_a_secret_in_settings_and_attribute_labels_is_fine(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(
            spec="  settings: {styles: {displayName: '${secret:S}'}}\n"
            "  customAttributes:\n"
            "    - {name: tier, type: text, label: 'L ${secret:S}', description: '${secret:T}'}\n"
        ),
    )
    bot = one_bot(path, {"S": "s1", "T": "t1"})
    assert bot.secrets == (Secret("s1", "S"), Secret("t1", "T"))
    assert bot.secret_locations() == {
        "settings:styles.displayName",
        "attribute:tier:label",
        "attribute:tier:description",
    }


INTERPOLATION_ERRORS = [
    ("${MISSING}", "environment variable MISSING is not set"),
    ("hello ${secret:MISSING}", "environment variable MISSING is not set"),
    ("${", "unclosed '${'"),
    ("price: ${PRICE", "unclosed '${'"),
    ("${1X}", "malformed reference '${1X}'"),
    ("${A B}", "malformed reference '${A B}'"),
    ("${}", "malformed reference '${}'"),
    ("${A-default}", "malformed reference '${A-default}'"),
]


@pytest.mark.parametrize(("text", "fragment"), INTERPOLATION_ERRORS)
def test_interpolator_errors(text: str, fragment: str) -> None:
    with pytest.raises(InterpolationError) as info:
        Interpolator({"A": "a"})(text)
    assert fragment in str(info.value)


@pytest.mark.parametrize(("text", "fragment"), INTERPOLATION_ERRORS)
def test_interpolation_errors_through_the_loader(tmp_path: Path, text: str, fragment: str) -> None:
    value = json.dumps(text)  # a YAML double-quoted string
    path = write(tmp_path, "bot.yaml", bot_yaml(spec=f"  settings:\n    name: {value}\n"))
    [problem] = problems(path, environ={"A": "a"})
    assert (problem.line, problem.col) == (8, 11)
    assert fragment in problem.message


def test_interpolation_through_the_loader(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(
            spec="  settings:\n"
            "    name: ${BOT_NAME} Bot\n"
            "    instructions: |\n"
            "      You are the assistant of ${COMPANY}.\n"
            "      Escalate to ${TEAM:-the support team} via $${HANDOFF}.\n"
            "    initialMessages: ['Hi from ${COMPANY}!', '${GREETING:-Hello, friend: welcome}']\n"
            "    ipLimitMessage: ${secret:LIMIT_TEXT}\n"
            "    temp: 0.5\n"
            "    ipLimit: 40\n"
        ),
    )
    environ = {"BOT_NAME": "Acme", "COMPANY": "Acme Cloud", "TEAM": "", "LIMIT_TEXT": "s3cret"}
    bot = one_bot(path, environ)
    assert bot.settings.name == "Acme Bot"
    assert bot.settings.instructions == (
        "You are the assistant of Acme Cloud.\nEscalate to the support team via ${HANDOFF}.\n"
    )
    assert bot.settings.initialMessages == ("Hi from Acme Cloud!", "Hello, friend: welcome")
    assert bot.settings.ipLimitMessage == "s3cret"
    assert bot.secret_values == frozenset({"s3cret"})
    assert bot.settings.temp == 0.5
    assert isinstance(bot.settings.ipLimit, int)
    assert bot.settings.ipLimit == 40


def test_no_secret_values_without_secret_references(tmp_path: Path) -> None:
    path = write(tmp_path, "bot.yaml", bot_yaml(spec="  settings: {name: '${NAME}'}\n"))
    assert one_bot(path, {"NAME": "Bot"}).secret_values == frozenset()


def test_numbers_stay_numbers_and_strings_stay_strings(tmp_path: Path) -> None:
    """Interpolation works on strings only: a ${VAR} never becomes a number."""
    path = write(tmp_path, "bot.yaml", bot_yaml(spec="  settings: {temp: '${TEMP}'}\n"))
    [problem] = problems(path, environ={"TEMP": "0.7"})
    assert problem.message == 'temp: must be a number, got string "0.7"'


def test_unset_variable_in_a_block_string_is_located_at_the_string(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(spec="  settings:\n    instructions: |\n      Hello\n      from ${COMPANY}\n"),
    )
    assert [str(p) for p in problems(path)] == [
        f"{path}:8:19: environment variable COMPANY is not set "
        "(set it, or give a default: ${COMPANY:-...})"
    ]


# --- unknown models, strict attribute names, warnings --------------------------------------


def test_unknown_model_is_an_error_that_names_the_opt_out() -> None:
    [problem] = problems(FIXTURES / "unknown_model.yaml")
    assert problem.severity == "error"
    assert "(did you mean 'gpt-5-mini'?)" in problem.message
    assert "--allow-unknown-models" in problem.message


def test_unknown_model_opt_out_warns_and_loads() -> None:
    path = FIXTURES / "unknown_model.yaml"
    desired = load(path, allow_unknown_models=True)
    assert [b.settings.model for b in desired.bots] == ["gpt-5-mni"]
    assert desired.warnings == (
        f"{path}:8:12: warning[BC102]: model: 'gpt-5-mni' is not a known model "
        "(did you mean 'gpt-5-mini'?)",
    )


def test_known_models_pass(tmp_path: Path) -> None:
    for i, model in enumerate(contract.SETTINGS_MODELS):
        write(
            tmp_path,
            f"b{i:02}.yaml",
            bot_yaml(f"b{i}", f"id-{i}", f"  settings: {{model: {model}}}\n"),
        )
    desired = load(tmp_path)
    assert [b.settings.model for b in desired.bots] == list(contract.SETTINGS_MODELS)
    assert desired.warnings == ()


def test_attribute_name_valid_by_contract_but_not_the_strict_guide_warns() -> None:
    path = FIXTURES / "strict_attribute_name.yaml"
    desired = load(path)
    assert [a.name for a in desired.bots[0].attributes] == ["plan_tier", "Plan-Tier"]
    [warning] = desired.warnings
    assert warning.startswith(f"{path}:9:14: warning[BC101]: attribute name 'Plan-Tier': ")
    assert "lowercase" in warning


def test_warnings_do_not_block() -> None:
    path = FIXTURES / "warnings_only.yaml"
    desired = load(path, allow_unknown_models=True)
    assert [b.name for b in desired.bots] == ["support"]
    assert [w.split(": warning[")[0] for w in desired.warnings] == [
        f"{path}:8:12",
        f"{path}:10:14",
    ]


def test_warnings_are_shown_alongside_errors(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(spec="  customAttributes: [{name: Tier, type: text}]\n  prune: 0\n"),
    )
    found = problems(path)
    assert [(p.line, p.severity) for p in found] == [(7, "warning"), (8, "error")]
    assert str(found[0]) in str(ConfigError(found))


# --- YAML details --------------------------------------------------------------------------


def test_merge_keys_override_without_duplicate_errors() -> None:
    bot = one_bot(FIXTURES / "merge_keys.yaml")
    assert bot.settings.styles == Styles(theme="light", buttonColor="#0a84ff")
    assert bot.attributes == (
        CustomAttribute(name="seats", type="number", label="Seats"),
        CustomAttribute(name="agents", type="number", label="Agents"),
        CustomAttribute(name="admins", type="number", label="Seats"),
    )


def test_an_aliased_mapping_with_merge_keys_can_be_used_twice(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(
            spec="  settings:\n"
            "    collectCustomerInformation:\n"
            "      name: &field {<<: &on {active: true, label: x}, label: Name}\n"
            "      email: *field\n"
            "      phone: {<<: [*field, *on], active: false}\n"
        ),
    )
    info = one_bot(path).settings.collectCustomerInformation
    assert info == CollectCustomerInformation(
        name=LeadField(active=True, label="Name"),
        email=LeadField(active=True, label="Name"),
        phone=LeadField(active=False, label="Name"),  # the first mapping of the list wins
    )


def test_a_duplicate_key_beside_merge_keys_is_still_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(spec="  settings:\n    styles: {<<: {theme: dark}, theme: light, theme: dark}\n"),
    )
    assert [str(p) for p in problems(path)] == [
        f"{path}:8:47: duplicate key 'theme' (first at line 8)"
    ]


def test_an_error_in_a_merged_value_points_at_where_it_is_written(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bot.yaml",
        bot_yaml(
            spec="  customAttributes:\n"
            "    - &base {name: seats, type: integer}\n"
            "    - {<<: *base, name: agents}\n"
        ),
    )
    found = problems(path)
    assert [(p.line, p.col) for p in found] == [(8, 33)]  # written once, reported once


def test_merging_a_scalar_is_located(tmp_path: Path) -> None:
    path = write(tmp_path, "bot.yaml", bot_yaml(spec="  settings: {<<: oops, name: Bot}\n"))
    assert [str(p) for p in problems(path)] == [
        f"{path}:7:18: invalid YAML: '<<' merges a mapping or a list of mappings"
    ]


def test_an_empty_value_is_reported_as_null(tmp_path: Path) -> None:
    text = bot_yaml().replace("  name: support\n", "  name: support\n  labels:\n    team:\n")
    path = write(tmp_path, "bot.yaml", text)
    assert [str(p) for p in problems(path)] == [f"{path}:6:10: team: must be a string, got null"]


def test_non_string_keys_are_errors(tmp_path: Path) -> None:
    path = write(tmp_path, "bot.yaml", bot_yaml(spec="  settings: {1: one}\n"))
    assert [str(p) for p in problems(path)] == [f"{path}:7:14: keys must be strings, got 1"]


def test_byte_order_mark_and_crlf_are_accepted(tmp_path: Path) -> None:
    path = tmp_path / "windows.yaml"
    path.write_bytes(
        b"\xef\xbb\xbf" + bot_yaml(spec="  prune: maybe\n").replace("\n", "\r\n").encode()
    )
    [problem] = problems(path)
    assert (problem.line, problem.col) == (7, 10)


# --- the produced BotSpec ------------------------------------------------------------------


def test_botspec_fields() -> None:
    path = FIXTURES / "full.yaml"
    bot = one_bot(path, {"COMPANY_NAME": "Acme Cloud"})
    assert bot == BotSpec(
        name="support",
        chatbot_id="ckl123abc456",
        labels={"team": "support", "tier": "production"},
        api_key_env="SUPPORT_BOT_KEY",
        settings=ChatbotSettings(
            name="Support Bot",
            instructions="You are the support assistant of Acme Cloud.\nNever promise refunds.\n",
            suggestedMessages=("Reset my password", "Talk to a person"),
            model="gpt-5-mini",
            temp=0.2,
            visibility="public",
            ipLimit=40,
            styles=Styles(theme="dark", buttonColor="#0a84ff"),
            collectCustomerInformation=CollectCustomerInformation(
                title="Can we reach you?", email=LeadField(active=True, label="E-mail")
            ),
        ),
        attributes=(
            CustomAttribute(
                name="plan_tier",
                type="text",
                label="Plan tier",
                description="Billing plan of the customer",
            ),
            CustomAttribute(
                name="legacy_score", type="number", label="Legacy score", archived=True
            ),
        ),
        prune=True,
        max_archive_percent=50,
        source=f"{path}:2",
        secrets=(),
    )
    assert isinstance(bot.attributes, tuple)
    assert isinstance(bot.settings, ChatbotSettings)


def test_botspec_defaults() -> None:
    path = FIXTURES / "valid_minimal.yaml"
    bot = one_bot(path)
    assert bot == BotSpec(name="support", chatbot_id="ckl123abc456", source=f"{path}:1")
    assert bot.api_key_env == DEFAULT_API_KEY_ENV == "BOTCTL_API_KEY"
    assert bot.settings.json_fields == {}  # nothing managed
    assert (bot.attributes, bot.prune, bot.max_archive_percent, bot.labels) == ((), False, None, {})


# --- examples and the JSON Schema ----------------------------------------------------------


def test_examples_load_cleanly_with_an_empty_environment() -> None:
    desired = load(EXAMPLES)
    assert len(desired.bots) >= 3
    assert desired.warnings == ()
    assert len({b.name for b in desired.bots}) == len(desired.bots)


def test_examples_are_a_small_fleet() -> None:
    """Two accounts, labels, a set shared by two chatbots, a Defaults document that applies."""
    fleet = load_fleet([EXAMPLES], environ={})
    assert len({b.spec.api_key_env for b in fleet.bots}) == 2
    assert all(b.spec.labels for b in fleet.bots)
    assert sum("customer-account" in b.sets for b in fleet.bots) >= 2
    assert all(b.defaults == ("production",) for b in fleet.bots)
    assert (EXAMPLES / "botctl.yaml").is_file()


def example_documents() -> list[Path]:
    """Every configuration file of examples/ (botctl.yaml is the project file)."""
    return sorted(p for p in EXAMPLES.rglob("*.y*ml") if p.name != "botctl.yaml")


def test_examples_point_editors_at_the_schema() -> None:
    assert len(example_documents()) >= 4
    for path in example_documents():
        first = path.read_text(encoding="utf-8").splitlines()[0]
        schema = os.path.relpath(SCHEMA, path.parent)
        assert first == f"# yaml-language-server: $schema={schema}", path


def test_checked_in_schema_is_current() -> None:
    expected = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    assert SCHEMA.read_text(encoding="utf-8") == expected, (
        "schemas/botctl.schema.json is stale; regenerate it with "
        "`uv run botctl schema > schemas/botctl.schema.json`"
    )


def test_schema_lists_the_contract_models() -> None:
    model = json_schema()["$defs"]["ChatbotSettings"]["properties"]["model"]
    assert model["anyOf"][0] == {"enum": list(contract.SETTINGS_MODELS)}


def test_examples_validate_against_the_schema() -> None:
    jsonschema: Any = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    documents = [
        doc
        for path in example_documents()
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8"))
        if doc is not None
    ]
    assert documents
    for doc in documents:
        errors = [e.message for e in validator.iter_errors(doc)]
        assert errors == [], errors


def test_validation_errors_never_show_a_secret(tmp_path: Path) -> None:
    """A value resolved from ${secret:...} that fails validation is quoted by its error: as
    (secret), in whichever spelling the message quotes it (JSON, repr)."""
    secret = 'hunter2 "quoted"'
    first = bot_yaml(
        spec="  settings:\n"
        '    styles: {buttonColor: "${secret:COLOUR}"}\n'
        '    model: "${secret:COLOUR}"\n'
        '    temp: "${secret:COLOUR}"\n'
        '    visibility: "${secret:COLOUR}"\n'
    )
    second = bot_yaml(name="other", chatbot_id="${secret:ID}").replace(
        "chatbotId: ${secret:ID}", 'chatbotId: "${secret:ID}"'
    )
    third = bot_yaml(name="third", chatbot_id="${secret:ID}").replace(
        "chatbotId: ${secret:ID}", 'chatbotId: "${secret:ID}"'
    )
    path = write(tmp_path, "bot.yaml", first + "---\n" + second + "---\n" + third)
    found = problems(path, environ={"COLOUR": secret, "ID": "bot-hunter2"})
    text = "\n".join(map(str, found))
    assert len(found) == 6, text
    assert "hunter2" not in text
    assert text.count("(secret)") == 4, text  # the settings' values, quoted masked
    # A secret as the chatbotId is refused where it stands, its value never quoted.
    assert text.count("${secret:...} may only be used in spec.settings") == 2, text


def test_names_differing_only_in_case_across_a_set_and_a_chatbot_are_an_error(
    tmp_path: Path,
) -> None:
    """The chatbot would get both: the service may take them for one name."""
    path = write(
        tmp_path,
        "bots.yaml",
        "apiVersion: botctl/v1\nkind: AttributeSet\nmetadata: {name: billing}\nspec:\n"
        "  customAttributes:\n    - {name: seats, type: number}\n---\n"
        + bot_yaml(
            spec="  attributeSets: [billing]\n  customAttributes:\n"
            "    - {name: Seats, type: number}\n"
        ),
    )
    found = [str(p) for p in problems(path)]
    assert any(
        "attribute name 'Seats' differs only in letter case from 'seats' (" in p
        and "which the chatbot also gets" in p
        for p in found
    ), found


def test_a_fifo_given_as_configuration_is_named_never_opened(tmp_path: Path) -> None:
    import os

    fifo = tmp_path / "bots.yaml"
    os.mkfifo(fifo)
    assert [str(p) for p in problems(fifo)] == [f"{fifo}:1:1: not a file or a directory"]


@pytest.mark.parametrize("kind", ["{}", "[Chatbot]", "3"])
def test_a_kind_that_is_not_a_string_is_a_located_error(tmp_path: Path, kind: str) -> None:
    """Found by the fuzzer: a mapping as the kind crashed the loader (unhashable)."""
    text = bot_yaml().replace("kind: Chatbot", f"kind: {kind}")
    path = write(tmp_path, "bot.yaml", text)
    [problem] = [p for p in problems(path) if p.message.startswith("kind:")]
    assert problem.line == 2
    assert (
        "must be one of 'Chatbot', 'AttributeSet', 'Defaults' or 'ConversationTest'"
        in problem.message
    )


def test_a_symlinked_file_leading_out_of_the_repository_is_never_read(tmp_path: Path) -> None:
    """A committed link in a directory of the configuration (to ``/etc/passwd``, or to
    another team's chatbot on the same host) is an error naming it; one that stays inside
    the repository is read."""
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    bots = repo / "bots"
    bots.mkdir()
    (bots / "a.yaml").write_text(bot_yaml("a", "bot-a"))
    other = tmp_path / "other-team" / "b.yaml"
    other.parent.mkdir()
    other.write_text(bot_yaml("theirs", "bot-theirs"))
    (bots / "theirs.yaml").symlink_to(other)
    with pytest.raises(ConfigError) as refused:
        load_desired([bots], environ={})
    assert f"{bots}/theirs.yaml:1:1: a symbolic link leading out of the repository" in str(
        refused.value
    )
    (bots / "theirs.yaml").unlink()
    (repo / "shared.yaml").write_text(bot_yaml("shared", "bot-s"))
    (bots / "shared.yaml").symlink_to(repo / "shared.yaml")
    assert sorted(b.name for b in load_desired([bots], environ={}).bots) == ["a", "shared"]
