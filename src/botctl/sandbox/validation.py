"""Strict validation of request bodies: contract 2.1-2.4 (settings) and 2.8 (attributes).

No coercion anywhere: a bool is not an integer, "0.2" is not a number, null is not a string.
Unknown fields are refused rather than ignored, so a client typo fails loudly here as it
would on a strict service. Each failure carries a `detail` (field path and reason) which the
sandbox keeps in its request log; the v1 response itself says only `Invalid request data`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Collection, Mapping
from typing import Any

from botctl import contract

JSON = dict[str, Any]
Check = Callable[[Any, str], Any]


class Invalid(ValueError):
    """A body that breaks the contract; `detail` names the field and the rule."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


def is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: object) -> bool:
    # json.loads accepts NaN and Infinity; neither is a JSON number nor within any range.
    return (is_int(value) or isinstance(value, float)) and math.isfinite(float(value))  # type: ignore[arg-type]


def string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise Invalid(f"{where}: must be a string")
    return value


def boolean(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise Invalid(f"{where}: must be a boolean")
    return value


def non_negative_int(value: Any, where: str) -> int:
    # Negative limits or delays have no meaning; the contract is silent, so refuse them.
    if not is_int(value) or value < 0:
        raise Invalid(f"{where}: must be an integer >= 0")
    return int(value)


def strings(value: Any, where: str) -> list[str]:
    if not isinstance(value, list):
        raise Invalid(f"{where}: must be an array of strings")
    return [string(item, f"{where}[{i}]") for i, item in enumerate(value)]


def one_of(*allowed: str) -> Check:
    def check(value: Any, where: str) -> str:
        if not isinstance(value, str) or value not in allowed:
            raise Invalid(f"{where}: must be one of {', '.join(allowed)}")
        return value

    return check


def temperature(value: Any, where: str) -> float | int:
    if not is_number(value) or not contract.TEMP_MIN <= value <= contract.TEMP_MAX:
        raise Invalid(f"{where}: must be a number between 0 and 1")
    return value  # type: ignore[no-any-return]


def hex_colour(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(contract.HEX_COLOUR_PATTERN, value):
        raise Invalid(f"{where}: must be a hex colour code such as #1a2b3c")
    return value


def obj(value: Any, where: str, fields: Mapping[str, Check]) -> JSON:
    """An object whose keys are all known and whose values all pass their check."""
    if not isinstance(value, dict):
        raise Invalid(f"{where}: must be an object")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise Invalid(f"{where}: unknown field {unknown[0]!r}")
    prefix = f"{where}." if where else ""
    return {k: fields[k](v, f"{prefix}{k}") for k, v in value.items()}


def integer(value: Any, where: str) -> int:
    if not is_int(value):
        raise Invalid(f"{where}: must be an integer")
    return int(value)


_LEAD_FIELD: dict[str, Check] = {"active": boolean, "label": string}


def _lead_field(value: Any, where: str) -> JSON:
    return obj(value, where, _LEAD_FIELD)


_LEAD_FORM: dict[str, Check] = {
    "title": string,
    "name": _lead_field,
    "email": _lead_field,
    "phone": _lead_field,
}


class Rules:
    """The settings checks of one sandbox: the fixed shapes of contract 2.1-2.4 plus what
    its configuration adds (models released after the contract, `--extra-model`).

    `dashboard` rules are those of a change made "in the dashboard" (admin API, seed): the
    dashboard may store a negative ipLimit, ipLimitTimeframe or autoOpenChatWindowAfter,
    which the contract does not bound but the v1 write refuses (a negative count or delay has
    no meaning the contract gives), so that a client can meet a value it cannot write back.
    """

    def __init__(
        self, models: Collection[str] = contract.SETTINGS_MODELS, *, dashboard: bool = False
    ) -> None:
        count = integer if dashboard else non_negative_int
        styles: dict[str, Check] = {
            "theme": one_of(*contract.THEMES),
            "buttonColor": hex_colour,
            "displayName": string,
            "alignChatButton": one_of(*contract.ALIGNMENTS),
            "userMessageColor": hex_colour,
            "autoOpenChatWindowAfter": count,
        }
        self.settings_fields: dict[str, Check] = {
            "name": string,
            "instructions": string,
            "initialMessages": strings,
            "suggestedMessages": strings,
            "visibility": one_of(*contract.VISIBILITIES),
            "domains": strings,
            "onlyAllowOnAddedDomains": boolean,
            "ipLimit": count,
            "ipLimitTimeframe": count,
            "ipLimitMessage": string,
            "model": one_of(*models),
            "temp": temperature,
            "styles": lambda v, w: obj(v, w, styles),
            "collectCustomerInformation": lambda v, w: obj(v, w, _LEAD_FORM),
        }

    def settings(self, value: Any, where: str = "") -> JSON:
        """Contract 2.1 without `chatbotId`: every given field checked, none required."""
        return obj(value, where, self.settings_fields)

    def settings_update(self, body: JSON) -> tuple[str, JSON]:
        """Contract 4.1: `chatbotId` required and a string; the rest as in `settings`."""
        chatbot_id = body.get("chatbotId")
        if not isinstance(chatbot_id, str) or not chatbot_id:
            raise Invalid("chatbotId: required, a non-empty string")
        rest = {k: v for k, v in body.items() if k != "chatbotId"}
        return chatbot_id, self.settings(rest)


def attribute_name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(contract.ATTRIBUTE_NAME_PATTERN, value):
        raise Invalid(f"{where}: must match {contract.ATTRIBUTE_NAME_PATTERN}")
    return value


_ATTRIBUTE_CREATE: dict[str, Check] = {
    "name": attribute_name,
    "type": one_of(*contract.ATTRIBUTE_TYPES),
    "label": string,
    "description": string,
    "archived": boolean,
}
_ATTRIBUTE_UPDATE: dict[str, Check] = {"label": string, "description": string, "archived": boolean}


def attribute_create(value: Any, where: str = "") -> JSON:
    """Contract 2.8/4.3 (API-NOTES: name and type required) -> a full attribute record.

    An omitted label or description is stored as null rather than invented.
    """
    fields = obj(value, where, _ATTRIBUTE_CREATE)
    prefix = f"{where}." if where else ""
    for required in ("name", "type"):
        if required not in fields:
            raise Invalid(f"{prefix}{required}: required")
    return {
        "name": fields["name"],
        "label": fields.get("label"),
        "type": fields["type"],
        "description": fields.get("description"),
        "archived": fields.get("archived", False),
    }


def attribute_update(value: Any, where: str = "") -> JSON:
    """Contract 4.4: only label, description and archived; `name`/`type` are refused."""
    return obj(value, where, _ATTRIBUTE_UPDATE)


def name_taken(name: str, existing: list[JSON]) -> bool:
    """Duplicate names are refused case-insensitively (archived included): the contract
    calls the name a unique identifier and is silent on case, so the strict reading wins."""
    return any(isinstance(a, dict) and str(a.get("name")).lower() == name.lower() for a in existing)
