"""``botctl preview acquire / release / show``: a pull request leases a preview stage (the
chatbots a label selector matches) before applying its configuration there, so that two pull
requests never run their configurations on the same preview chatbot at once.

The leases live in the state (``resources.preview``, the ``previews`` section), by chatbot id:
each acquire or release reads the state and writes it back under the state lock, one
compare-and-swap write, so two jobs racing for a stage cannot both win it, whatever the
backend (a file, a git branch, an S3 object). An acquire takes every chatbot of one stage or
none; given several stages (a pool), the first whose chatbots are all free (or lapsed, or
already the owner's: a renewal). Until ``wait`` runs out it tries again every
``poll`` seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from botctl.config.selection import Selection, matches_all
from botctl.defaults import DEFAULT_PREVIEW_POLL, PREVIEW_LOCK_WAIT
from botctl.errors import BotctlError
from botctl.models import State
from botctl.pipeline.promote import Member, Stage, matches_nothing
from botctl.pipeline.workspace import Workspace, load_resolved
from botctl.resources.preview import PreviewLease, iso_seconds
from botctl.store.backend import StateBackend
from botctl.store.backends import StateLocation, open_backend
from botctl.store.lock import StateLock
from botctl.store.state import read_state, save_state

Clock = Callable[[], float]


@dataclass(frozen=True)
class Acquired:
    stage: Stage
    chatbots: tuple[Member, ...]
    lease: PreviewLease
    renewed: bool  # the owner held it already


def stage_members(ws: Workspace, stages: Sequence[Stage]) -> list[tuple[Stage, list[Member]]]:
    """Each stage's chatbots in the configuration; one that matches none is an error."""
    fleet = load_resolved(replace(ws, selection=Selection()))
    found = []
    for stage in stages:
        members = [
            Member(b.spec.name, b.spec.chatbot_id, b.spec.labels)
            for b in fleet.bots
            if matches_all(stage.requirements, b.spec.labels)
        ]
        if not members:
            everyone = [Member(b.spec.name, b.spec.chatbot_id, b.spec.labels) for b in fleet.bots]
            raise BotctlError(matches_nothing("--stage", stage, everyone, "nothing to lease"))
        found.append((stage, members))
    return found


def _holders(state: State, members: Sequence[Member], owner: str, now: float) -> list[str]:
    """Who else holds one of ``members`` now (empty: the stage is free for ``owner``)."""
    busy = []
    for member in members:
        lease = state.previews.get(member.chatbot_id)
        if lease is not None and lease.owner != owner and not lease.lapsed(now):
            busy.append(f"{member.name} by {lease.owner} until {iso_seconds(lease.expires)}")
    return busy


def _try(
    backend: StateBackend,
    stages: Sequence[tuple[Stage, list[Member]]],
    owner: str,
    ttl: float,
    clock: Clock,
    lock_timeout: float,
) -> Acquired | list[str]:
    """One attempt under the state lock: the lease taken, or who holds each stage."""
    with StateLock(backend, timeout=lock_timeout, command="preview acquire"):
        stored = read_state(backend)
        state = stored.state
        now = clock()
        busy: list[str] = []
        for stage, members in stages:
            holders = _holders(state, members, owner, now)
            if holders:
                busy.append(f"{stage.text}: " + "; ".join(holders))
                continue
            renewed = all(
                (lease := state.previews.get(m.chatbot_id)) is not None
                and lease.owner == owner
                and not lease.lapsed(now)
                for m in members
            )
            lease = PreviewLease(owner, stage.text, now, now + ttl)
            for member in members:
                state.previews[member.chatbot_id] = lease
            save_state(
                state,
                backend,
                version=stored.version,
                message=f"botctl preview acquire: {stage.text} for {owner}",
            )
            return Acquired(stage, tuple(members), lease, renewed)
        return busy


def acquire(
    ws: Workspace,
    stages: Sequence[Stage],
    owner: str,
    *,
    ttl: float,
    wait: float,
    clock: Clock = time.time,
    poll: float = DEFAULT_PREVIEW_POLL,
    on_wait: Callable[[list[str]], None] | None = None,
) -> Acquired:
    """Lease the first free stage of ``stages`` to ``owner`` for ``ttl`` seconds, trying for
    up to ``wait`` seconds; a ``BotctlError`` naming every holder when none came free."""
    found = stage_members(ws, stages)
    deadline = time.monotonic() + wait
    told = False
    with open_backend(ws.state_path) as backend:
        while True:
            left = max(0.0, deadline - time.monotonic())
            taken = _try(
                backend, found, owner, ttl, clock, max(ws.lock_timeout, left, PREVIEW_LOCK_WAIT)
            )
            if isinstance(taken, Acquired):
                return taken
            if time.monotonic() + poll > deadline:
                raise BotctlError(
                    "no preview stage is free"
                    + (f" after waiting {wait:g} s" if wait else "")
                    + ": "
                    + " | ".join(taken)
                    + " (--wait SECONDS to wait for one; `botctl preview release --owner "
                    "OWNER --force` frees one whose job is gone)"
                )
            if on_wait is not None and not told:
                on_wait(taken)
                told = True
            time.sleep(poll)


@dataclass(frozen=True)
class Released:
    chatbots: tuple[tuple[str, PreviewLease], ...]  # chatbot id, the lease it had


def release(where: StateLocation, owner: str | None, *, lock_timeout: float) -> Released:
    """End ``owner``'s leases (``None``: every lease). Releasing what is not held is no
    error: the job that ends calls it whatever happened."""
    with (
        open_backend(where) as backend,
        StateLock(backend, timeout=max(lock_timeout, PREVIEW_LOCK_WAIT), command="preview release"),
    ):
        stored = read_state(backend)
        state = stored.state
        gone = tuple(
            (chatbot_id, lease)
            for chatbot_id, lease in sorted(state.previews.items())
            if owner is None or lease.owner == owner
        )
        if gone:
            for chatbot_id, _ in gone:
                del state.previews[chatbot_id]
            who = owner if owner is not None else "every owner"
            save_state(
                state, backend, version=stored.version, message=f"botctl preview release: {who}"
            )
    return Released(gone)


def leases(where: StateLocation) -> dict[str, PreviewLease]:
    """The leases the state holds, lapsed ones included."""
    return dict(sorted(read_state(where).state.previews.items()))
