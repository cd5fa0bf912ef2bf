"""The registry of resource kinds: what handles "each kind" iterates it and never branches on a
kind's name (``tests/test_toy_kind.py`` proves a new kind needs no edit to ``src/``)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from botctl import plan
from botctl.resources.registry import kind_of, kinds

SRC = Path(__file__).parents[2] / "src" / "botctl"
# The modules that handle every kind: each kind's business stays in its own module.
GENERIC = [
    SRC / "plan.py",
    SRC / "models.py",
    *sorted((SRC / "reconcile").glob("*.py")),
    SRC / "service" / "live.py",
    SRC / "store" / "state.py",
    *sorted((SRC / "render").glob("*.py")),
]


def _names() -> set[str]:
    return {name for kind in kinds() for name in (kind.name, *kind.operation_kinds)}


def _branches(source: str, where: str, names: set[str]) -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``) and match cases against a kind's name."""
    found = []
    for node in ast.walk(ast.parse(source)):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Tuple | ast.List | ast.Set):
                    values += operand.elts
                else:
                    values.append(operand)
        elif isinstance(node, ast.MatchValue):
            values.append(node.value)
        found += [
            f"{where}:{value.lineno}: {value.value!r}"
            for value in values
            if isinstance(value, ast.Constant) and value.value in names
        ]
    return found


def test_the_generic_modules_never_branch_on_a_kind_name() -> None:
    names = _names()
    assert {"settings", "attribute", "update_settings", "create_attribute"} <= names
    found = [
        branch
        for path in GENERIC
        for branch in _branches(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)), names)
    ]
    assert found == [], "a branch on a resource kind's name (route it through the kind):\n" + (
        "\n".join(found)
    )


@pytest.mark.parametrize(
    "source",
    [
        'if op.resource == "settings":\n    pass\n',
        'x = 1 if "attribute" != change.resource else 2\n',
        'if op.kind in ("create_attribute", "other"):\n    pass\n',
        'match op.resource:\n    case "settings":\n        pass\n',
    ],
)
def test_the_check_finds_a_branch(source: str) -> None:
    assert len(_branches(source, "sample.py", _names())) == 1


def test_every_kind_is_found_by_its_name_and_orders_its_operations() -> None:
    for kind in kinds():
        assert kind_of(kind.name) is kind
        for operation_kind in kind.operation_kinds:
            assert plan.RESOURCE_OF[operation_kind] == kind.name
    assert [kind.name for kind in kinds()][:2] == ["settings", "attribute"]
    with pytest.raises(ValueError, match="unknown resource kind"):
        kind_of("nothing")
