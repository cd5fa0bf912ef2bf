"""The document formats as pydantic models: the single source of both validation and the
published JSON Schema.

Four kinds of document (README "Configuration format"):

- ``Chatbot``: one chatbot, as desired; its ``spec`` is made of each resource kind's keys
  (``ResourceKind.spec_fields``), so its model (and a ``Defaults`` document's) is built for the
  kinds registered (``chatbot_document``), and the JSON Schema with it;
- ``AttributeSet``: custom attributes shared by the chatbots that include it
  (``spec.attributeSets``);
- ``Defaults``: values applied to every chatbot its label selector matches; the chatbot's own
  values win (``config.resolve``);
- ``ConversationTest``: a conversation sent to chatbots through the chat operation, and what
  their answers must be (``config.conversation``, run by ``botctl test``).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    TypeAdapter,
    create_model,
    field_validator,
)

from botctl import contract, language, lint
from botctl.defaults import DEFAULT_API_KEY_ENV, DEFAULT_MIN_SIMILARITY
from botctl.resources.attribute_model import CustomAttribute
from botctl.resources.kind import ResourceKind
from botctl.resources.registry import kinds
from botctl.values import as_json

# `$(?!\n)`, not `$`: see botctl.contract (a trailing newline is refused by every engine).
HANDLE_PATTERN = r"^[a-z0-9][a-z0-9_.-]*$(?!\n)"
HANDLE_HINT = "must be lowercase letters, digits, '.', '_' or '-', starting with a letter or digit"
# A handle names export's file (<handle>.yaml, within any file system's 255 bytes) and lines
# of every plan: a hundred characters are plenty.
HANDLE_MAX_LENGTH = 100
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$(?!\n)"
ENV_NAME_HINT = "must be an environment variable name such as SUPPORT_BOT_KEY"
# Every pattern of the document formats, with what a value that breaks it is told.
PATTERN_HINTS = {
    **contract.PATTERN_HINTS,
    HANDLE_PATTERN: HANDLE_HINT,
    ENV_NAME_PATTERN: ENV_NAME_HINT,
}
KINDS = ("Chatbot", "AttributeSet", "Defaults", "ConversationTest")

Handle = Annotated[str, StringConstraints(pattern=HANDLE_PATTERN, max_length=HANDLE_MAX_LENGTH)]


def chatbot_id_problem(chatbot_id: str) -> str | None:
    """Why botctl cannot put ``chatbot_id`` into a request path (None: it can): the rule
    ``spec.chatbotId`` follows, for ids from elsewhere (the command line, a chatbot list)."""
    if len(chatbot_id) > contract.CHATBOT_ID_MAX_LENGTH:
        return f"longer than {contract.CHATBOT_ID_MAX_LENGTH} characters"
    if not chatbot_id or not re.match(contract.CHATBOT_ID_PATTERN, chatbot_id):
        return (
            "not one URL path segment (letters, digits, '.', '_', '~' or '-', and not '.' or '..')"
        )
    return None


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, regex_engine=contract.PATTERN_ENGINE
    )


class Metadata(_Strict):
    name: Handle = Field(
        description="The document's handle (for a chatbot: in plans, state and --target); "
        "unique among the documents of its kind."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Free-form labels; Defaults selectors and -l/--selector match a chatbot's.",
    )


class Lint(_Strict):
    disable: tuple[str, ...] = Field(
        default=(),
        description="Warning codes (BC101) or names (attribute-name-style) not to report for "
        "this document.",
    )


class AttributeSetSpec(_Strict):
    customAttributes: tuple[CustomAttribute, ...] = Field(
        description="The attributes every including chatbot declares."
    )
    lint: Lint | None = None


class AttributeSetDocument(_Strict):
    """Custom attributes shared by several chatbots."""

    apiVersion: Literal["botctl/v1"]
    kind: Literal["AttributeSet"]
    metadata: Metadata
    spec: AttributeSetSpec


class MatchExpression(_Strict):
    key: Annotated[str, StringConstraints(min_length=1)]
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = Field(
        default=(), description="Required by In and NotIn; not allowed with Exists, DoesNotExist."
    )


class Selector(_Strict):
    """Kubernetes' label selector: every entry must hold; an empty selector matches every
    chatbot."""

    matchLabels: dict[str, str] = Field(default_factory=dict)
    matchExpressions: tuple[MatchExpression, ...] = ()


# A Chatbot document's ``spec``: these keys, then each kind's (``ResourceKind.spec_fields``),
# then ``attributeSets`` and ``lint``. The models are made for the kinds registered
# (``chatbot_document``), so a kind's section is validated, and published in the schema, with
# no edit here.
_SPEC_ID = {
    "chatbotId": (
        Annotated[
            str,
            StringConstraints(
                min_length=1,
                max_length=contract.CHATBOT_ID_MAX_LENGTH,
                pattern=contract.CHATBOT_ID_PATTERN,
            ),
        ],
        Field(
            description="The chatbot's id on the service: one URL path segment (letters, "
            "digits, '.', '_', '~', '-'; not '.' or '..')."
        ),
    ),
    "apiKeyEnv": (
        Annotated[str, StringConstraints(pattern=ENV_NAME_PATTERN)],
        Field(
            default=DEFAULT_API_KEY_ENV,
            description="Environment variable holding the API key of the chatbot's account.",
        ),
    ),
}
_SPEC_FLEET = {
    "attributeSets": (
        tuple[Handle, ...],
        Field(
            default=(),
            description="AttributeSet documents whose customAttributes this chatbot declares too.",
        ),
    ),
    "lint": (Lint | None, Field(default=None)),
}
_DEFAULTS_SELECTOR = {
    "selector": (Selector, Field(description="The chatbots these defaults apply to, by label.")),
}
_DEFAULTS_FLEET = {
    "attributeSets": (
        tuple[Handle, ...],
        Field(default=(), description="AttributeSets every matching chatbot includes."),
    ),
    "lint": (Lint | None, Field(default=None)),
}


@dataclass(frozen=True)
class ChatbotModels:
    """The models of the two documents a kind's keys appear in, for one set of kinds."""

    document: type[BaseModel]  # a Chatbot document
    defaults: type[BaseModel]  # a Defaults document
    laid_under: tuple[str, ...]  # keys a Defaults document lays under the chatbot's own
    added: tuple[str, ...]  # keys whose Defaults' items come before the chatbot's own


