"""What every resource kind contributes to one chatbot's plan, and small pieces the kinds share."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from botctl.plan import Dependency, Operation, Unmanageable, Unmanaged
from botctl.sealing import FingerprintKey, Sealed
from botctl.values import JsonValue


@dataclass
class BotPlan:
    """One chatbot's part of a plan, filled in by each resource kind's diff rules."""

    operations: list[Operation] = field(default_factory=list)
    unmanaged: list[Unmanaged] = field(default_factory=list)
    unmanageable: list[Unmanageable] = field(default_factory=list)
    depends_on: list[Dependency] = field(default_factory=list)
    unverified: int = 0  # managed values whose current value could not be read
    active_attributes: int = 0  # attributes not archived now (verified or assumed)
    problems: list[str] = field(default_factory=list)  # changes the API cannot make
    warnings: list[str] = field(default_factory=list)  # what a reviewer should know
    missing: bool = False  # the service does not list this chatbot


def known_value(sealed: Sealed, key: FingerprintKey, *candidates: JsonValue) -> JsonValue:
    """The first candidate a recorded fingerprint was made from (under the state's ``key``),
    else None: a sealed value known in clear again (in memory only)."""
    return next((c for c in candidates if c is not None and sealed.matches(c, key)), None)


def rekeyed(sealed: Sealed, old: FingerprintKey | None, candidate: JsonValue) -> JsonValue:
    """The value a fingerprint made under ``old`` stands for, when it is ``candidate`` (the
    value declared at its place); None when it is not, or ``old`` is lost."""
    if old is None or candidate is None or not sealed.matches(candidate, old):
        return None
    return candidate


def shown_in_comment(value: object, limit: int = 200) -> str:
    """A value on one line of ASCII, shortened to ``limit`` characters: no newline or line
    separator it holds can end a YAML comment early (export's notes)."""
    text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."
