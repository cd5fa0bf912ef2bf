"""A field is one declaration: a pattern's hint is declared beside the pattern, and a pattern a
model uses without one is noticed here, never shown as a silent "has the wrong format"."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from botctl import contract
from botctl.config.document import PATTERN_HINTS, json_schema
from botctl.config.messages import UNKNOWN_PATTERN_HINT, error_messages
from botctl.config.project import ProjectFile


def patterns(schema: Any) -> Iterator[str]:
    """Every ``pattern`` anywhere in a JSON Schema."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == "pattern" and isinstance(value, str):
                yield value
            else:
                yield from patterns(value)
    elif isinstance(schema, list):
        for item in schema:
            yield from patterns(item)


def unhinted(schema: Any) -> set[str]:
    return {pattern for pattern in patterns(schema) if pattern not in PATTERN_HINTS}


def test_every_pattern_of_the_formats_has_its_hint() -> None:
    schemas = [json_schema(), ProjectFile.model_json_schema()]
    used = {pattern for schema in schemas for pattern in patterns(schema)}
    assert contract.HEX_COLOUR_PATTERN in used  # the walk reaches nested settings
    assert unhinted(json_schema()) == set()
    assert unhinted(ProjectFile.model_json_schema()) == set()


def test_every_contract_pattern_has_its_hint() -> None:
    declared = {
        value
        for name, value in vars(contract).items()
        if name.endswith("_PATTERN") and name != "ATTRIBUTE_NAME_STRICT_PATTERN"
    }
    assert declared - set(contract.PATTERN_HINTS) == set()


class _NewField(BaseModel):
    model_config = ConfigDict(strict=True, regex_engine=contract.PATTERN_ENGINE)

    code: Annotated[str, StringConstraints(pattern=r"^[A-Z]{3}$")]


def test_a_pattern_without_a_hint_is_noticed() -> None:
    assert unhinted(_NewField.model_json_schema()) == {r"^[A-Z]{3}$"}
    with pytest.raises(ValidationError) as caught:
        _NewField(code="ab")
    ((_, message, _),) = error_messages(_NewField, caught.value)
    assert message == f'code: {UNKNOWN_PATTERN_HINT}, got "ab"'


@pytest.mark.parametrize(("pattern", "hint"), sorted(PATTERN_HINTS.items()))
def test_a_value_breaking_a_pattern_is_told_its_hint(pattern: str, hint: str) -> None:
    class Field(BaseModel):
        model_config = ConfigDict(strict=True, regex_engine=contract.PATTERN_ENGINE)

        value: Annotated[str, StringConstraints(pattern=pattern)]

    with pytest.raises(ValidationError) as caught:
        Field(value="..\n")
    ((_, message, _),) = error_messages(Field, caught.value)
    assert message == f'value: {hint}, got "..\\n"'
