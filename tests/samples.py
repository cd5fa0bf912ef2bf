"""How many cases the randomised families run: small in the default run (the suite stays
within a few minutes on two cores), large in the long run.

    BOTCTL_LONG_TESTS=1 uv run pytest -s tests/test_faults.py tests/test_fuzz.py \
        tests/test_signals.py

runs each family at its long size; each family's own variable (``BOTCTL_FAULT_SCHEDULES``,
``BOTCTL_FUZZ_EXAMPLES``, ``BOTCTL_SIGNAL_INSTANTS``, ``BOTCTL_KILL_INSTANTS`` for a rename
killed mid-way, ``BOTCTL_ATTACK_CANDIDATES`` for the attacker's dictionary,
``BOTCTL_WATCH_FLEET`` for the agent's fleet under its drift watch) sets any number and wins
over both.
"""

from __future__ import annotations

import os

LONG_ENV = "BOTCTL_LONG_TESTS"


def long_run() -> bool:
    return os.environ.get(LONG_ENV, "") not in ("", "0")


def sample_size(variable: str, default: int, long: int, *, slow_selected: bool = False) -> int:
    """``$variable`` if set, else ``long`` in the long run (or when the slow tests alone were
    selected, ``-m slow``), else ``default``."""
    given = os.environ.get(variable)
    if given:
        return int(given)
    return long if long_run() or slow_selected else default


FAULT_SCHEDULES = sample_size("BOTCTL_FAULT_SCHEDULES", 16, 200)
FUZZ_EXAMPLES = sample_size("BOTCTL_FUZZ_EXAMPLES", 30, 300)
WATCH_FLEET = sample_size("BOTCTL_WATCH_FLEET", 24, 500)
