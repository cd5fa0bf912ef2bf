"""The document format (one chatbot per YAML document) as pydantic models: the single source
of both validation and the published JSON Schema."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from botctl import contract
from botctl.defaults import DEFAULT_API_KEY_ENV
from botctl.resources.attributes import CustomAttribute
from botctl.resources.settings import ChatbotSettings

# `$(?!\n)`, not `$`: see botctl.contract (a trailing newline is refused by every engine).
HANDLE_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$(?!\n)"
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$(?!\n)"


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, regex_engine=contract.PATTERN_ENGINE
    )


class Metadata(_Strict):
    name: Annotated[str, StringConstraints(pattern=HANDLE_PATTERN)] = Field(
        description="The chatbot's handle in plans, state and --target; unique in the repo."
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Free-form labels.")


class Safety(_Strict):
    maxArchivePercent: Annotated[float, Field(ge=0, le=100)] | None = Field(
        default=None,
        description="Most of this chatbot's active attributes one run may archive (default 30).",
    )


class Spec(_Strict):
    chatbotId: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="The chatbot's id on the service."
    )
    apiKeyEnv: Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)] = Field(
        default=DEFAULT_API_KEY_ENV,
        description="Environment variable holding the API key of the chatbot's account.",
    )
    settings: ChatbotSettings = Field(
        default_factory=ChatbotSettings,
        description="Any subset of the writable settings; omitted fields are not managed.",
    )
    customAttributes: tuple[CustomAttribute, ...] = Field(
        default=(), description="Custom contact attributes of the chatbot."
    )
    prune: bool = Field(
        default=False,
        description="Archive live attributes that botctl never managed and this document "
        "does not declare.",
    )
    ignoreAttributes: tuple[Annotated[str, StringConstraints(min_length=1)], ...] = Field(
        default=(),
        description="Glob patterns (fnmatch) of live attributes this document does not declare "
        "and botctl must leave alone: neither reported as unmanaged nor archived.",
    )
    safety: Safety | None = None


class Document(_Strict):
    """One chatbot, as desired."""

    apiVersion: Literal["botctl/v1"]
    kind: Literal["Chatbot"]
    metadata: Metadata
    spec: Spec


MODEL_DESCRIPTION = (
    "Model identifier (contract 2.2). Editors complete the contract's list; any identifier of "
    "the same shape passes this schema, because `botctl validate --allow-unknown-models` "
    "accepts a model released after this botctl (without it, botctl refuses one not listed)."
)


def json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of one document: the models' own schema, plus the one addition
    the models cannot express, the contract's model list offered for completion. The only
    generator of schemas/botctl.schema.json (a test compares the two)."""
    schema = Document.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "botctl chatbot document"
    model = schema["$defs"]["ChatbotSettings"]["properties"]["model"]
    model["anyOf"].insert(0, {"enum": list(contract.SETTINGS_MODELS)})
    model["description"] = MODEL_DESCRIPTION
    return schema
