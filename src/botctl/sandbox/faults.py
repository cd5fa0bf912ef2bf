"""Scheduled faults: the next N requests matching a method and path glob misbehave.

`when="before"`: the fault replaces the handler (nothing changes). `when="after"`: the handler
runs and its change is kept, then the client gets the error or a dropped connection instead
of the real answer - the case a client cannot tell from "before", which is what retries and
idempotency have to survive.
"""

from __future__ import annotations

import fnmatch
import itertools
import threading
from dataclasses import asdict, dataclass
from typing import Any

from botctl import contract
from botctl.sandbox.validation import Invalid, boolean, is_int, is_number, obj, one_of, string

_MESSAGES = {
    400: contract.MSG_INVALID_DATA,
    401: contract.MSG_UNAUTHORIZED,
    403: contract.MSG_FORBIDDEN,
    404: contract.MSG_NOT_FOUND,
    429: contract.MSG_RATE_LIMITED,
    500: contract.MSG_INTERNAL,
}


def fault_message(status: int) -> str:
    """Section 7's message for the status; other 5xx read like a gateway's plain failure."""
    return _MESSAGES.get(status, contract.MSG_INTERNAL if status >= 500 else "Request failed")


@dataclass
class Fault:
    id: int
    method: str
    path: str
    count: int
    status: int | None
    retry_after: float | None
    latency_ms: int
    drop: bool
    when: str

    def matches(self, method: str, path: str) -> bool:
        return self.method in ("*", method) and fnmatch.fnmatchcase(path, self.path)


def _status(value: Any, where: str) -> int:
    if not is_int(value) or not 400 <= value <= 599:
        raise Invalid(f"{where}: must be an integer HTTP error status 400..599")
    return int(value)


def _count(value: Any, where: str) -> int:
    if not is_int(value) or value < 1:
        raise Invalid(f"{where}: must be an integer >= 1")
    return int(value)


def _seconds(value: Any, where: str) -> float:
    if not is_number(value) or value < 0:
        raise Invalid(f"{where}: must be a number of seconds >= 0")
    return float(value)


def _ms(value: Any, where: str) -> int:
    if not is_int(value) or value < 0:
        raise Invalid(f"{where}: must be an integer number of milliseconds >= 0")
    return int(value)


_SPEC = {
    "method": string,
    "path": string,
    "count": _count,
    "status": _status,
    "retry_after": _seconds,
    "latency_ms": _ms,
    "drop": boolean,
    "when": one_of("before", "after"),
}


class FaultBook:
    """Pending faults, consumed first-registered-first; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self._ids = itertools.count(1)

    def add(self, spec: Any) -> Fault:
        fields = obj(spec, "", _SPEC)
        if "path" not in fields:
            raise Invalid("path: required (a glob such as /api/v1/chatbots/*/custom-attributes)")
        drop = fields.get("drop", False)
        status = fields.get("status")
        if drop and status is not None:
            raise Invalid("drop and status exclude each other")
        if not drop and status is None and not fields.get("latency_ms"):
            raise Invalid("a fault needs a status, drop: true or latency_ms")
        if fields.get("retry_after") is not None and status is None:
            raise Invalid("retry_after needs a status")
        fault = Fault(
            id=next(self._ids),
            method=fields.get("method", "*").upper(),
            path=fields["path"],
            count=fields.get("count", 1),
            status=status,
            retry_after=fields.get("retry_after"),
            latency_ms=fields.get("latency_ms", 0),
            drop=drop,
            when=fields.get("when", "before"),
        )
        with self._lock:
            self._faults.append(fault)
        return fault

    def take(self, method: str, path: str) -> Fault | None:
        """Consume one use of the first matching fault."""
        with self._lock:
            for fault in self._faults:
                if fault.matches(method, path):
                    fault.count -= 1
                    if fault.count == 0:
                        self._faults.remove(fault)
                    return fault
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [asdict(f) for f in self._faults]

    def clear(self) -> None:
        with self._lock:
            self._faults.clear()
