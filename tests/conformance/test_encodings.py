"""The four encodings describe the same fields: a setting or an attribute field added to one
of them (the validator's models, the JSON Schema, the OpenAPI document, the sandbox's checks)
and not to the others fails here, as does a type, list, pattern, format, length or bound that
differs."""

from __future__ import annotations

import json
from typing import Any

import yaml

from botctl import contract
from botctl.config.document import json_schema
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.settings import ChatbotSettings
from botctl.sandbox.validation import Rules
from tests.conformance.documents import SCHEMA
from tests.conformance.exchanges import OPENAPI

KEPT = (
    "type",
    "enum",
    "pattern",
    "format",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "required",
)


def shape(schema: dict[str, Any]) -> Any:
    """What a (reference-free) schema asks of a value, without titles, defaults, descriptions
    or the null that the validator's models allow for "not managed"."""
    if "anyOf" in schema:
        branches = [shape(b) for b in schema["anyOf"] if b != {"type": "null"}]
        return branches[0] if len(branches) == 1 else {"anyOf": branches}
    out = {k: schema[k] for k in KEPT if k in schema}
    if "enum" in out:
        out.pop("type", None)  # an enum of strings says it all
    if "items" in schema:
        out["items"] = shape(schema["items"])
    if "properties" in schema:
        out["properties"] = {k: shape(v) for k, v in schema["properties"].items()}
        out["closed"] = schema.get("additionalProperties") is False
    return out


def test_shape_keeps_every_rule_an_encoding_may_state() -> None:
    """A format or length added to one encoding and not to the others is a difference."""
    rules = {
        "type": "string",
        "format": "date",
        "minLength": 1,
        "maxLength": 100,
        "pattern": "^a$",
    }
    assert shape({**rules, "title": "T", "description": "d", "default": "a"}) == rules
    for key in ("format", "minLength", "maxLength"):
        fewer = {k: v for k, v in rules.items() if k != key}
        assert shape({"anyOf": [fewer, {"type": "null"}]}) != shape(rules), key
    listed = {"type": "array", "minItems": 1, "maxItems": 3, "items": {"type": "integer"}}
    assert shape(listed) == listed
    assert shape({"type": "number", "exclusiveMinimum": 0}) == {
        "type": "number",
        "exclusiveMinimum": 0,
    }


def schema_ref(ref: str) -> list[str]:
    return ref.removeprefix("#/").split("/")


def _deref(value: Any, root: dict[str, Any]) -> Any:
    """Inline every $ref of ``value`` (the documents have no recursive references)."""
    if isinstance(value, dict):
        if "$ref" in value:
            target: Any = root
            for part in schema_ref(value["$ref"]):
                target = target[part]
            return _deref(target, root)
        return {k: _deref(v, root) for k, v in value.items()}
    if isinstance(value, list):
        return [_deref(v, root) for v in value]
    return value


def json_schema_defs() -> dict[str, Any]:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert schema == json_schema()  # the checked-in file is the generator's output
    defs: dict[str, Any] = _deref(schema, schema)["$defs"]
    return defs


def openapi_schemas() -> dict[str, Any]:
    doc = yaml.safe_load(OPENAPI.read_text(encoding="utf-8"))
    inlined = _deref(doc, doc)
    schemas: dict[str, Any] = inlined["components"]["schemas"]
    create = inlined["paths"]["/chatbots/{chatbotId}/custom-attributes"]["post"]
    schemas["AttributeCreate"] = create["requestBody"]["content"]["application/json"]["schema"]
    return schemas


def test_settings_have_the_same_fields_and_rules_everywhere() -> None:
    from_models = shape(json_schema_defs()["ChatbotSettings"])
    update = shape(openapi_schemas()["SettingsUpdate"])
    assert update.pop("required") == ["chatbotId"]
    assert update["properties"].pop("chatbotId") == {"type": "string"}
    assert from_models == update
    names = set(ChatbotSettings.model_fields)
    assert set(from_models["properties"]) == names
    assert set(Rules().settings_fields) == names  # the sandbox checks each of them


def test_attributes_have_the_same_fields_and_rules_everywhere() -> None:
    from_models = shape(json_schema_defs()["CustomAttribute"])
    create = shape(openapi_schemas()["AttributeCreate"])
    # Declared only (a rename's source, consent to archive values): botctl's, never sent.
    declared_only = {"renamedFrom", "archiveWithValues"}
    for name in declared_only:
        from_models["properties"].pop(name)
    assert from_models == create
    assert set(from_models["properties"]) | declared_only == set(CustomAttribute.model_fields)


def test_lists_and_patterns_are_the_contracts() -> None:
    defs = json_schema_defs()
    settings = defs["ChatbotSettings"]["properties"]
    model = [shape(b) for b in settings["model"]["anyOf"]]
    assert model == [
        {"enum": list(contract.SETTINGS_MODELS)},
        {"type": "string", "pattern": contract.MODEL_ID_PATTERN},
        {"type": "null"},
    ]
    styles = defs["Styles"]["properties"]
    for colour in ("buttonColor", "userMessageColor"):
        assert shape(styles[colour])["pattern"] == contract.HEX_COLOUR_PATTERN
    name = defs["CustomAttribute"]["properties"]["name"]
    assert name["pattern"] == contract.ATTRIBUTE_NAME_PATTERN
    assert shape(settings["visibility"])["enum"] == list(contract.VISIBILITIES)
    assert shape(styles["theme"])["enum"] == list(contract.THEMES)
    assert shape(styles["alignChatButton"])["enum"] == list(contract.ALIGNMENTS)
    assert shape(defs["CustomAttribute"]["properties"]["type"])["enum"] == list(
        contract.ATTRIBUTE_TYPES
    )
