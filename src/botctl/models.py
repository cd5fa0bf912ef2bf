"""Canonical models shared by both sides of the diff: Desired (from YAML) and Live (from the
service) use the same types, so the diff compares like with like.

Settings use the camelCase names of the settings update operation (contract 2.1-2.4). Every
settings field is optional: ``None`` means "not managed" on the desired side and "not
observable" on the live side. Identity keys: a chatbot by its ``chatbotId``, an attribute by
``name`` within its chatbot.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from botctl import contract

JsonValue = Any  # a value as it appears in JSON: str, int, float, bool, None, list, dict

Visibility = Literal["public", "private"]
Theme = Literal["light", "dark"]
Alignment = Literal["left", "right"]
AttributeType = Literal["text", "number", "boolean", "date"]
HexColour = Annotated[str, StringConstraints(pattern=contract.HEX_COLOUR_PATTERN)]
AttributeName = Annotated[str, StringConstraints(pattern=contract.ATTRIBUTE_NAME_PATTERN)]
NonNegativeInt = Annotated[int, Field(ge=0)]

DEFAULT_API_KEY_ENV = "BOTCTL_API_KEY"


class _Strict(BaseModel):
    # No NaN or infinity: YAML spells them .nan and .inf, and no setting means either.
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, allow_inf_nan=False)


class Styles(_Strict):
    """Contract 2.3."""

    theme: Theme | None = None
    buttonColor: HexColour | None = None
    displayName: str | None = None
    alignChatButton: Alignment | None = None
    userMessageColor: HexColour | None = None
    autoOpenChatWindowAfter: NonNegativeInt | None = None


class LeadField(_Strict):
    """One field of the lead form (contract 2.4)."""

    active: bool | None = None
    label: str | None = None


class CollectCustomerInformation(_Strict):
    """Contract 2.4."""

    title: str | None = None
    name: LeadField | None = None
    email: LeadField | None = None
    phone: LeadField | None = None


class ChatbotSettings(_Strict):
    """The writable settings of a chatbot (contract 2.1), minus ``chatbotId``.

    ``model`` is a plain string here: whether it must be one of the contract's list is a
    policy of the loader (with an explicit opt-out), since the service's list moves often.
    """

    name: str | None = None
    instructions: str | None = None
    initialMessages: tuple[str, ...] | None = None
    suggestedMessages: tuple[str, ...] | None = None
    visibility: Visibility | None = None
    domains: tuple[str, ...] | None = None
    onlyAllowOnAddedDomains: bool | None = None
    ipLimit: NonNegativeInt | None = None
    ipLimitTimeframe: NonNegativeInt | None = None
    ipLimitMessage: str | None = None
    model: str | None = None
    temp: Annotated[float, Field(ge=contract.TEMP_MIN, le=contract.TEMP_MAX)] | None = None
    styles: Styles | None = None
    collectCustomerInformation: CollectCustomerInformation | None = None

    def to_json(self) -> dict[str, JsonValue]:
        """The managed (or observed) fields as JSON, nested objects as dicts, lists as lists."""
        return self.model_dump(mode="json", exclude_none=True)


class CustomAttribute(_Strict):
    """Contract 2.8. On the desired side ``label``/``description`` of ``None`` are not managed
    (a create still sends a label: the attribute's name)."""

    name: AttributeName
    type: AttributeType
    label: str | None = None
    description: str | None = None
    archived: bool = False

    def to_json(self) -> dict[str, JsonValue]:
        return self.model_dump(mode="json", exclude_none=True)


class BotSpec(BaseModel):
    """One chatbot as declared in YAML (one document of kind Chatbot)."""

    model_config = ConfigDict(frozen=True)

    name: str  # metadata.name: the handle in plans, state and --target
    chatbot_id: str
    labels: dict[str, str] = Field(default_factory=dict)
    api_key_env: str = DEFAULT_API_KEY_ENV
    settings: ChatbotSettings = Field(default_factory=ChatbotSettings)
    attributes: tuple[CustomAttribute, ...] = ()
    prune: bool = False
    # spec.safety.maxArchivePercent: this document's own cap on archiving in one run.
    max_archive_percent: float | None = None
    source: str = ""  # "file:line" of the document, for messages
    # Resolved values of ${VAR}s the user marked secret: masked wherever a plan is shown.
    secret_values: frozenset[str] = frozenset()


class Desired(BaseModel):
    model_config = ConfigDict(frozen=True)

    bots: tuple[BotSpec, ...] = ()
    warnings: tuple[str, ...] = ()  # located warnings from the loader, already formatted


class LiveBot(BaseModel):
    """What the service lets botctl observe of one chatbot right now.

    ``settings`` holds only the fields the read returned (others are not observable);
    ``settings_readable`` is false when the chatbot list could not be read at all.
    ``attributes`` is ``None`` when the attribute list could not be read.
    ``exists`` is false when a successful chatbot list did not contain the chatbot.
    """

    model_config = ConfigDict(frozen=True)

    chatbot_id: str
    exists: bool = True
    settings_readable: bool = False
    settings: dict[str, JsonValue] = Field(default_factory=dict)
    attributes: dict[str, CustomAttribute] | None = None


class Live(BaseModel):
    model_config = ConfigDict(frozen=True)

    bots: dict[str, LiveBot] = Field(default_factory=dict)  # by chatbot id


def flatten(value: dict[str, JsonValue], prefix: str = "") -> dict[str, JsonValue]:
    """Nested settings dict -> dotted leaf paths (``styles.buttonColor``); lists are leaves."""
    flat: dict[str, JsonValue] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, dict):
            flat.update(flatten(item, f"{path}."))
        else:
            flat[path] = item
    return flat
