"""The state's sealed values, as the diff compares them.

A recorded value that held a secret is known only by its fingerprint (``botctl.sealing``).
Comparing it means fingerprinting the candidates: the declared value, and the value the
service was read holding. A candidate with the same fingerprint *is* the recorded value, now
known in clear (in memory only); when none matches, the recorded value is a secret that is
neither (rotated since it was applied, say), and a stand-in that equals neither and shows as
``(secret)`` takes its place, so the diff still says ``assumed`` and sends the declared value.
Pure.
"""

from __future__ import annotations

from typing import Any

from botctl.models import BotRecord, BotSpec, LiveBot
from botctl.resources.registry import kinds
from botctl.sealing import FingerprintKey


def recorded_view(
    record: BotRecord | None,
    spec: BotSpec,
    live: LiveBot | None,
    key: FingerprintKey | None,
) -> BotRecord | None:
    """``record`` with every sealed value replaced (see the module's docstring): each kind
    replaces its own (``ResourceKind.unseal``). ``key``: the key of the state's fingerprints
    (None when it has none to compare: no salt yet, or no state key, which ``store`` allows
    only for a state without fingerprints)."""
    if record is None or key is None:
        return record
    unsealed: dict[str, Any] = {}
    for kind in kinds():
        unsealed.update(kind.unseal(record, spec, live, key))
    return record.with_parts(unsealed) if unsealed else record
