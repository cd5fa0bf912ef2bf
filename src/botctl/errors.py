"""botctl's one error tree. Every expected failure is a ``BotctlError``; the CLI prints its
message (never a traceback) and exits with its ``exit_code``.

::

    BotctlError                      exit 1
    ├── Interrupted                  SIGINT or SIGTERM before anything was written (128 + signal)
    ├── ConfigError                  the YAML is invalid (carries every Problem at once)
    ├── StateError                   the state file is unreadable or of another lineage
    │   ├── StateWriteError          the state file cannot be written (a full disk)
    │   └── LockError                another apply holds the state lock
    ├── PlanError                    the plan cannot be made or must not be applied
    │   ├── ImpossibleChangeError    the API cannot do what the YAML asks (e.g. type change)
    │   ├── StalePlanError           a saved plan no longer matches the service or the state
    │   └── SafetyCapError           the plan archives more than the configured caps allow
    └── ServiceError                 talking to the service failed
        ├── ApiError                 the service answered with an error status
        │   └── AmbiguousApiError    a create answered 5xx: it may have been applied
        ├── ReadsUnavailable         no such read in this deployment (405/501), or --no-reads
        └── TransportError           no usable answer: unreachable, dropped, past the
                                     deadline, too large, undecodable

A failed write that may nevertheless have been applied says so with ``outcome_unknown``: the
apply engine looks before it repeats such a write.

Exit code 2 is not an error: it means "changes or drift present" (plan --detailed-exitcode, drift).

``BotctlWarning`` is no error either: what a run found worth saying (``warnings.warn``), which
the CLI prints as ``warning: ...``.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Literal

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2
EXIT_TEST_FAILED = 3  # a conversation test failed (test, apply --test, promote --test)
EXIT_SIGNAL_BASE = 128  # ended by a signal: 128 + its number (130 SIGINT, 143 SIGTERM)

Severity = Literal["error", "warning"]


@dataclass(frozen=True, order=True)
class Problem:
    """One finding about the configuration, located as file:line:col (1-based)."""

    file: str
    line: int
    col: int
    message: str
    severity: Severity = "error"
    code: str = ""  # a warning's code (BC101...): what lint.disable and --disable-warning name

    def __str__(self) -> str:
        if self.code:  # a coded warning, or one that --strict made an error
            prefix = f"{self.severity}[{self.code}]: "
        else:
            prefix = "" if self.severity == "error" else "warning: "
        return f"{self.file}:{self.line}:{self.col}: {prefix}{self.message}"


class BotctlError(Exception):
    """Base of every expected failure."""

    exit_code = EXIT_ERROR


class Interrupted(BotctlError):
    """A run stopped by a signal before it wrote anything; ``unwritten`` says what that means
    for the command (e.g. "nothing was applied")."""

    def __init__(self, signum: int, unwritten: str = "") -> None:
        self.signum = signum
        self.exit_code = EXIT_SIGNAL_BASE + signum
        super().__init__(
            f"Interrupted by {signal_name(signum)}" + (f": {unwritten}" if unwritten else "") + "."
        )


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class ConfigError(BotctlError):
    def __init__(self, problems: list[Problem]) -> None:
        self.problems = sorted(problems)
        errors = [p for p in self.problems if p.severity == "error"]
        lines = [str(p) for p in self.problems]
        lines.append(f"{len(errors)} error(s) in the configuration; nothing was sent.")
        super().__init__("\n".join(lines))


class StateError(BotctlError):
    pass


class StateWriteError(StateError):
    """Writing the state failed where it is kept (a full disk): what was recorded in memory
    is not stored. An apply that has started sending carries on and says so at the end."""


class LockError(StateError):
    pass


class PlanError(BotctlError):
    pass


class ImpossibleChangeError(PlanError):
    pass


class StalePlanError(PlanError):
    pass


class SafetyCapError(PlanError):
    pass


# How every message says that a failed write may have been applied anyway.
MAY_HAVE_BEEN_APPLIED = "the change may have been applied"


class ServiceError(BotctlError):
    """A failure talking to the service, located by chatbot and operation."""

    outcome_unknown = False  # whether the request may have been applied despite the failure

    def __init__(self, operation: str, message: str, *, chatbot_id: str | None = None) -> None:
        self.operation = operation
        self.chatbot_id = chatbot_id
        self.detail = message
        where = f"chatbot {chatbot_id}: " if chatbot_id else ""
        super().__init__(f"{where}{operation} failed: {message}")


class ApiError(ServiceError):
    """The service answered with an error status; ``service_message`` is its own words."""

    def __init__(
        self,
        operation: str,
        status: int,
        service_message: str,
        *,
        chatbot_id: str | None = None,
        hint: str = "",
    ) -> None:
        self.status = status
        self.service_message = service_message
        text = f"HTTP {status}: {service_message}"
        if hint:
            text += f" ({hint})"
        super().__init__(operation, text, chatbot_id=chatbot_id)


class ReadsUnavailable(ServiceError):
    """botctl cannot read this, and works from its state file: the deployment does not offer
    the read (``status`` is its answer: 405 or 501, or 404 on the attribute list other than
    "Chatbot not found"), or reads are off (``--no-reads``; ``status`` is None and nothing was
    sent)."""

    HINT = "this service offers no such read; botctl relies on its state file"

    def __init__(
        self, operation: str, reason: str, *, status: int | None, chatbot_id: str | None = None
    ) -> None:
        self.status = status
        super().__init__(operation, reason, chatbot_id=chatbot_id)


class AmbiguousApiError(ApiError):
    """A non-idempotent write (an attribute create) got a 5xx: it may have been applied."""

    outcome_unknown = True


class TransportError(ServiceError):
    """No usable answer. ``outcome_unknown`` is false only when the request certainly never
    reached the service."""

    def __init__(
        self,
        operation: str,
        message: str,
        *,
        chatbot_id: str | None = None,
        outcome_unknown: bool = True,
    ) -> None:
        self.outcome_unknown = outcome_unknown
        super().__init__(operation, message, chatbot_id=chatbot_id)


class BotctlWarning(UserWarning):
    """Something a run tells its user that is no error (a state key file git would commit),
    raised where it is found with ``warnings.warn``: the CLI prints it as ``warning: ...`` on
    standard error, a library caller gets Python's warning."""
