"""The Plan: what botctl will change, how sure it is of each current value, and the exact
writes that make it so. Frozen, deterministically sorted, serialisable (``to_dict`` /
``plan_from_dict``) and checksummed so a saved plan is applied exactly as reviewed.

A plan has two views of the same intent:

* ``changes``: one ``Change`` per managed leaf (settings, dotted path) or per attribute; what a
  reviewer reads and what the JSON contract publishes.
* ``operations``: the requests ``apply`` sends, one settings update per chatbot and one per
  attribute, each with its body and the record to keep in state once it succeeded.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from botctl.errors import PlanError
from botctl.models import JsonValue

FORMAT_VERSION = 1

Action = Literal["create", "update", "archive", "unarchive"]
Resource = Literal["settings", "attribute"]
Confidence = Literal["verified", "assumed", "unknown"]
OperationKind = Literal[
    "update_settings", "create_attribute", "update_attribute", "ensure_attribute"
]

ACTIONS: tuple[Action, ...] = ("create", "update", "archive", "unarchive")
_RESOURCE_ORDER = {"settings": 0, "attribute": 1}
_KIND_ORDER = {
    "update_settings": 0,
    "create_attribute": 1,
    "ensure_attribute": 1,
    "update_attribute": 1,
}

# Flags a change may carry; renderers show each prominently.
FLAG_CUTS_OFF_USERS = "cuts-off-users"


@dataclass(frozen=True)
class Change:
    chatbot_id: str
    bot: str
    resource: Resource
    key: str  # settings: dotted path (styles.buttonColor); attribute: its name
    action: Action
    before: JsonValue
    after: JsonValue
    confidence: Confidence
    flags: tuple[str, ...] = ()

    def sort_key(self) -> tuple[str, int, str]:
        return (self.bot, _RESOURCE_ORDER[self.resource], self.key)


@dataclass(frozen=True)
class Operation:
    """One request of the apply. ``ensure_attribute`` is an update that falls back to a create
    on 404: used when botctl cannot know whether the attribute exists (no reads, no state), so
    that it can never create an attribute twice."""

    chatbot_id: str
    bot: str
    api_key_env: str
    kind: OperationKind
    key: str  # "settings" or the attribute name
    body: dict[str, JsonValue]
    record: dict[str, JsonValue]  # what state keeps once this succeeded
    # ensure_attribute only: the create body, sent when the update (``body``) answers 404.
    fallback: dict[str, JsonValue] | None = None

    def sort_key(self) -> tuple[str, int, str]:
        return (self.bot, _KIND_ORDER[self.kind], self.key)

    @property
    def label(self) -> str:
        return f"{self.bot}: {self.kind} {self.key}"


@dataclass(frozen=True)
class Dependency:
    """A verified live value the plan relies on; a saved plan is stale once it moved.
    ``value`` is None for "absent" (e.g. the attribute did not exist)."""

    chatbot_id: str
    resource: Resource
    key: str
    value: JsonValue


@dataclass(frozen=True)
class Unmanaged:
    chatbot_id: str
    bot: str
    name: str  # a live attribute botctl never managed and the YAML does not declare


@dataclass(frozen=True)
class BotRef:
    """A chatbot the plan covers: enough to re-read it when a saved plan is applied."""

    name: str
    chatbot_id: str
    api_key_env: str


@dataclass(frozen=True)
class Plan:
    changes: tuple[Change, ...] = ()
    operations: tuple[Operation, ...] = ()
    unmanaged: tuple[Unmanaged, ...] = ()
    unverified: int = 0  # managed values whose current value could not be read
    depends_on: tuple[Dependency, ...] = ()
    state_serial: int | None = None
    state_lineage: str | None = None
    warnings: tuple[str, ...] = ()
    bots: tuple[BotRef, ...] = field(default=())  # every bot the plan covers, in order
    # Safety caps this plan exceeds; apply refuses it unless forced (see SafetyPolicy).
    violations: tuple[str, ...] = ()
    # Values marked ${secret:...}: masked wherever the plan or its requests are shown. The plan
    # file keeps them (its requests carry them anyway) so `apply --plan --debug` masks them too.
    secrets: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        # Deterministic order whatever the producer did: same input, byte-identical output.
        object.__setattr__(self, "changes", tuple(sorted(self.changes, key=Change.sort_key)))
        object.__setattr__(
            self, "operations", tuple(sorted(self.operations, key=Operation.sort_key))
        )
        object.__setattr__(
            self, "unmanaged", tuple(sorted(self.unmanaged, key=lambda u: (u.bot, u.name)))
        )
        object.__setattr__(
            self,
            "depends_on",
            tuple(sorted(self.depends_on, key=lambda d: (d.chatbot_id, d.resource, d.key))),
        )
        for change in self.changes:
            if change.action == "create" and change.resource != "attribute":
                raise PlanError(f"{change.bot}: settings cannot be created, only updated")

    @property
    def empty(self) -> bool:
        return not self.operations

    def summary(self) -> dict[str, int]:
        counts = Counter(change.action for change in self.changes)
        result: dict[str, int] = {action: counts.get(action, 0) for action in ACTIONS}
        result["unmanaged"] = len(self.unmanaged)
        result["unverified"] = self.unverified
        result["operations"] = len(self.operations)
        return result

    def flagged(self, flag: str) -> tuple[Change, ...]:
        return tuple(c for c in self.changes if flag in c.flags)

    def to_dict(self) -> dict[str, Any]:
        """The published JSON contract (format_version 1); see README "JSON plan"."""
        return {
            "format_version": FORMAT_VERSION,
            "changes": [change_to_dict(c) for c in self.changes],
            "unmanaged": [
                {"chatbotId": u.chatbot_id, "bot": u.bot, "name": u.name} for u in self.unmanaged
            ],
            "summary": self.summary(),
            "warnings": list(self.warnings),
            "violations": list(self.violations),
        }


def change_to_dict(change: Change) -> dict[str, Any]:
    return {
        "chatbotId": change.chatbot_id,
        "bot": change.bot,
        "resource": change.resource,
        "key": change.key,
        "action": change.action,
        "before": change.before,
        "after": change.after,
        "confidence": change.confidence,
        "flags": list(change.flags),
    }


# --- safety caps --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SafetyPolicy:
    """A plan that archives too much is refused (in plan and apply alike) unless forced:
    more than ``max_archive_percent`` of a chatbot's active attributes when it has at least
    ``min_attributes``, or more than ``max_archives`` across the run (None = no run cap)."""

    max_archive_percent: float = 30.0
    min_attributes: int = 10
    max_archives: int | None = 50


def safety_violations(
    changes: tuple[Change, ...],
    active_attributes: dict[str, int],
    policy: SafetyPolicy,
    overrides: dict[str, float],
) -> tuple[str, ...]:
    """``active_attributes`` and ``overrides`` are by bot name."""
    archives = Counter(c.bot for c in changes if c.action == "archive")
    found = []
    for bot, count in sorted(archives.items()):
        active = active_attributes.get(bot, 0)
        limit = overrides.get(bot, policy.max_archive_percent)
        if active >= policy.min_attributes and count * 100 > limit * active:
            found.append(
                f"{bot}: archives {count} of its {active} active attributes "
                f"({count * 100 / active:.0f}% > {limit:g}%)"
            )
    total = sum(archives.values())
    if policy.max_archives is not None and total > policy.max_archives:
        found.append(f"the run archives {total} attributes (more than {policy.max_archives})")
    return tuple(found)


# --- plan files ---------------------------------------------------------------------------------

PLAN_FILE_KIND = "botctl-plan"


def plan_to_file_dict(plan: Plan) -> dict[str, Any]:
    """Everything apply needs, plus a checksum over it: a saved plan is applied as reviewed."""
    body: dict[str, Any] = {
        "kind": PLAN_FILE_KIND,
        "format_version": FORMAT_VERSION,
        "plan": plan.to_dict(),
        "operations": [asdict(op) for op in plan.operations],
        "depends_on": [asdict(dep) for dep in plan.depends_on],
        "state": {"serial": plan.state_serial, "lineage": plan.state_lineage},
        "bots": [asdict(ref) for ref in plan.bots],
        "unverified": plan.unverified,
        "violations": list(plan.violations),
        "secrets": sorted(plan.secrets),
    }
    body["checksum"] = _checksum(body)
    return body


def plan_from_file_dict(data: Any) -> Plan:
    if not isinstance(data, dict) or data.get("kind") != PLAN_FILE_KIND:
        raise PlanError("not a botctl plan file")
    if data.get("format_version") != FORMAT_VERSION:
        raise PlanError(
            f"plan file format_version {data.get('format_version')!r} is not supported "
            f"(this botctl writes and reads {FORMAT_VERSION}); run `botctl plan --out` again"
        )
    expected = data.get("checksum")
    unsigned = {k: v for k, v in data.items() if k != "checksum"}
    if expected != _checksum(unsigned):
        raise PlanError("plan file checksum does not match: it was edited or truncated")
    try:
        changes = tuple(
            Change(
                chatbot_id=c["chatbotId"],
                bot=c["bot"],
                resource=c["resource"],
                key=c["key"],
                action=c["action"],
                before=c["before"],
                after=c["after"],
                confidence=c["confidence"],
                flags=tuple(c.get("flags", ())),
            )
            for c in data["plan"]["changes"]
        )
        return Plan(
            changes=changes,
            operations=tuple(Operation(**op) for op in data["operations"]),
            unmanaged=tuple(
                Unmanaged(chatbot_id=u["chatbotId"], bot=u["bot"], name=u["name"])
                for u in data["plan"]["unmanaged"]
            ),
            unverified=int(data["unverified"]),
            depends_on=tuple(Dependency(**dep) for dep in data["depends_on"]),
            state_serial=data["state"]["serial"],
            state_lineage=data["state"]["lineage"],
            warnings=tuple(data["plan"].get("warnings", ())),
            bots=tuple(BotRef(**ref) for ref in data["bots"]),
            violations=tuple(data["violations"]),
            secrets=frozenset(data["secrets"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PlanError(f"plan file is malformed: {exc}") from None


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
