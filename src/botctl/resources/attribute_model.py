"""The custom contact attribute's model (contract 2.8), and what the attribute kind's plans
share with the renames they hold (``resources.renames``): a change of an attribute, its record
in the state, the body of an update. Its own module so that ``resources.attributes`` (the kind)
and ``resources.renames`` both build on it, and neither on the other."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from botctl import contract
from botctl.plan import Action, Change, Confidence
from botctl.sealing import mask_beside
from botctl.values import JsonValue, mask_secrets

# The kind's name, as its changes, operations and dependencies carry it (``Change.resource``).
RESOURCE = "attribute"

AttributeName = Annotated[str, StringConstraints(pattern=contract.ATTRIBUTE_NAME_PATTERN)]
AttributeType = Literal["text", "number", "boolean", "date"]
# The fields a person manages (and a PUT sends); name and type are identity.
MANAGED_FIELDS = ("label", "description", "archived")


class CustomAttribute(BaseModel):
    """Contract 2.8. On the desired side ``label``/``description`` of ``None`` are not managed
    (a create still sends a label: the attribute's name)."""

    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, regex_engine=contract.PATTERN_ENGINE
    )

    name: AttributeName
    type: AttributeType
    label: str | None = None
    description: str | None = None
    archived: bool = False
    # Declared only, never sent or recorded (excluded from every dump): a rename that moves
    # the contacts' values from the old name (resources.renames), and consent to archive an
    # attribute contacts still carry values for.
    renamedFrom: AttributeName | None = Field(
        default=None,
        exclude=True,
        description="The attribute this one replaces: botctl creates this one, copies every "
        "contact's value from the old name to this one, verifies, then archives the old one.",
    )
    archiveWithValues: bool = Field(
        default=False,
        exclude=True,
        description="Archiving this attribute may retire the values contacts carry for it "
        "(else a plan that archives it while contacts carry values fails).",
    )

    def to_json(self) -> dict[str, JsonValue]:
        return self.model_dump(mode="json", exclude_none=True)

    def managed(self) -> dict[str, JsonValue]:
        """The fields this declaration manages: ``archived`` always, label and description
        when declared."""
        fields: dict[str, JsonValue] = {"archived": self.archived}
        if self.label is not None:
            fields["label"] = self.label
        if self.description is not None:
            fields["description"] = self.description
        return fields

    def create_body(self) -> dict[str, JsonValue]:
        """The attribute as a create sends it: always with a label (the name when none is
        declared: an older guide of the service requires one)."""
        body = self.to_json()
        body.setdefault("label", self.name)
        body["archived"] = self.archived
        return body


def attribute_change(
    name: str,
    action: Action,
    before: dict[str, JsonValue] | None,
    after: dict[str, JsonValue],
    confidence: Confidence,
    secrets: frozenset[str],
) -> Change:
    return Change(
        resource=RESOURCE,
        path=name,
        action=action,
        before=mask_beside(before, after, secrets),
        after=mask_secrets(after, secrets),
        confidence=confidence,
    )


def attribute_record(attribute: CustomAttribute) -> dict[str, JsonValue]:
    # State keeps what botctl manages: identity plus the declared fields (a label the YAML
    # does not declare is not botctl's, so a dashboard edit of it is not drift).
    return {"name": attribute.name, "type": attribute.type, **attribute.managed()}


def update_body(attribute: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """The PUT that makes an existing attribute as ``attribute`` describes it; ``archived``
    always explicit (the PUT's documented default is false: omitting it would un-archive)."""
    body = {k: attribute[k] for k in ("label", "description") if attribute.get(k) is not None}
    body["archived"] = bool(attribute.get("archived"))
    return body
