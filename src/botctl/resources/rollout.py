"""Staged rollout's record of each chatbot (``botctl promote``): the configuration revision its
last complete apply brought to the service, and whether that revision's conversation tests
passed on it. Kept in the state file's ``rollout`` section, apart from the records of settings
and attributes: it is about botctl's runs, not about a value of the service.

Recorded for the chatbots ``apply --test`` tests, and kept current by every later apply of
those chatbots (a new revision clears the tests' outcome until they run again).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Rollout:
    revision: str  # config.revision of the last complete apply
    tests_passed: bool | None = None  # of that revision's tests; None: they did not run

    def to_json(self) -> dict[str, Any]:
        return {"revision": self.revision, "tests_passed": self.tests_passed}

    def applied(self, revision: str) -> Rollout:
        """After a complete apply of ``revision``: the outcome holds only for the same one."""
        return self if revision == self.revision else Rollout(revision)
