"""How a run talks to the service: address, pace, patience. Plain data, importable without
the HTTP stack (``botctl validate`` never loads it)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from botctl.defaults import (
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_RETRY_BASE_DELAY,
    DEFAULT_RETRY_MAX_DELAY,
    DEFAULT_SANDBOX_DB,
)
from botctl.service.pacing import OnWait, RequestStats
from botctl.service.redact import NOTHING_SECRET, Redactor

# Asked right before every request goes out (and every retry): raises (a ``BotctlError``
# saying why) when this process may no longer send anything. The agent hands its lease's
# check (``store.lock.Lease.fence``); the service layer never knows what a lease is.
Fence = Callable[[], None]


@dataclass(frozen=True)
class ServiceOptions:
    api_url: str | None = None
    sandbox: bool = False
    sandbox_db: str = str(DEFAULT_SANDBOX_DB)
    rate_limit: float = 0.0
    timeout: float = DEFAULT_REQUEST_TIMEOUT  # one whole attempt (--request-timeout)
    max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES  # decoded (--max-response-bytes)
    no_reads: bool = False  # send no read at all, work from state (--no-reads)
    no_contact_reads: bool = False  # never read the contact list (--no-contact-reads)
    # Models the embedded sandbox accepts beside the contract's list: the configuration's
    # own when it is run with --allow-unknown-models, so that --sandbox agrees with it.
    sandbox_models: tuple[str, ...] = ()
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    retry_base_delay: float = DEFAULT_RETRY_BASE_DELAY  # BOTCTL_RETRY_BASE_DELAY (tests)
    retry_max_delay: float = DEFAULT_RETRY_MAX_DELAY
    trace: Callable[[str], None] | None = None
    # When given, every client's request counts are added here as it closes (benchmarks,
    # the CLI's line on requests refused and waits on the limit).
    stats: RequestStats | None = None
    on_wait: OnWait | None = None  # told of each wait for the pace or the service's limit
    # What every message and trace masks besides the keys: the configuration's
    # ${secret:...} values (built by the flow once it has loaded them).
    redactor: Redactor = NOTHING_SECRET
    # The agent's lease, checked immediately before each request is sent (``Fence``).
    fence: Fence | None = None
