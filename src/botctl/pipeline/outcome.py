"""What one pass of the reconciler ends with (``pipeline.reconciler``): a typed ``Outcome``
with its ``reason``, the conditions it reports, and whether a retry could change it.

Modelled on controller-runtime and Flux: a reconcile ends with a result (``Outcome``: done,
or to be tried again, ``requeue``) or an error; an error a retry with the same inputs cannot
fix is *terminal* (``terminal``: the configuration, a plan the service cannot take, a safety
cap), as controller-runtime's ``TerminalError``, and a driver does not retry it until its
inputs change (Flux's ``Stalled``). What it reports are conditions with a reason and a
message, as Flux's ``Ready`` and ``Healthy``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from botctl.errors import ConfigError, PlanError, StateWriteError
from botctl.models import Desired, Live, State
from botctl.plan import Plan
from botctl.reconcile.apply import ApplyReport

Reason = Literal[
    "Applied",  # every operation applied and recorded
    "NothingToDo",  # the plan had nothing to send (the baseline read was recorded)
    "Declined",  # the driver did not confirm the plan
    "Held",  # the gate held the plan back (a driver's admission: nothing was sent)
    "Interrupted",  # a stop request ended the apply early; what finished is recorded
    "OperationsFailed",  # some operation failed; the others are applied and recorded
    "StateNotWritten",  # applied, but the state could not be written at the end
]
REASONS: tuple[str, ...] = Reason.__args__  # type: ignore[attr-defined]
ConditionStatus = Literal["True", "False", "Unknown"]
NOTHING = ApplyReport(())


@dataclass(frozen=True)
class Condition:
    """One observation about a pass, as Flux reports them: ``type`` (``Ready``: the service
    holds what the plan said; ``Verified``: what was sent reads back as sent), a status, a
    CamelCase ``reason`` and a message for a person."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""

    def to_document(self) -> dict[str, str]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
        }


@dataclass(frozen=True)
class Outcome:
    """How a pass ended. ``plan`` is None only when it ended before planning (never: errors
    are raised). ``live`` is what the read phase found of the chatbots in scope, and
    ``read_back`` what the verify phase read again of those written to; ``desired`` and
    ``state`` are the configuration in scope and the state as recorded at the end (None for
    a saved plan, which carries no configuration)."""

    reason: Reason
    plan: Plan
    report: ApplyReport = NOTHING
    not_taken: tuple[str, ...] = ()  # values the service did not keep as sent
    # Why the state could not be written at the end (a full disk): what was applied since
    # its last write is not recorded.
    state_error: StateWriteError | None = None
    interrupted: int | None = None  # what stopped it early (the CLI: a signal number)
    verdict: Any = None  # what the gate's check said (apply --test: the tests' outcome)
    held: str | None = None  # why the gate held the plan back (reason Held)
    desired: Desired | None = None
    live: Live | None = None
    read_back: Live | None = None
    state: State | None = None

    @property
    def applied(self) -> bool:
        """Whether everything planned is applied and recorded (or nothing was to be)."""
        return self.reason in ("Applied", "NothingToDo")

    @property
    def requeue(self) -> bool:
        """Whether trying again could end otherwise: an operation that failed, a state that
        could not be written, a stop. Not a declined or held plan (the driver's choice)."""
        return self.reason in ("OperationsFailed", "StateNotWritten", "Interrupted")

    def observed(self) -> Live | None:
        """The service as last read: the read phase's view with the chatbots written to
        replaced by what the verify phase read back (no read of its own)."""
        if self.live is None:
            return None
        if self.read_back is None:
            return self.live
        bots = {**self.live.bots, **self.read_back.bots}
        return Live(bots=bots, listed=self.live.listed)

    def conditions(self) -> tuple[Condition, ...]:
        ready: ConditionStatus = "True" if self.applied else "False"
        return (Condition("Ready", ready, self.reason, self._message()), self._verified())

    def _message(self) -> str:
        r = self.report
        if self.reason == "Held":
            return self.held or "held by the gate"
        if self.reason == "StateNotWritten":
            return f"applied, but the state was not written: {self.state_error}"
        return (
            f"{r.count('applied')} applied, {r.count('failed')} failed, "
            f"{r.count('not_attempted')} not attempted"
        )

    def _verified(self) -> Condition:
        if self.read_back is None:
            return Condition("Verified", "Unknown", "NotReadBack", "nothing was read back")
        if self.not_taken:
            return Condition("Verified", "False", "NotAsSent", "; ".join(self.not_taken))
        return Condition("Verified", "True", "ReadBackAsSent")


def terminal(error: BaseException) -> bool:
    """Whether ``error`` ends a pass in a way trying again with the same inputs cannot
    change (controller-runtime's ``TerminalError``): the configuration is invalid, or the
    plan cannot be applied as it is (a change the service cannot make, a safety cap, a
    stale saved plan, a rename that may not read the contacts). A service or state failure
    is not: it may pass."""
    return isinstance(error, ConfigError | PlanError)
