"""Configuration of a sandbox instance and parsing of its user-facing option values."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from botctl import contract
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
    `extra_models` are accepted as a `model` (settings and chat) beside the contract's lists:
    models the service released after the contract. `extra_sources` are accepted in the
    conversation filter beside the four sources the contract names: its four third-party
    channel sources, which it does not name.
    """

    db: str = ".botctl/sandbox.db"
    api_keys: dict[str, str] = field(default_factory=dict)
    reads: ReadsMode = "documented"
    rate_limit: float = 0
    # Whether rate-limited answers announce the window (X-RateLimit-Limit, -Remaining,
    # -Reset); without, a 429 says only Retry-After, as v1 deployments may.
    rate_limit_headers: bool = True
    latency_ms: int = 0
    seed: Path | None = None
    extra_models: tuple[str, ...] = ()
    extra_sources: tuple[str, ...] = ()

    @property
    def settings_models(self) -> tuple[str, ...]:
        return (*contract.SETTINGS_MODELS, *self.extra_models)

    @property
    def chat_models(self) -> tuple[str, ...]:
        return (*contract.CHAT_MODELS, *self.extra_models)

    @property
    def conversation_sources(self) -> tuple[str, ...]:
        return (*contract.CONVERSATION_SOURCES, *self.extra_sources)

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
        for model in self.extra_models:
            check_model(model)
        for source in self.extra_sources:
            check_source(source)


def check_model(name: str) -> None:
    """An extra model has the shape of the contract's identifiers (and of botctl's check)."""
    if not re.match(contract.MODEL_ID_PATTERN, name):
        raise SandboxConfigError(
            f"invalid extra model {name!r}: a model identifier is letters, digits, '.', '_' "
            "or '-', starting with a letter or digit"
        )


def check_source(name: str) -> None:
    """A source travels in a comma-separated filter: it cannot hold a comma, nor start or end
    with a space (the filter's items are trimmed)."""
    if not name or name != name.strip() or "," in name or not name.isprintable():
        raise SandboxConfigError(
            f"invalid extra source {name!r}: printable text without commas or outer spaces"
        )


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
