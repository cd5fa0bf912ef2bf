"""Hostile YAML (botctl.config.yamlnodes): alias bombs, deep nesting and huge files are located
errors that cost little, and the bounded composer builds exactly the nodes PyYAML's would."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from botctl.config.loader import load_desired
from botctl.config.yamlnodes import (
    ALIAS_CHARS_MESSAGE,
    ALIAS_NODES_MESSAGE,
    DEPTH_MESSAGE,
    FILE_TOO_LARGE,
    MAX_ALIAS_CHARS,
    MAX_DEPTH,
    MAX_FILE_BYTES,
    _compose_all,
    _mark,
    _NodesNeeded,
    _values_all,
    _Walker,
    parse_documents,
)
from botctl.errors import ConfigError, Problem
from tests import launch

ROOT = Path(__file__).resolve().parents[2]
# What botctl composed with before the bounded composer: libyaml's when PyYAML has it.
PYYAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
HEADER = "apiVersion: botctl/v1\nkind: Chatbot\nmetadata: {name: x}\nspec:\n  chatbotId: x\n"


def billion_laughs(levels: int = 9) -> str:
    """Nine aliases per level, nine levels: 323 bytes that expand to 9^9 strings."""
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for previous, name in zip("abcdefghijk", "bcdefghijkl"[: levels - 1], strict=False):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def problems_of(text: str) -> list[str]:
    _, found = parse_documents(text, "f.yaml")
    return [str(p) for p in found]


def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_bound() -> None:
    text = billion_laughs()
    assert len(text) < 472
    # Level e holds 9^5 = 59,049 strings: its first alias to d (9^4 = 6,561 each, with its
    # lists) is the second that crosses 10,000 values built through aliases.
    [problem] = problems_of(text)
    assert problem == f"f.yaml:5:8: {ALIAS_NODES_MESSAGE}"


def test_an_alias_bomb_costs_no_memory_in_the_real_cli(tmp_path: Path) -> None:
    """Under a 1 GiB address-space limit: before the bound, `validate` took 15 GB."""
    path = tmp_path / "bomb.yaml"
    path.write_text(billion_laughs() + HEADER + "  settings:\n    initialMessages: *i\n")

    result = launch.run("validate", str(path), preexec_fn=launch.address_space_limit(2**30))
    assert result.returncode == 1, result.stderr
    assert "alias bomb" in result.stderr
    assert "Traceback" not in result.stderr


def test_aliases_to_a_long_text_are_bounded_in_characters() -> None:
    text = f'a: &a "{"x" * 1_000_000}"\nb: [' + ", ".join(["*a"] * 12) + "]\n"
    [problem] = problems_of(text)
    # The eleventh alias brings the characters built through aliases past 10,000,000.
    column = len("b: [") + 10 * len("*a, ") + 1
    assert problem == f"f.yaml:2:{column}: {ALIAS_CHARS_MESSAGE}"
    assert MAX_ALIAS_CHARS == 10_000_000


def test_reasonable_aliases_are_not_bounded() -> None:
    """A shared block used by many documents of one file is what aliases are for."""
    text = "".join(
        f"---\nbase: &base{i} {{theme: dark, buttonColor: '#000'}}\nuse: [*base{i}, *base{i}]\n"
        for i in range(200)
    )
    documents, found = parse_documents(text, "f.yaml")
    assert found == []
    assert len(documents) == 200


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 490, 100_000])
def test_deep_nesting_is_refused_where_it_crosses_the_bound(depth: int) -> None:
    text = "a: " + "[" * depth + "]" * depth + "\n"
    # The root mapping is level 1: the bound is crossed by bracket number MAX_DEPTH.
    assert problems_of(text) == [f"f.yaml:1:{3 + MAX_DEPTH}: {DEPTH_MESSAGE}"]


def test_nesting_up_to_the_bound_is_read() -> None:
    depth = MAX_DEPTH - 1  # with the root mapping: MAX_DEPTH levels
    documents, found = parse_documents("a: " + "[" * depth + "]" * depth + "\n", "f.yaml")
    assert found == []
    value: Any = documents[0].value["a"]
    for _ in range(depth - 1):
        value = value[0]
    assert value == []


def test_deep_mappings_are_refused_too() -> None:
    depth = 1000
    text = "a: " + "{a: " * depth + "1" + "}" * depth + "\n"
    [problem] = problems_of(text)
    assert problem.endswith(DEPTH_MESSAGE)


def test_nesting_built_through_aliases_is_bounded_by_the_walker() -> None:
    """Each level written once, at depth 2: only the value built is deep."""
    lines = ["l0: &l0 [x]"] + [f"l{i}: &l{i} [*l{i - 1}]" for i in range(1, MAX_DEPTH + 5)]
    found = problems_of("\n".join(lines) + "\n")
    assert found
    assert all(p.endswith(DEPTH_MESSAGE) for p in found)


@pytest.mark.parametrize("depth", [490, 100_000])
def test_deep_nesting_in_the_real_cli_is_a_located_error(tmp_path: Path, depth: int) -> None:
    """100,000 levels crashed the process (libyaml's composer recursing in C), 490 levels
    in a settings value gave a RecursionError traceback."""
    path = tmp_path / "deep.yaml"
    path.write_text(HEADER + "  settings:\n    name: " + "[" * depth + "]" * depth + "\n")
    result = launch.run("validate", str(path))
    assert result.returncode == 1, (result.returncode, result.stderr[-2000:])
    assert f"{path}:7:" in result.stderr
    assert DEPTH_MESSAGE in result.stderr
    assert "Traceback" not in result.stderr


def test_a_file_beyond_the_size_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("w") as handle:
        handle.write(HEADER + '  settings:\n    instructions: "')
        handle.write("x" * (MAX_FILE_BYTES + 1))
        handle.write('"\n')
    with pytest.raises(ConfigError) as info:
        load_desired([path], environ={})
    assert info.value.problems == [Problem(str(path), 1, 1, FILE_TOO_LARGE)]


def test_a_file_at_the_size_bound_is_read(tmp_path: Path) -> None:
    path = tmp_path / "large.yaml"
    head = HEADER + '  settings:\n    instructions: "'
    path.write_text(head + "x" * (MAX_FILE_BYTES - len(head) - 2) + '"\n')
    assert path.stat().st_size == MAX_FILE_BYTES
    [bot] = load_desired([path], environ={}).bots
    assert bot.settings.instructions is not None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: &x 1\nb: &x 2\n", "found duplicate anchor 'x'; first occurrence second occurrence"),
        ("a: *nope\n", "found undefined alias 'nope'"),
    ],
)
def test_alias_errors_read_as_before(text: str, message: str) -> None:
    [problem] = problems_of(text)
    assert problem.endswith(f"invalid YAML: {message}")


# --- the same nodes as PyYAML's composer, and the direct path the same values as the walker --


def same_nodes(ours: Any, theirs: Any, seen: dict[int, int]) -> bool:
    """Equal trees: tags, values, styles and marks; an alias shares its node in both."""
    if id(ours) in seen:
        return seen[id(ours)] == id(theirs)
    seen[id(ours)] = id(theirs)
    marks = (ours.start_mark.index, ours.end_mark.index) == (
        theirs.start_mark.index,
        theirs.end_mark.index,
    )
    if type(ours) is not type(theirs) or ours.tag != theirs.tag or not marks:
        return False
    if isinstance(ours, yaml.ScalarNode):
        return bool(ours.value == theirs.value and ours.style == theirs.style)
    if len(ours.value) != len(theirs.value) or ours.flow_style != theirs.flow_style:
        return False
    if isinstance(ours, yaml.SequenceNode):
        return all(same_nodes(a, b, seen) for a, b in zip(ours.value, theirs.value, strict=True))
    return all(
        same_nodes(k1, k2, seen) and same_nodes(v1, v2, seen)
        for (k1, v1), (k2, v2) in zip(ours.value, theirs.value, strict=True)
    )


def assert_composed_alike(text: str) -> None:
    theirs = list(yaml.compose_all(text, Loader=PYYAML_LOADER))
    ours = list(_compose_all(text))
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs, strict=True):
        assert same_nodes(a, b, {}), text


def walked(text: str, problems: list[Problem]) -> list[tuple[Any, tuple[int, int]]]:
    """Every document's value and start, as composing and walking give them."""
    walker = _Walker("f.yaml", problems)
    return [(walker.value(node, 0, ()), _mark(node)) for node in _compose_all(text)]


def assert_built_alike(text: str) -> None:
    """The direct path builds what the walker does, or leaves the document to it: always when
    the walker reports a problem."""
    problems: list[Problem] = []
    try:
        expected = walked(text, problems)
    except yaml.YAMLError:
        with pytest.raises(yaml.YAMLError):
            list(_values_all(text))
        return
    if problems:
        with pytest.raises(_NodesNeeded):
            list(_values_all(text))
        return
    try:
        direct = list(_values_all(text))
    except _NodesNeeded:
        return  # anchors, aliases, tags: the walker's to build
    assert direct == expected, text


YAML_FILES = sorted(
    path
    for pattern in (
        "examples/**/*.yaml",
        "tests/fixtures/config/*.yaml",
        "tests/conformance/**/*.yaml",
    )
    for path in ROOT.glob(pattern)
)


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_checked_in_yaml_file_composes_as_pyyaml_does(path: Path) -> None:
    """And the direct path builds what the walker does from those nodes."""
    text = path.read_text(encoding="utf-8")
    assert_built_alike(text)
    try:
        list(yaml.compose_all(text, Loader=PYYAML_LOADER))
    except yaml.YAMLError:
        with pytest.raises(yaml.YAMLError):
            list(_compose_all(text))
        return
    assert_composed_alike(text)


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(value=JSONISH, flow=st.booleans(), shared=st.booleans())
def test_generated_yaml_composes_as_pyyaml_does(value: Any, flow: bool, shared: bool) -> None:
    # ``shared``: the value twice under one anchor, so the dump writes an alias to it.
    document = {"first": value, "again": value} if shared else value
    text = yaml.safe_dump(document, default_flow_style=flow, explicit_start=True)
    assert_composed_alike(text + text)
    assert_built_alike(text + text)


# --- the direct path: values straight from the events, as the nodes and the walker give --------


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",  # an anchor and an alias
        "base: &b {x: 1}\nuse:\n  <<: *b\n",  # a merge key
        "a: !!str 1\n",  # an explicit tag
        "1: one\n",  # a key that is not text
        "a: 1\na: 2\n",  # a duplicate key
        "when: 2024-02-30\n",  # a scalar that cannot be built
    ],
)
def test_what_the_walker_reports_or_resolves_takes_the_node_path(text: str) -> None:
    with pytest.raises(_NodesNeeded):
        list(_values_all(text))
    documents, problems = parse_documents(text, "f.yaml")
    expected_problems: list[Problem] = []
    expected = [
        _Walker("f.yaml", expected_problems).value(node, 0, ()) for node in _compose_all(text)
    ]
    assert [doc.value for doc in documents] == [v for v in expected if v is not None]
    assert problems == expected_problems


