"""Shared fixtures: a real sandbox server on an ephemeral loopback port."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

from botctl.defaults import RETRY_BASE_DELAY_ENV
from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.server import RunningSandbox, run_in_thread
from botctl.trust import ALLOW_ENV, CI_VARIABLES
from tests.launch import TEST_RETRY_BASE_DELAY

SandboxFactory = Callable[..., RunningSandbox]
WORKERS_PER_CORE = 2  # most tests wait on a child process, a socket or a sandbox thread
DEFAULT_KEYS = {"test-key": "standard"}


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pyproject's addopts): two workers per core, not one, since a worker spends
    much of a test waiting rather than computing. ``-n 0`` runs in this one process (for
    ``pdb`` or ``-s``)."""
    return WORKERS_PER_CORE * (os.cpu_count() or 1)


@pytest.fixture
def sandbox_factory(tmp_path: Path) -> Iterator[SandboxFactory]:
    """`start(**SandboxConfig fields) -> RunningSandbox` (`.url`, `.api_url`).

    Each call gets its own database under tmp_path unless `db` is given, and the key
    "test-key" (standard plan) unless `api_keys` is given. All are stopped at teardown.
    """
    numbers = itertools.count(1)
    with ExitStack() as stack:

        def start(**fields: Any) -> RunningSandbox:
            fields.setdefault("db", str(tmp_path / f"sandbox-{next(numbers)}.db"))
            fields.setdefault("api_keys", dict(DEFAULT_KEYS))
            return stack.enter_context(run_in_thread(SandboxConfig(**fields)))

        yield start


@pytest.fixture
def sandbox(sandbox_factory: SandboxFactory) -> RunningSandbox:
    """A default sandbox: key "test-key" on the standard plan, documented reads."""
    return sandbox_factory()


@pytest.fixture(autouse=True, scope="session")
def _test_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """botctl run in this process (CliRunner) retries as a child of ``tests.launch`` does:
    without costing real seconds (the backoff base near zero). What botctl remembers of the
    states it kept under a key (``store.protection``) goes to the session's own directory,
    never the user's, and is inherited by every child. The suite runs as a person at a
    terminal does, whether or not a CI runs it (``CI=true`` changes who may name the API
    URL: README, Trust), and with the default exposure of variables; the tests of CI's rules
    and of ``BOTCTL_ALLOW_ENV`` set them."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(RETRY_BASE_DELAY_ENV, TEST_RETRY_BASE_DELAY)
        patch.setenv("XDG_STATE_HOME", str(tmp_path_factory.mktemp("xdg-state")))
        for name in ("CI", *CI_VARIABLES, ALLOW_ENV):
            patch.delenv(name, raising=False)
        yield
