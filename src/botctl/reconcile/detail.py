"""Item-level detail of a change to a list or nested value, for the person reading the plan:
``+ [3] "example.org"``, ``- [1] "old.example"``, ``~ [2] "Hi" -> "Hello"``.

This is the one place botctl uses deepdiff: for showing a structural difference to a person,
where its care (ordered lists compared by the smaller of a pairwise and a difflib report) is
worth its cost. Equality on the planning path is ``values.same_value``. deepdiff is imported
only when a plan holds such a change, so no other command pays for importing it.
"""

from __future__ import annotations

import functools
from typing import Any

from botctl.plan import ItemChange, ItemOp
from botctl.values import NUMBER_TOLERANCE, JsonValue, as_json

_REPORTS: dict[str, ItemOp] = {
    "iterable_item_added": "add",
    "dictionary_item_added": "add",
    "iterable_item_removed": "remove",
    "dictionary_item_removed": "remove",
    "values_changed": "change",
    "type_changes": "change",
}


def has_items(before: JsonValue, after: JsonValue) -> bool:
    """Whether a change between these values has item-level detail worth showing."""
    return isinstance(before, list | tuple | dict) and isinstance(after, list | tuple | dict)


def item_changes(before: JsonValue, after: JsonValue) -> tuple[ItemChange, ...]:
    """The items added, removed or changed between two lists (or mappings), in path order."""
    if not has_items(before, after):
        return ()
    if _flat_list(before) and _flat_list(after):
        # A fleet often makes the same change to many chatbots (one greeting, one domain
        # list): lists of plain values are compared once per distinct pair.
        return _list_changes(tuple(before), tuple(after))
    return _changes(before, after)


def _flat_list(value: JsonValue) -> bool:
    return isinstance(value, list | tuple) and all(
        isinstance(item, str | int | float | bool) or item is None for item in value
    )


@functools.lru_cache(maxsize=256)
def _list_changes(before: tuple[Any, ...], after: tuple[Any, ...]) -> tuple[ItemChange, ...]:
    return _changes(before, after)


def _changes(before: JsonValue, after: JsonValue) -> tuple[ItemChange, ...]:
    from deepdiff import DeepDiff

    report = DeepDiff(
        as_json(before),
        as_json(after),
        view="tree",
        ignore_numeric_type_changes=True,
        math_epsilon=NUMBER_TOLERANCE,
    )
    items = []
    for kind, levels in report.items():
        op = _REPORTS.get(kind)
        if op is None:
            continue
        for level in levels:
            path = level.path(output_format="list")
            items.append(
                ItemChange(
                    op=op,
                    where=_where(path),
                    before=None if op == "add" else as_json(level.t1),
                    after=None if op == "remove" else as_json(level.t2),
                )
            )
    return tuple(sorted(items, key=lambda item: _order(item.where)))


def _where(path: list[Any]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path).lstrip(
        "."
    )


def _order(where: str) -> tuple[Any, ...]:
    # "[10]" after "[9]": list indices sort as numbers.
    return tuple(
        int(part) if part.isdigit() else part
        for part in where.replace("]", "").replace("[", ".").split(".")
        if part
    )
