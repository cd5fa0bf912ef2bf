"""The custom contact attribute's model (contract 2.8), and what the attribute kind's plans
share with the renames they hold (``resources.renames``): a change of an attribute, its record
in the state, the body of an update. Its own module so that ``resources.attributes`` (the kind)
and ``resources.renames`` both build on it, and neither on the other."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Annotated, Any, Literal

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

    @cached_property
    def _json(self) -> dict[str, JsonValue]:
        # Worked out once: frozen, and (interned) one instance serves every chatbot holding it.
        return self.model_dump(mode="json", exclude_none=True)

    @cached_property
    def _managed(self) -> dict[str, JsonValue]:
        fields: dict[str, JsonValue] = {"archived": self.archived}
        if self.label is not None:
            fields["label"] = self.label
        if self.description is not None:
            fields["description"] = self.description
        return fields

    def to_json(self) -> dict[str, JsonValue]:
        return dict(self._json)  # a copy: the caller may change it

    def managed(self) -> dict[str, JsonValue]:
        """The fields this declaration manages: ``archived`` always, label and description
        when declared."""
        return dict(self._managed)

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


# One instance per distinct attribute: declared, read and recorded, a fleet's attributes are
# mostly the same values (and the same across its chatbots), so a plan of 5,000 chatbots holds
# a few distinct ones rather than 300,000 copies. Frozen, so sharing one is safe; bounded, so
# a long-running agent does not keep every attribute it ever saw.
_INTERNED: dict[Any, CustomAttribute] = {}
_INTERNED_MAX = 100_000


def interned(attribute: CustomAttribute) -> CustomAttribute:
    """The one instance equal to ``attribute`` (itself, the first time)."""
    # By its fields' values (each typed by the model): a tuple hashes and compares in C.
    key = _FIELDS(attribute.__dict__)
    found = _INTERNED.get(key)
    if found is None:
        if len(_INTERNED) >= _INTERNED_MAX:
            _INTERNED.clear()
        found = _INTERNED[key] = attribute
    return found


_FIELDS = operator.itemgetter(*CustomAttribute.model_fields)


class ParsedOnce:
    """Attribute records, by their exact content (each value with its type: ``True`` is not
    ``1``), to the one model each parses to by ``parse``: a fleet's chatbots hold the same
    attributes, read from the service or recorded in the state, parsed once. A record ``parse``
    refuses raises as it does, every time; one holding a value that cannot be a key (a list,
    a mapping) is parsed each time. Bounded."""

    def __init__(self, parse: Callable[[Mapping[str, Any]], CustomAttribute]) -> None:
        self._parse = parse
        self._parsed: dict[tuple[tuple[str, type, Any], ...], CustomAttribute] = {}

    def known(self, record: Any) -> CustomAttribute | None:
        """The model of a record parsed before, else None (no parsing)."""
        if not isinstance(record, dict):
            return None
        try:
            return self._parsed.get(tuple((k, type(v), v) for k, v in record.items()))
        except TypeError:
            return None

    def __call__(self, record: Mapping[str, Any]) -> CustomAttribute:
        try:
            key = tuple((k, type(v), v) for k, v in record.items())
            found = self._parsed.get(key)
        except TypeError:
            return self._parse(record)
        if found is None:
            if len(self._parsed) >= _PARSED_MAX:
                self._parsed.clear()
            found = self._parsed[key] = self._parse(record)
        return found


_PARSED_MAX = 50_000