def test_plain_documents_take_the_direct_path_with_the_same_places() -> None:
    text = "---\na: 1\nb: [x, {c: true}]\n---\n- one\n---\n\n---\nplain\n"
    documents, problems = parse_documents(text, "f.yaml")
    assert problems == []
    assert [(d.value, d.start) for d in documents] == [
        (v, m) for v, m in walked(text, problems) if v is not None
    ]
    assert documents[1].mark((0,)) == (5, 3)  # found by reading the document again


def test_parsing_leaves_nothing_for_the_cycle_collector() -> None:
    """A file's new numbers, booleans and dates are built by a loader of PyYAML's, which
    refers to itself: disposed of once the file is done, so 5,000 files leave no cyclic
    garbage behind for the collector to trace."""
    import gc

    text = HEADER + "  settings: {temp: 0.123, memory: true}\n  since: 2024-02-03\n"
    enabled = gc.isenabled()
    gc.disable()
    try:
        gc.collect()
        documents, problems = parse_documents(text.replace("0.123", "0.4567"), "f.yaml")
        assert problems == []
        assert documents[0].value["spec"]["settings"] == {"temp": 0.4567, "memory": True}
        assert gc.collect() == 0
    finally:
        if enabled:
            gc.enable()


def test_one_loader_a_file_however_many_new_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """Making a loader costs ~5 µs: one per file that needs one, not one per new value."""
    made: list[int] = []

    class Counted(yaml.SafeLoader):
        def __init__(self, stream: str) -> None:
            made.append(1)
            super().__init__(stream)

    monkeypatch.setattr(yaml, "SafeLoader", Counted)
    numbers = "".join(f"    n{i}: {i}.{i}25\n" for i in range(1000, 1200))
    documents, problems = parse_documents(HEADER + "  settings:\n" + numbers, "f.yaml")
    assert problems == []
    assert documents[0].value["spec"]["settings"]["n1100"] == 1100.1100_25
    assert made == [1]
    documents, problems = parse_documents(HEADER + "  settings:\n" + numbers, "f.yaml")
    assert made == [1]  # every value built before: no loader at all