def chatbot_document() -> ChatbotModels:
    """The models for the kinds registered now (``resources.registry``)."""
    return _chatbot_models(kinds())


@functools.lru_cache(maxsize=8)
def _chatbot_models(registered: tuple[ResourceKind, ...]) -> ChatbotModels:
    fields = [(key, f) for kind in registered for key, f in kind.spec_fields.items()]
    own = {key: (f.annotation, f.field) for key, f in fields}
    spec = _model("Spec", None, {**_SPEC_ID, **own, **_SPEC_FLEET})
    given = {key: f for key, f in fields if f.defaults is not None}
    laid = {key: f.defaults for key, f in given.items()}
    defaults_spec = _model("DefaultsSpec", None, {**_DEFAULTS_SELECTOR, **laid, **_DEFAULTS_FLEET})
    chatbot: Any = Literal["Chatbot"]
    defaults: Any = Literal["Defaults"]
    return ChatbotModels(
        document=_model("Document", "One chatbot, as desired.", _envelope(chatbot, spec)),
        defaults=_model(
            "DefaultsDocument",
            # As the class's docstring it was, line break included: the published schema.
            "Values for every chatbot the selector matches, applied in document order; a "
            "chatbot's\nown values win.",
            _envelope(defaults, defaults_spec),
        ),
        laid_under=tuple(key for key, f in given.items() if f.merge == "under"),
        added=tuple(key for key, f in given.items() if f.merge == "added"),
    )


def _envelope(kind: Any, spec: type[BaseModel]) -> dict[str, Any]:
    version: Any = Literal["botctl/v1"]
    return {
        "apiVersion": (version, ...),
        "kind": (kind, ...),
        "metadata": (Metadata, ...),
        "spec": (spec, ...),
    }


