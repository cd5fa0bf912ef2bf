"""Configuration of a sandbox instance and parsing of its user-facing option values."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from botctl.contract import PLANS

ReadsMode = Literal["documented", "extended", "none"]
READS_MODES: tuple[ReadsMode, ...] = ("documented", "extended", "none")
DEFAULT_PLAN = "standard"


class SandboxConfigError(ValueError):
    """An option value the user can fix (bad key syntax, unknown plan, bad seed file)."""


@dataclass
class SandboxConfig:
    """Everything that shapes one sandbox; `create_app` reads nothing else.

    `api_keys` maps an API key to its plan; each key is one account of the service.
    """

    db: str = ".botctl/sandbox.db"
    api_keys: dict[str, str] = field(default_factory=dict)
    reads: ReadsMode = "documented"
    rate_limit: float = 0
    latency_ms: int = 0
    seed: Path | None = None

    def validate(self) -> None:
        """Refuse impossible settings up front, so a typo cannot become a silent default."""
        for key, plan in self.api_keys.items():
            check_key(key)
            if plan not in PLANS:
                raise SandboxConfigError(
                    f"unknown plan {plan!r} for an API key (expected one of {', '.join(PLANS)})"
                )
        if self.reads not in READS_MODES:
            raise SandboxConfigError(f"reads must be one of {', '.join(READS_MODES)}")
        if self.rate_limit < 0:
            raise SandboxConfigError("rate limit must be 0 (off) or a positive number")
        if self.latency_ms < 0:
            raise SandboxConfigError("latency must be 0 or a positive number of milliseconds")


def check_key(key: str) -> None:
    """A key travels in an HTTP header: it must be non-empty printable ASCII without spaces."""
    if not key or not key.isascii() or not key.isprintable() or " " in key:
        raise SandboxConfigError("an API key must be non-empty printable ASCII without spaces")


def parse_api_key(value: str) -> tuple[str, str]:
    """Parse `KEY[:PLAN]` (plan defaults to standard). The plan is split off the last colon."""
    key, sep, plan = value.rpartition(":")
    if not sep:
        key, plan = value, DEFAULT_PLAN
    elif plan not in PLANS:
        # A colon that does not introduce a plan is a typo more often than part of a key.
        raise SandboxConfigError(
            f"invalid --api-key {value!r}: expected KEY or KEY:PLAN with PLAN one of "
            f"{', '.join(PLANS)}"
        )
    check_key(key)
    return key, plan
