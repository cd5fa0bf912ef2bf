"""What ``POST /control/sync``, ``/control/suspend`` and ``/control/resume`` do (the listener
has checked the token): on the active replica only (a standby answers 503 naming the lease
holder, as the webhook does: through a Service, ``botctl agent`` asks again).

- sync: a cycle at once (ending a backoff: an operator is no webhook flood), its number in
  the answer; with ``--override-window`` and a reason, that cycle applies although a deny
  window holds (once; logged with the reason). A suspension is never overridden.
- suspend: nothing is applied from the next decision on (an apply in progress finishes; a
  SIGTERM drains it); drift is still read and reported. Kept in the state (``persist``), so
  it holds on whichever replica takes the lease over, and across restarts, until resumed.
- resume: applying again, and a cycle at once.

The suspension takes effect in memory at once; writing it to the state waits for an apply in
progress (one writer at a time). The answer says whether it was written within
``PERSIST_WAIT`` seconds; a later write is logged.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from botctl.agent.control import Override, iso, suspension_words, utc_now
from botctl.errors import BotctlError
from botctl.resources.agentrecord import AgentRecord, Suspension

if TYPE_CHECKING:
    from botctl.agent.loop import Agent

PERSIST_WAIT = 5.0


@dataclass(frozen=True)
class Request:
    """What a control request carries (its JSON body), checked by the listener."""

    by: str | None = None
    reason: str | None = None
    override_window: bool = False
    peer: str | None = None  # the client's address, for the log


class Conflict(BotctlError):
    """A request that cannot be done as asked (409)."""


class Steering:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self._writes: set[asyncio.Task[str | None]] = set()

    @property
    def status(self) -> Any:
        return self.agent.status

    def _said(self, what: str, request: Request) -> None:
        by = f" by {request.by}" if request.by else ""
        peer = f" (from {request.peer})" if request.peer else ""
        reason = f": {request.reason}" if request.reason else ""
        self.agent.log.info("control", f"{what}{by}{peer}{reason}")

    async def sync(self, request: Request) -> dict[str, Any]:
        controls = self.status.controls
        if request.override_window:
            self._check_override(request)
        hold = controls.hold()
        override = None
        if request.override_window and hold is not None and hold.kind == "window":
            assert request.reason is not None
            override = Override(request.reason, request.by, iso(utc_now()))
            controls.override = override
            hold = None
        self._said("sync asked" + (" overriding the deny window" if override else ""), request)
        number = self.agent.next_cycle_number()
        when = self.agent.trigger("control", urgent=True)
        return {
            "status": "triggered",
            "cycle": number,
            "when": when,
            "applies": self.agent.settings.auto_apply and hold is None,
            "held": hold.words if hold else None,
            "windowOverride": override.to_document() if override else None,
        }

    def _check_override(self, request: Request) -> None:
        if not request.reason:
            raise Conflict("--override-window needs --reason: it is logged with the apply")
        if not self.agent.settings.auto_apply:
            raise Conflict(
                "this agent applies nothing (no --auto-apply): there is no window to override"
            )

    async def suspend(self, request: Request) -> dict[str, Any]:
        controls = self.status.controls
        if controls.suspended is not None:
            return {
                "status": "suspended",
                "already": True,
                "suspended": controls.suspended.to_json(),
                "persisted": None,
            }
        suspension = Suspension(iso(utc_now()), request.by, request.reason)
        controls.suspended = suspension
        self._said("suspended", request)
        persisted = await self._persist(
            lambda record: setattr(record, "suspended", suspension),
            f"botctl agent: {suspension_words(suspension)}",
        )
        return {
            "status": "suspended",
            "already": False,
            "suspended": suspension.to_json(),
            **persisted,
        }

    async def resume(self, request: Request) -> dict[str, Any]:
        controls = self.status.controls
        was = controls.suspended
        if was is None:
            return {"status": "resumed", "already": True, "persisted": None}
        controls.suspended = None
        self._said("resumed", request)
        persisted = await self._persist(
            lambda record: setattr(record, "suspended", None),
            f"botctl agent: resumed{f' by {request.by}' if request.by else ''}",
        )
        number = self.agent.next_cycle_number()
        self.agent.trigger("control", urgent=True)
        return {
            "status": "resumed",
            "already": False,
            "wasSuspended": was.to_json(),
            "cycle": number,
            **persisted,
        }

    async def _persist(self, change: Callable[[AgentRecord], None], message: str) -> dict[str, Any]:
        """Write the change to the state; whether it was, within ``PERSIST_WAIT`` seconds."""

        async def write() -> str | None:
            try:
                await self.agent.persist(change, message)
            except Exception as exc:  # said, never raised: nobody may wait for it any more
                error = self.agent.redact(f"{type(exc).__name__}: {exc}")
                self.agent.log.error("control", f"not written to the state: {message}: {error}")
                return error
            self.agent.log.info("control", f"written to the state: {message}")
            return None

        task = asyncio.create_task(write())
        self._writes.add(task)
        task.add_done_callback(self._writes.discard)
        try:
            error = await asyncio.wait_for(asyncio.shield(task), PERSIST_WAIT)
        except TimeoutError:
            note = (
                "written to the state once the apply in progress ends (with --yield-lease: "
                "once no other run holds the state's lock)"
            )
            return {"persisted": False, "note": note}
        if error is not None:
            return {"persisted": False, "error": error}
        return {"persisted": True}

    async def close(self) -> None:
        """Let writes under way finish (the agent is stopping)."""
        for task in list(self._writes):
            with contextlib.suppress(asyncio.CancelledError):
                await task
