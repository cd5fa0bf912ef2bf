"""The state's sealed values, as the diff compares them.

A recorded value that held a secret is known only by its fingerprint (``botctl.sealing``).
Comparing it means fingerprinting the candidates: the declared value, and the value the
service was read holding. A candidate with the same fingerprint *is* the recorded value, now
known in clear (in memory only); when none matches, the recorded value is a secret that is
neither (rotated since it was applied, say), and a stand-in that equals neither and shows as
``(secret)`` takes its place, so the diff still says ``assumed`` and sends the declared value.
Pure.
"""

from __future__ import annotations

from dataclasses import replace

from pydantic import ValidationError

from botctl.models import BotRecord, BotSpec, LiveBot
from botctl.resources.attributes import CustomAttribute
from botctl.resources.settings import ChatbotSettings, with_leaves
from botctl.sealing import Sealed
from botctl.values import SECRET_MASK, JsonValue

# What a sealed value that matches no candidate is compared and shown as: the mask itself, in
# the shape the field takes. A field that can hold neither (a colour, an enumeration) is left
# unrecorded: its value is then unknown, and sent.
_STAND_INS: tuple[JsonValue, ...] = (SECRET_MASK, (SECRET_MASK,))


def recorded_view(
    record: BotRecord | None, spec: BotSpec, live: LiveBot | None, salt: str | None
) -> BotRecord | None:
    """``record`` with every sealed value replaced (see the module's docstring)."""
    if record is None or salt is None or not (record.sealed_settings or record.sealed_attributes):
        return record
    return replace(
        record,
        settings=_settings(record, spec, live, salt),
        attributes=_attributes(record, spec, live, salt),
        sealed_settings={},
        sealed_attributes={},
    )


def _settings(record: BotRecord, spec: BotSpec, live: LiveBot | None, salt: str) -> ChatbotSettings:
    declared = spec.settings.leaves
    observed = live.settings.leaves if live is not None and live.settings is not None else {}
    settings = record.settings
    for path, sealed in sorted(record.sealed_settings.items()):
        known = _known(sealed, salt, declared.get(path), observed.get(path))
        for value in (known,) if known is not None else _STAND_INS:
            try:
                settings = with_leaves(settings, {path: value})
            except ValidationError:
                continue
            break
    return settings


def _attributes(
    record: BotRecord, spec: BotSpec, live: LiveBot | None, salt: str
) -> dict[str, CustomAttribute]:
    attributes = dict(record.attributes)
    declared = {a.name: a.to_json() for a in spec.attributes}
    observed = live.attributes if live is not None and live.attributes is not None else {}
    for name, fields in record.sealed_attributes.items():
        if name not in attributes:
            continue
        document = attributes[name].to_json()
        seen = observed[name].to_json() if name in observed else {}
        for key, sealed in fields.items():
            known = _known(sealed, salt, declared.get(name, {}).get(key), seen.get(key))
            document[key] = known if known is not None else SECRET_MASK
        attributes[name] = CustomAttribute.model_validate(document)
    return attributes


def _known(sealed: Sealed, salt: str, *candidates: JsonValue) -> JsonValue:
    """The first candidate the sealed value was made from, else None."""
    return next((c for c in candidates if c is not None and sealed.matches(c, salt)), None)
