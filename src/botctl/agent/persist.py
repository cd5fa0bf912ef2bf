"""The agent's record in the state (``resources.agentrecord``: the suspension, each chatbot's
last applied revision), read when a replica takes the lease and written by the holder through
its lease (``store.lock.LeasedBackend``: a replica that lost it writes nothing). Blocking:
the loop runs these in a thread, one at a time with its applies (a compare-and-swap write
beside an apply's own would make one of them fail)."""

from __future__ import annotations

from collections.abc import Callable

from botctl.resources.agentrecord import AgentRecord
from botctl.store.backends import StateLocation, open_backend
from botctl.store.lock import Lease, LeasedBackend
from botctl.store.state import read_state, save_state


def read_record(where: StateLocation) -> AgentRecord:
    return read_state(where).state.agent


def update_record(lease: Lease, change: Callable[[AgentRecord], None], message: str) -> None:
    """Read the state, ``change`` its agent record, write it back as one compare-and-swap
    write fenced by ``lease``."""
    with open_backend(lease.where) as inner:
        backend = LeasedBackend(inner, lease)
        stored = read_state(backend)
        change(stored.state.agent)
        save_state(stored.state, backend, version=stored.version, message=message)