def _model(name: str, doc: str | None, fields: dict[str, Any]) -> type[BaseModel]:
    made: type[BaseModel] = create_model(name, __base__=_Strict, __doc__=doc, **fields)
    return made


Phrases = str | tuple[Annotated[str, StringConstraints(min_length=1)], ...]
MAX_REPEAT = 100
MAX_TURNS = 50


class Judge(_Strict):
    """A model-graded expectation: the rubric, the question and the answer are sent to a
    judge chatbot (``conversation.judge``), whose verdict decides."""

    chatbot: Handle = Field(description="The judge: a Chatbot document's metadata.name.")
    rubric: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="What a passing answer does, in words the judge grades by."
    )


class Expect(_Strict):
    """What one answer must be; every expectation given must hold."""

    contains: Phrases = Field(
        default=(), description="Text (or each of a list of texts) the answer must contain."
    )
    notContains: Phrases = Field(
        default=(), description="Text (or each of a list of texts) the answer must not contain."
    )
    ignoreCase: bool = Field(
        default=False, description="contains and notContains compare ignoring letter case."
    )
    matches: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        default=None,
        description="A regular expression (Python syntax) found somewhere in the answer.",
    )
    maxSeconds: Annotated[float, Field(gt=0)] | None = Field(
        default=None, description="Most seconds from sending the request to the whole answer."
    )
    maxSecondsToFirstEvent: Annotated[float, Field(gt=0)] | None = Field(
        default=None,
        description="With stream: true, most seconds from sending the request to the first "
        "server-sent event.",
    )
    json_: dict[str, Any] | None = Field(
        default=None,
        alias="json",
        description="The answer parses as JSON and matches this JSON Schema.",
    )
    answersIn: str | None = Field(
        default=None,
        description="The language the answer is written in (ISO 639-1 code), by botctl's "
        "heuristic (README, Conversation tests).",
    )
    similarTo: Annotated[str, StringConstraints(min_length=1)] | None = Field(
        default=None,
        description="An answer this one must be like: at least minSimilarity by botctl's "
        "similarity (the Jaccard index of character trigrams, README, Conversation tests).",
    )
    minSimilarity: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None,
        description=f"With similarTo: the least similarity that passes, 0 to 1 (default "
        f"{DEFAULT_MIN_SIMILARITY}).",
    )
    judge: Judge | None = Field(
        default=None,
        description="A chatbot of the configuration grades the answer against a rubric "
        "through the chat operation; it must answer VERDICT: PASS or VERDICT: FAIL.",
    )

    @field_validator("matches")
    @classmethod
    def _regex(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(f"not a regular expression ({exc})") from None
        return value

    @field_validator("json_")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is None:
            return None
        from jsonschema import SchemaError
        from jsonschema.validators import validator_for

        schema = as_json(value)  # YAML's sequences are tuples here; JSON Schema's are lists
        assert isinstance(schema, dict)
        try:
            validator_for(schema).check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a JSON Schema ({exc.message})") from None
        return schema

    @field_validator("answersIn")
    @classmethod
    def _language(cls, value: str | None) -> str | None:
        if value is not None and value not in language.LANGUAGES:
            known = ", ".join(sorted(language.LANGUAGES))
            raise ValueError(f"must be one of the languages botctl recognises ({known})")
        return value


class Message(_Strict):
    role: Literal["user", "assistant"]
    content: Annotated[str, StringConstraints(min_length=1)]
    expect: Expect | None = Field(
        default=None,
        description="On a user message that botctl sends (one not followed by an assistant "
        "message): what the answer must be.",
    )


class ConversationTestSpec(_Strict):
    selector: Selector | None = Field(
        default=None, description="The chatbots to test, by label (as Defaults select)."
    )
    chatbots: tuple[Handle, ...] | None = Field(
        default=None, description="The chatbots to test, by metadata.name."
    )
    conversation: tuple[Message, ...] = Field(
        description="The messages, in order. Each user message not followed by an assistant "
        "message is sent, with every message before it, and the answer taken into the "
        f"conversation; the last message must be a user message. At most {MAX_TURNS}."
    )
    model: Annotated[str, StringConstraints(pattern=contract.MODEL_ID_PATTERN)] | None = Field(
        default=None, description="The chat operation's model override (contract 2.2)."
    )
    temperature: Annotated[float, Field(ge=0, le=1)] | None = Field(
        default=None, description="The chat operation's temperature (0 to 1)."
    )
    stream: bool = Field(
        default=False, description="Ask for the answer as server-sent events (the SSE path)."
    )
    store: bool = Field(
        default=False,
        description="Keep the conversation on the service (sent with a conversationId); by "
        "default nothing is stored.",
    )
    repeat: Annotated[int, Field(ge=1, le=MAX_REPEAT)] = Field(
        default=1, description="Run the conversation this many times per chatbot."
    )
    passRate: Annotated[float, Field(ge=0, le=1)] = Field(
        default=1.0,
        description="Share of the repeated runs that must pass (0 to 1; default all).",
    )
    provenance: Provenance | None = Field(
        default=None,
        description="Where the conversation came from, for a test drawn from one "
        "(botctl conversations pull).",
    )


class Provenance(_Strict):
    """Where a test drawn from a real conversation came from (``botctl conversations pull``):
    kept for the reviewer, never sent."""

    conversationId: Annotated[str, StringConstraints(min_length=1)]
    chatbot: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="The chatbot the conversation was held with (metadata.name when pulled)."
    )
    chatbotId: Annotated[str, StringConstraints(min_length=1)] | None = None
    date: Annotated[str, StringConstraints(min_length=1)] = Field(
        description="When the conversation started (the service's created_at)."
    )
    source: str | None = Field(default=None, description="The conversation's source (4.6).")
    pulled: str | None = Field(default=None, description="When it was pulled (UTC, ISO 8601).")


