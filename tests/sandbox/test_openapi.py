"""The OpenAPI document and the sandbox's /api/v1 routes describe the same operations."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from starlette.routing import Mount, Route

from botctl import contract
from botctl.sandbox.app import create_app
from botctl.sandbox.config import SandboxConfig

DOC = Path(__file__).resolve().parents[2] / "schemas" / "chatbot-api-v1.openapi.yaml"
METHODS = {"get", "post", "put", "patch", "delete"}


def shape(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def test_document_and_routes_match() -> None:
    doc: dict[str, Any] = yaml.safe_load(DOC.read_text(encoding="utf-8"))
    assert doc["openapi"].startswith("3.1")
    documented = {
        (method.upper(), shape(path))
        for path, item in doc["paths"].items()
        for method in item
        if method in METHODS
    }
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


def test_document_model_list_is_the_contracts() -> None:
    doc: dict[str, Any] = yaml.safe_load(DOC.read_text(encoding="utf-8"))
    models = doc["components"]["schemas"]["SettingsUpdate"]["properties"]["model"]["enum"]
    assert tuple(models) == contract.SETTINGS_MODELS
