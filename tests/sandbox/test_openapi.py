"""The OpenAPI document and the sandbox's /api/v1 routes describe the same operations, with
the contract's collections, lists and patterns."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from starlette.routing import Mount, Route

from botctl import contract
from botctl.sandbox.app import create_app
from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.ratelimit import is_limited

DOC = Path(__file__).resolve().parents[2] / "schemas" / "chatbot-api-v1.openapi.yaml"
METHODS = {"get", "post", "put", "patch", "delete"}


def shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def load() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(DOC.read_text(encoding="utf-8"))
    return doc


def operations(doc: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method.upper(), path): operation
        for path, item in doc["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    }


def test_document_and_routes_match() -> None:
    doc = load()
    assert doc["openapi"].startswith("3.1")
    documented = {(method, shape(path)) for method, path in operations(doc)}
    app = create_app(SandboxConfig(db=":memory:"))
    (v1,) = [r for r in app.routes if isinstance(r, Mount) and r.path == contract.API_PREFIX]
    served = {
        (method, shape(route.path))
        for route in v1.routes
        if isinstance(route, Route)
        for method in route.methods or ()
        if method != "HEAD"
    }
    assert served == documented
    assert len(served) == 14


def test_document_model_lists_are_the_contracts() -> None:
    schemas = load()["components"]["schemas"]
    assert tuple(schemas["SettingsModel"]["enum"]) == contract.SETTINGS_MODELS
    assert tuple(schemas["ChatModel"]["enum"]) == contract.CHAT_MODELS
    assert schemas["ModelId"]["pattern"] == contract.MODEL_ID_PATTERN


def test_document_patterns_are_the_contracts() -> None:
    doc = load()
    assert doc["components"]["schemas"]["HexColour"]["pattern"] == contract.HEX_COLOUR_PATTERN
    create = doc["paths"]["/chatbots/{chatbotId}/custom-attributes"]["post"]
    body = create["requestBody"]["content"]["application/json"]["schema"]
    assert body["properties"]["name"]["pattern"] == contract.ATTRIBUTE_NAME_PATTERN


def test_tags_are_the_contracts_collections() -> None:
    """Contract section 1 names six collections; every operation sits in one of them."""
    doc = load()
    assert tuple(tag["name"] for tag in doc["tags"]) == contract.COLLECTIONS
    for key, operation in operations(doc).items():
        assert len(operation["tags"]) == 1, key
        assert operation["tags"][0] in contract.COLLECTIONS, key


def test_429_documented_exactly_where_the_sandbox_limits() -> None:
    """Contract 7 and 8: the contact and custom attribute operations may answer 429, and the
    sandbox's rate limit covers those and no other."""
    for (method, path), operation in operations(load()).items():
        sample = re.sub(r"\{[^}]+\}", "x", path)
        assert ("429" in operation["responses"]) == is_limited(sample), (method, path)


def test_limited_operations_are_the_contact_and_attribute_ones() -> None:
    assert is_limited("/chatbots/b/custom-attributes")
    assert is_limited("/chatbots/b/custom-attributes/plan")
    assert is_limited("/chatbots/b/contacts")
    assert is_limited("/chatbots/b/contacts/c1")
    assert not is_limited("/update-chatbot-settings")
    assert not is_limited("/get-chatbots")
    assert not is_limited("/chat")
    assert not is_limited("/chatbots")
    assert not is_limited("/chatbots/b")
