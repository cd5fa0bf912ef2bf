"""Checks beyond the types, on a document's own raw values (so they report alongside type errors,
each once, in the document that holds the value): the model list, attribute names, warning
codes in ``lint.disable``, and Defaults selectors."""

from __future__ import annotations

import functools
import re
from typing import Any

from botctl import contract, lint
from botctl.config.messages import did_you_mean
from botctl.config.sources import Findings, Source
from botctl.config.yamlnodes import Path as NodePath


def check_model(source: Source, settings: Any, allow_unknown_models: bool, found: Findings) -> None:
    model = settings.get("model") if isinstance(settings, dict) else None
    # A model of the wrong shape is the document model's error; the list is checked after.
    if (
        not isinstance(model, str)
        or model in contract.SETTINGS_MODELS
        or not re.match(contract.MODEL_ID_PATTERN, model)
    ):
        return
    path: NodePath = ("spec", "settings", "model")
    message = f"model: {model!r} is not a known model" + did_you_mean(
        model, contract.SETTINGS_MODELS
    )
    if allow_unknown_models:
        found.warn(source, lint.UNKNOWN_MODEL, path, message)
    else:
        found.error(
            source,
            path,
            message + "; if the service released it after this botctl, pass --allow-unknown-models",
        )


# Two attribute names a chatbot may not both have: the service may take them for one.
CASE_CLASH = "differs only in letter case from"


def check_attributes(source: Source, attributes: Any, found: Findings) -> None:
    """Names unique within the document in any letter case (README: attribute names and
    letter case), and the stricter naming guide (a warning)."""
    seen: dict[str, tuple[str, int]] = {}  # by name in any case: the name as written, item
    for i, attr in enumerate(attributes if isinstance(attributes, tuple) else ()):
        name = attr.get("name") if isinstance(attr, dict) else None
        if not isinstance(name, str):
            continue
        path = ("spec", "customAttributes", i, "name")
        folded = name.casefold()
        first = seen.get(folded)
        if first is not None and first[0] == name:
            found.error(
                source,
                path,
                f"duplicate attribute name {name!r} (also item {first[1] + 1} of customAttributes)",
            )
        elif first is not None:
            found.error(
                source,
                path,
                f"attribute name {name!r} {CASE_CLASH} {first[0]!r} (item {first[1] + 1} of "
                "customAttributes)",
            )
        seen.setdefault(folded, (name, i))
        if _off_the_guide(name):
            found.warn(
                source,
                lint.ATTRIBUTE_NAME_STYLE,
                path,
                f"attribute name {name!r}: a guide of the service allows only lowercase "
                "letters, digits and '_' (starting with a letter)",
            )


@functools.lru_cache(maxsize=4096)
def _off_the_guide(name: str) -> bool:
    """A valid attribute name the service's stricter guide refuses: decided once per name (a
    fleet's chatbots declare the same ones)."""
    valid = re.match(contract.ATTRIBUTE_NAME_PATTERN, name)
    return bool(valid) and not re.match(contract.ATTRIBUTE_NAME_STRICT_PATTERN, name)


def disabled_codes(source: Source, found: Findings) -> frozenset[str]:
    """The codes of the document's ``spec.lint.disable``; a word naming none is an error."""
    lint_spec = source.spec.get("lint")
    words = lint_spec.get("disable") if isinstance(lint_spec, dict) else None
    if not isinstance(words, tuple):
        return frozenset()  # absent, or a shape the model reports
    codes: set[str] = set()
    for i, word in enumerate(words):
        if not isinstance(word, str):
            continue
        code = lint.lookup(word)
        if code is None:
            found.error(source, ("spec", "lint", "disable", i), lint.unknown_code(word))
        else:
            codes.add(code.code)
    return frozenset(codes)


def check_match_expressions(source: Source, found: Findings) -> None:
    """As in Kubernetes: In and NotIn need values, Exists and DoesNotExist take none."""
    selector = source.spec.get("selector")
    expressions = selector.get("matchExpressions") if isinstance(selector, dict) else None
    for i, expression in enumerate(expressions if isinstance(expressions, tuple) else ()):
        if not isinstance(expression, dict):
            continue
        operator, values = expression.get("operator"), expression.get("values")
        path = ("spec", "selector", "matchExpressions", i)
        if operator in ("In", "NotIn") and not values:
            found.error(source, path, f"operator {operator} needs a non-empty list of values")
        elif operator in ("Exists", "DoesNotExist") and values:
            found.error(source, (*path, "values"), f"operator {operator} takes no values")
