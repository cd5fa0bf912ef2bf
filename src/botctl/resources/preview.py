"""A preview chatbot's lease (``botctl preview acquire``): which pull request's configuration
it runs now, until when. Kept in the state file's ``previews`` section, by chatbot id, apart
from the records of settings and attributes: it is about botctl's runs, not about a value of
the service (as ``rollout`` is).

A lease is held by its ``owner`` (a pull request: ``github:org/repo#42``) until ``expires``;
once lapsed, anyone may take it. The owner renews it by acquiring again, and ends it by
releasing it; two owners never hold the same chatbot at once, since every lease is taken
under the state lock, in one compare-and-swap write of the state.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


def iso_seconds(moment: float) -> str:
    """A Unix time as UTC ISO 8601, to the second: ``2025-05-02T09:30:00Z``."""
    return datetime.fromtimestamp(moment, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def from_iso(text: str) -> float:
    """``iso_seconds`` read back (any ISO 8601 time with its zone); ``ValueError`` else."""
    moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if moment.tzinfo is None:
        raise ValueError(f"{text!r} has no time zone")
    return moment.timestamp()


@dataclass(frozen=True)
class PreviewLease:
    owner: str
    stage: str  # the label selector the lease was taken for, as given
    acquired: float  # Unix time
    expires: float

    def lapsed(self, now: float) -> bool:
        return now >= self.expires

    def to_json(self) -> dict[str, Any]:
        return {
            "owner": self.owner,
            "stage": self.stage,
            "acquired": iso_seconds(self.acquired),
            "expires": iso_seconds(self.expires),
        }
