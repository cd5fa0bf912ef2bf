"""The live objects of one sandbox app (kept on `app.state.sandbox`) and its request log."""

from __future__ import annotations

import hashlib
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.faults import FaultBook
from botctl.sandbox.ratelimit import RateLimiter
from botctl.sandbox.store import Store
from botctl.sandbox.validation import Rules

LOG_LIMIT = 10_000  # oldest entries go first; a long-running sandbox must not grow forever


def key_id(key: str) -> str:
    """A stable, non-reversible name for an API key, shown wherever a key would be."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


class RequestLog:
    """What clients sent to /api/v1, in arrival order. Authorization is never recorded."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: deque[dict[str, Any]] = deque(maxlen=LOG_LIMIT)
        self._seq = 0

    def record(self, method: str, path: str, query: dict[str, str], body: Any) -> dict[str, Any]:
        """Append an entry; the caller fills `status`, `fault` and `detail` in later."""
        with self._lock:
            self._seq += 1
            entry: dict[str, Any] = {
                "seq": self._seq,
                "method": method,
                "path": path,
                "query": query,
                "body": body,
                "status": None,
                "fault": None,
                "detail": None,
            }
            self._entries.append(entry)
            return entry

    def entries(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(e) for e in self._entries]

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass
class Runtime:
    config: SandboxConfig
    store: Store
    rules: Rules = field(default_factory=Rules)  # of the v1 writes
    dashboard: Rules = field(default_factory=lambda: Rules(dashboard=True))  # admin API
    faults: FaultBook = field(default_factory=FaultBook)
    limiter: RateLimiter = field(default_factory=lambda: RateLimiter(0))
    log: RequestLog = field(default_factory=RequestLog)
