"""Safety caps: a plan that archives too much is refused, in ``plan`` and ``apply`` alike,
unless forced."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from botctl.defaults import (
    DEFAULT_MAX_ARCHIVE_PERCENT,
    DEFAULT_MAX_ARCHIVES,
    DEFAULT_PERCENT_CAP_FROM,
)
from botctl.errors import SafetyCapError
from botctl.plan import Plan


@dataclass(frozen=True)
class SafetyPolicy:
    """More than ``max_archive_percent`` of a chatbot's active attributes when it has at least
    ``min_attributes``, or more than ``max_archives`` across the run (None = no run cap)."""

    max_archive_percent: float = DEFAULT_MAX_ARCHIVE_PERCENT
    min_attributes: int = DEFAULT_PERCENT_CAP_FROM
    max_archives: int | None = DEFAULT_MAX_ARCHIVES


def safety_violations(
    plan: Plan,
    active_attributes: Mapping[str, int],
    policy: SafetyPolicy,
    overrides: Mapping[str, float],
) -> tuple[str, ...]:
    """``active_attributes`` and ``overrides`` (a document's own percentage) are by bot name."""
    archives = Counter(bot.name for bot, c in plan.changes() if c.action == "archive")
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


def enforce_safety(plan: Plan, *, force: bool) -> None:
    if plan.violations and not force:
        raise SafetyCapError(
            "the plan exceeds the safety caps; nothing was applied:\n"
            + "\n".join(f"  - {v}" for v in plan.violations)
            + "\nIf this is intended, pass --force, or raise the cap for one chatbot with "
            "spec.safety.maxArchivePercent in its document."
        )
