"""Programs some tests need beyond Python (kubectl, systemd-analyze, chromium). Installed by
``.ci/run``: in CI (``CI`` set) a missing one fails the test that needs it, so a green run
never hides a check that did not happen; on a developer's machine the test skips, saying what
to install."""

from __future__ import annotations

import os
import shutil

import pytest


def need(*names: str, install: str) -> str:
    """The path of the first of ``names`` found on PATH; else skip (fail in CI)."""
    for name in names:
        found = shutil.which(name)
        if found is not None:
            return found
    message = f"{' or '.join(names)} is not installed ({install}; .ci/run installs it)"
    if os.environ.get("CI"):
        pytest.fail(f"CI: {message}", pytrace=False)
    pytest.skip(message)
