"""No function in ``src/`` is longer than 80 lines (issue #25): a longer one does several
things, and each deserves a name. Measured from the ``def`` (decorators aside) to its last
line, docstring included, for every function, method and nested function, by the AST."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).parents[1] / "src" / "botctl"
LIMIT = 80


def too_long(text: str, where: str, limit: int = LIMIT) -> list[str]:
    """Every function of ``text`` longer than ``limit`` lines, as ``where:line name (n)``."""
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            lines = node.end_lineno - node.lineno + 1
            if lines > limit:
                found.append(f"{where}:{node.lineno} {node.name} ({lines} lines)")
    return found


def test_no_function_in_src_is_longer_than_80_lines() -> None:
    found = [
        long
        for path in sorted(SRC.rglob("*.py"))
        for long in too_long(path.read_text(), str(path.relative_to(SRC.parent)))
    ]
    assert found == [], "split these (one job each):\n" + "\n".join(found)


def test_the_rule_sees_methods_nested_and_async_functions_and_counts_from_the_def() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(79))  # def + 79 lines: 80, the limit
    text = (
        f"def fits():\n{body}\n\n"
        f"class C:\n    async def method(self):\n    {body.replace(chr(10), chr(10) + '    ')}\n"
        f"        y = 1\n\n"
        f"def outer():\n    def inner():\n    {body.replace(chr(10), chr(10) + '    ')}\n"
        f"        y = 1\n    return inner\n\n"
        f"@decorator\ndef decorated():\n{body}\n"
    )
    found = too_long(text, "t.py")
    assert sorted(f.split()[1] for f in found) == ["inner", "method", "outer"]
