"""A run's configuration (``Workspace``) and the first stage every command shares: loading the
configuration and selecting the chatbots it covers."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from botctl.config.loader import load_fleet
from botctl.config.resolve import Fleet
from botctl.config.selection import Selection
from botctl.defaults import DEFAULT_PARALLELISM, DEFAULT_STATE_PATH
from botctl.models import Desired
from botctl.reconcile.safety import SafetyPolicy
from botctl.reconcile.usage import ContactPolicy
from botctl.service.options import ServiceOptions
from botctl.store.backends import StateLocation


@dataclass(frozen=True)
class Workspace:
    paths: Sequence[Path]
    environ: Mapping[str, str]
    state_path: StateLocation = DEFAULT_STATE_PATH  # a path, or a git+ / s3:// URL
    # --state-encryption: "passphrase" or "none" for a new state; None: as the state is.
    state_encryption: str | None = None
    service: ServiceOptions = field(default_factory=ServiceOptions)
    selection: Selection = field(default_factory=Selection)
    allow_unknown_models: bool = False
    disabled_warnings: frozenset[str] = frozenset()  # codes: botctl.yaml and --disable-warning
    strict: bool = False  # warnings are errors (validate --strict)
    parallelism: int = DEFAULT_PARALLELISM
    lock_timeout: float = 0.0
    policy: SafetyPolicy = field(default_factory=SafetyPolicy)
    force: bool = False  # accept a plan that exceeds the safety caps
    reassert: bool = False  # also send managed settings that cannot be read back
    skip_missing: bool = False  # apply the others when chatbots are missing
    # Counting contacts' values for archives and renames (--max-contact-reads), and consent to
    # archive values (--allow-archive-with-values).
    contacts: ContactPolicy = field(default_factory=ContactPolicy)
    # Values marked ${secret:...} once the configuration is loaded, for masking debug traces.
    secrets: set[str] = field(default_factory=set)
    # --changed-since: plan only the chatbots changed since this git revision (pipeline.scope).
    changed_since: str | None = None
    project_file: Path | None = None  # the project file of the run, if any
    paths_from_project: bool = False  # the paths are the project file's (not given as PATHs)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Loading and planning allocate several objects per YAML value or change and keep them
    all until they return, so the cycle collector would scan the ever larger heap again and
    again and free nothing (see README, Benchmarks). Reference counting frees memory as usual
    meanwhile."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def load_resolved(ws: Workspace) -> Fleet:
    """The configuration, resolved (with where each value came from) and validated, narrowed
    to the selected chatbots."""
    with collector_paused():
        fleet = load_fleet(
            list(ws.paths),
            environ=ws.environ,
            allow_unknown_models=ws.allow_unknown_models,
            disabled_warnings=ws.disabled_warnings,
            strict=ws.strict,
        )
    # Every secret of the configuration, selected for this run or not: each is masked in any
    # output, and the state (which holds records of every chatbot) never writes one.
    ws.secrets.update(value for bot in fleet.bots for value in bot.spec.secret_values)
    return fleet.selected(ws.selection)


def load(ws: Workspace) -> Desired:
    """The configuration, validated, narrowed to the selected chatbots."""
    return load_resolved(ws).desired
