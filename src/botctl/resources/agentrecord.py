"""What ``botctl agent`` keeps in the state about itself: whether it is suspended (since when, by
whom, why) and, per chatbot, the revision whose apply last changed it and when. Kept in the
state file's ``agent`` section, apart from the records of settings and attributes: it is about
the agent's runs, not a value of the service (as ``rollout`` and ``previews`` are).

It lives in the state so that it holds whichever replica reconciles: the lease holder writes
it (under its lease), and a replica that takes the lease over reads it first. Written only
when it holds something.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Suspension:
    since: str  # UTC ISO 8601
    by: str | None = None  # who asked (``botctl agent suspend --by``, default their user name)
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"since": self.since, "by": self.by, "reason": self.reason}


@dataclass(frozen=True)
class LastApplied:
    revision: str  # the source's revision (a commit) whose apply last changed the chatbot
    at: str  # UTC ISO 8601: when its last operation was applied

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "at": self.at}


@dataclass
class AgentRecord:
    suspended: Suspension | None = None
    applied: dict[str, LastApplied] = field(default_factory=dict)  # by chatbot id

    @property
    def empty(self) -> bool:
        return self.suspended is None and not self.applied

    def to_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {}
        if self.suspended is not None:
            document["suspended"] = self.suspended.to_json()
        if self.applied:
            document["applied"] = {k: self.applied[k].to_json() for k in sorted(self.applied)}
        return document
