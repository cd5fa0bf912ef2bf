"""What every resource kind contributes to one chatbot's plan."""

from __future__ import annotations

from dataclasses import dataclass, field

from botctl.plan import Dependency, Operation, Unmanageable, Unmanaged


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
