"""Pydantic validation errors -> messages a person can act on, located in the YAML."""

from __future__ import annotations

import datetime
import difflib
import json
import math
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel, ValidationError

from botctl.config.document import PATTERN_HINTS
from botctl.config.yamlnodes import LocatedDocument, Path
from botctl.errors import Problem
from botctl.resources.settings import nested_model

_KINDS = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "tuple_type": "a list",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def yaml_type(value: Any) -> str:
    names = {
        bool: "boolean",
        datetime.date: "date",
        datetime.datetime: "timestamp",
        int: "integer",
        float: "number",
        str: "string",
        list: "list",
        tuple: "list",
        dict: "mapping",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def show(value: Any) -> str:
    """A value as it would be written in YAML/JSON (true, not True, 2024-01-01 for a date)."""
    if isinstance(value, datetime.date):  # datetimes too: YAML reads unquoted dates as dates
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return ".nan" if math.isnan(value) else ("-.inf" if value < 0 else ".inf")
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def limit(bound: Any) -> str:
    """A range limit as a person writes it: 1, not 1.0."""
    if isinstance(bound, float) and bound.is_integer():
        return str(int(bound))
    return str(bound)


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def fields_at(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names allowed in the mapping at ``loc`` inside ``model``."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        current = nested_model(field.annotation)
    return list(getattr(current, "model_fields", {}))


UNKNOWN_PATTERN_HINT = "has the wrong format"


def _pattern_hint(pattern: Any) -> str:
    """What a value that breaks ``pattern`` is told: the hint declared beside the pattern."""
    if not isinstance(pattern, str):
        return UNKNOWN_PATTERN_HINT
    return PATTERN_HINTS.get(pattern, UNKNOWN_PATTERN_HINT)


def _message(error: Any, field: str, model: type[BaseModel], loc: tuple[str | int, ...]) -> str:
    kind, value, ctx = error["type"], error.get("input"), error.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"unknown key {field!r}" + did_you_mean(field, fields_at(model, loc[:-1]))
    if kind == "missing":
        return f"missing required key {field!r}"
    if kind == "literal_error":
        return f"{field}: must be one of {ctx.get('expected')}, got {show(value)}"
    if kind == "string_pattern_mismatch":
        return f"{field}: {_pattern_hint(ctx.get('pattern'))}, got {show(value)}"
    if kind in ("greater_than_equal", "greater_than"):
        return f"{field}: must be at least {limit(ctx.get('ge', ctx.get('gt')))}, got {show(value)}"
    if kind in ("less_than_equal", "less_than"):
        return f"{field}: must be at most {limit(ctx.get('le', ctx.get('lt')))}, got {show(value)}"
    if kind == "finite_number":
        return f"{field}: must be a finite number, got {show(value)}"
    if kind == "string_too_short":
        return f"{field}: must not be empty"
    if kind == "string_too_long":
        length = len(value) if isinstance(value, str) else "more"
        return f"{field}: must be at most {ctx.get('max_length')} characters, got {length}"
    if kind == "value_error":  # a validator's own words
        return f"{field}: {ctx.get('error', error['msg'])}"
    if kind in _KINDS:
        got = "null" if value is None else f"{yaml_type(value)} {show(value)}"
        # An unquoted 2024-01-01, 1.10 or yes is read by YAML as a date, number or boolean.
        hint = (
            " (quote it to make it a string)" if kind == "string_type" and value is not None else ""
        )
        return f"{field}: must be {_KINDS[kind]}, got {got}{hint}"
    return f"{field}: {error['msg']}"


def error_messages(model: type[BaseModel], exc: ValidationError) -> list[tuple[Path, str, bool]]:
    """Each validation error of ``model`` as (where, message, whether it is about the key)."""
    found = []
    seen: set[Path] = set()
    for error in exc.errors():
        # Union members report once each; the tagged variant name is noise.
        loc = tuple(p for p in error["loc"] if not (isinstance(p, str) and "[" in p))
        if loc in seen:
            continue
        seen.add(loc)
        field = str(next((p for p in reversed(loc) if isinstance(p, str)), "value"))
        message = _message(error, field, model, loc)
        found.append((loc, message, error["type"] == "extra_forbidden"))
    return found


def located_errors(
    doc: LocatedDocument, base: Path, model: type[BaseModel], exc: ValidationError
) -> list[Problem]:
    return [
        doc.problem((*base, *loc), message, key=key)
        for loc, message, key in error_messages(model, exc)
    ]
