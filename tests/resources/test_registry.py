"""The registry of resource kinds: what handles "each kind" iterates it and never branches on a
kind's name (``tests/test_toy_kind.py`` proves a new kind needs no edit to ``src/``).

The check reads every module of ``src/`` outside ``resources/`` (the kinds' own home) and
``sandbox/`` (the emulator): a comparison (``==``, ``!=``, ``in``, ``is``) or a ``match`` case
against a kind's name or operation kinds, whether written as a literal (``"settings"``) or
taken from a kind (``SETTINGS.name``, ``settings.KIND.operation_kinds``, ``kind_of("x")``).
Comparing with a kind the code was handed (``op.resource == kind.name`` in a loop over the
registry) is what generic code does, and passes.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import Any

import pytest

from botctl import plan
from botctl.resources import registry
from botctl.resources.registry import kind_of, kinds

SRC = Path(__file__).parents[2] / "src" / "botctl"
OWN_HOMES = ("resources", "sandbox")
# The modules that handle every kind: each kind's business stays in its own module.
GENERIC = sorted(p for p in SRC.rglob("*.py") if p.relative_to(SRC).parts[0] not in OWN_HOMES)
_UNKNOWN = object()


def _names() -> set[str]:
    return {name for kind in kinds() for name in (kind.name, *kind.operation_kinds)}


def _imported(tree: ast.AST) -> dict[str, Any]:
    """The names a module binds by importing from ``botctl.resources``, to what they are."""
    bound: dict[str, Any] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("botctl.resources"):
            module = importlib.import_module(str(node.module))
            for alias in node.names:
                found = getattr(module, alias.name, _UNKNOWN)
                if found is _UNKNOWN:  # a module of the package
                    found = importlib.import_module(f"{node.module}.{alias.name}")
                bound[alias.asname or alias.name] = found
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("botctl.resources") and alias.asname:
                    bound[alias.asname] = importlib.import_module(alias.name)
    return bound


def _value(node: ast.expr, bound: dict[str, Any]) -> Any:
    """What an expression is when the code names a kind itself: an imported kind (or a module
    holding one), an attribute of it, ``kind_of("literal")``; else ``_UNKNOWN``."""
    if isinstance(node, ast.Name):
        return bound.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _value(node.value, bound)
        return _UNKNOWN if base is _UNKNOWN else getattr(base, node.attr, _UNKNOWN)
    literal = node.args[0] if isinstance(node, ast.Call) and node.args else None
    if not (isinstance(literal, ast.Constant) and isinstance(literal.value, str)):
        return _UNKNOWN
    assert isinstance(node, ast.Call)
    if _value(node.func, bound) is not registry.kind_of:
        return _UNKNOWN
    try:
        return kind_of(literal.value)
    except ValueError:
        return _UNKNOWN


def _names_a_kind(value: Any, names: set[str]) -> bool:
    if isinstance(value, str):
        return value in names
    if isinstance(value, tuple | list | set | frozenset):
        return any(_names_a_kind(item, names) for item in value)
    return any(value is kind for kind in kinds())


def _branches(source: str, where: str, names: set[str]) -> list[str]:
    """Comparisons and match cases against a kind's name, literal or taken from the kind."""
    tree = ast.parse(source)
    bound = _imported(tree)
    found = []
    for node in ast.walk(tree):
        values: list[ast.expr] = []
        if isinstance(node, ast.Compare):
            for operand in (node.left, *node.comparators):
                if isinstance(operand, ast.Tuple | ast.List | ast.Set):
                    values += operand.elts
                else:
                    values.append(operand)
        elif isinstance(node, ast.MatchValue):
            values.append(node.value)
        for value in values:
            if isinstance(value, ast.Constant) and value.value in names:
                found.append(f"{where}:{value.lineno}: {value.value!r}")
            elif _names_a_kind(_value(value, bound), names):
                found.append(f"{where}:{value.lineno}: {ast.unparse(value)}")
    return found


def test_the_generic_modules_never_branch_on_a_kind_name() -> None:
    names = _names()
    assert {"settings", "attribute", "update_settings", "create_attribute"} <= names
    packages = {p.relative_to(SRC).parts[0] for p in GENERIC}
    assert {"pipeline", "store", "config", "cli", "reconcile", "render", "models.py"} <= packages
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
        "from botctl.resources.settings import KIND as SETTINGS\n"
        "if op.resource != SETTINGS.name:\n    pass\n",
        "from botctl.resources import attributes\n"
        "if op.kind in attributes.KIND.operation_kinds:\n    pass\n",
        "from botctl.resources.registry import kind_of\n"
        'if kind_of(op.resource) is kind_of("settings"):\n    pass\n',
        "from botctl.resources import attribute_model\n"
        "match op.resource:\n    case attribute_model.RESOURCE:\n        pass\n",
    ],
)
def test_the_check_finds_a_branch(source: str) -> None:
    assert len(_branches(source, "sample.py", _names())) == 1


@pytest.mark.parametrize(
    "source",
    [
        "from botctl.resources.registry import kinds\n"
        "for kind in kinds():\n    mine = [op for op in ops if op.resource == kind.name]\n",
        "from botctl.resources.registry import kind_of\n"
        "if kind_of(op.resource).reads_contacts(op):\n    pass\n",
        'if change.action == "archive":\n    pass\n',
    ],
)
def test_generic_code_passes_the_check(source: str) -> None:
    assert _branches(source, "sample.py", _names()) == []


def test_every_kind_is_found_by_its_name_and_orders_its_operations() -> None:
    for kind in kinds():
        assert kind_of(kind.name) is kind
        for operation_kind in kind.operation_kinds:
            assert plan.RESOURCE_OF[operation_kind] == kind.name
    assert [kind.name for kind in kinds()][:2] == ["settings", "attribute"]
    with pytest.raises(ValueError, match="unknown resource kind"):
        kind_of("nothing")
