"""Per-key token bucket: `rate` requests per second, bursts up to ceil(rate), on the
operations the contract says are rate limited."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass

# Contract 8: "Requests can be refused with 429 when a rate limit is exceeded on the contact
# and custom attribute operations"; section 7 lists 429 for those alone. Every other operation
# is never limited, nor counted: its documented statuses have no 429 (a 429 elsewhere is a
# fault to inject through the admin API, on purpose).
_LIMITED_COLLECTIONS = ("custom-attributes", "contacts")


def is_limited(path: str) -> bool:
    """Whether the operation at `path` (below the API prefix) is subject to the rate limit:
    /chatbots/{chatbotId}/custom-attributes... and /chatbots/{chatbotId}/contacts..."""
    parts = path.split("/")
    return len(parts) >= 4 and parts[1] == "chatbots" and parts[3] in _LIMITED_COLLECTIONS


@dataclass(frozen=True)
class Decision:
    allowed: bool
    limit: int
    remaining: int
    reset_ms: int  # Unix milliseconds when the bucket is full again (as the v2 docs define)
    retry_after: int  # whole seconds until one request is allowed; 0 when allowed

    def headers(self, *, window: bool = True) -> dict[str, str]:
        """The answer's headers: the window (unless ``window`` is off), and Retry-After on a
        refusal."""
        out = (
            {
                "X-RateLimit-Limit": str(self.limit),
                "X-RateLimit-Remaining": str(self.remaining),
                "X-RateLimit-Reset": str(self.reset_ms),
            }
            if window
            else {}
        )
        if not self.allowed:
            out["Retry-After"] = str(self.retry_after)
        return out


class RateLimiter:
    """A bucket per key; rate 0 disables limiting. Thread-safe and loop-agnostic."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.capacity = max(1, math.ceil(rate))
        self._lock = threading.Lock()
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (tokens, at)

    @property
    def enabled(self) -> bool:
        return self.rate > 0

    def check(self, key: str, now: float | None = None) -> Decision:
        now = time.time() if now is None else now
        with self._lock:
            tokens, at = self._buckets.get(key, (float(self.capacity), now))
            tokens = min(float(self.capacity), tokens + (now - at) * self.rate)
            allowed = tokens >= 1
            if allowed:
                tokens -= 1
            self._buckets[key] = (tokens, now)
        refill = (self.capacity - tokens) / self.rate
        wait = 0 if allowed else max(1, math.ceil((1 - tokens) / self.rate))
        return Decision(allowed, self.capacity, int(tokens), int((now + refill) * 1000), wait)

    def clear(self) -> None:
        with self._lock:
            self._buckets.clear()