class ConversationTestDocument(_Strict):
    """A conversation with chatbots through the chat operation, and what the answers must be."""

    apiVersion: Literal["botctl/v1"]
    kind: Literal["ConversationTest"]
    metadata: Metadata
    spec: ConversationTestSpec


def may_hold_secret(path: tuple[str | int, ...]) -> bool:
    """Where a document may use a ``${secret:...}``: values botctl sends, which it can mask
    and keep as fingerprints (``botctl.sealing``), never the names that identify things. Each
    kind says where in its keys of ``spec`` (``ResourceKind.may_hold_secret``)."""
    return path[:1] == ("spec",) and any(kind.may_hold_secret(path[1:]) for kind in kinds())


def secret_places() -> str:
    """The error for a ``${secret:...}`` anywhere else, naming every place it may stand."""
    places = " or in ".join(kind.secret_places for kind in kinds() if kind.secret_places)
    return (
        f"${{secret:...}} may only be used in {places}: elsewhere the value is a name or an "
        "id, shown in every plan and kept in the state"
    )


MODEL_DESCRIPTION = (
    "Model identifier (contract 2.2). Editors complete the contract's list; any identifier of "
    "the same shape passes this schema, because `botctl validate --allow-unknown-models` "
    "accepts a model released after this botctl (without it, botctl refuses one not listed)."
)


def json_schema() -> dict[str, Any]:
    """JSON Schema (2020-12) of one document of any kind: the models' own schema, plus what
    the models cannot express, the contract's model list and the warning codes offered for
    completion. The only generator of schemas/botctl.schema.json (a test compares the two)."""
    models = chatbot_document()
    documents: Any = Annotated[
        models.document | AttributeSetDocument | models.defaults | ConversationTestDocument,
        Field(discriminator="kind"),
    ]
    adapter: TypeAdapter[Any] = TypeAdapter(documents)
    schema = adapter.json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "botctl document (Chatbot, AttributeSet, Defaults or ConversationTest)"
    model = schema["$defs"]["ChatbotSettings"]["properties"]["model"]
    model["anyOf"].insert(0, {"enum": list(contract.SETTINGS_MODELS)})
    model["description"] = MODEL_DESCRIPTION
    schema["$defs"]["Lint"]["properties"]["disable"]["items"] = code_items()
    return schema


def code_items() -> dict[str, Any]:
    """The schema of one warning code, as its number or its name."""
    return {"enum": [word for c in lint.CODES for word in (c.code, c.name)], "type": "string"}
