"""botctl's defaults, each defined once. A plain module (no imports) so that the command line
can show them in --help without loading anything else."""

from __future__ import annotations

from pathlib import Path

DEFAULT_API_KEY_ENV = "BOTCTL_API_KEY"  # where a document's API key lives unless it says
DEFAULT_STATE_PATH = Path(".botctl/state.json")
DEFAULT_SANDBOX_DB = Path(".botctl/sandbox.db")
DEFAULT_PARALLELISM = 8  # chatbots processed at once (reads and writes)
# Contacts one run reads, at most, to count the values of attributes it archives or renames
# (--max-contact-reads): 200 pages of the largest size.
DEFAULT_MAX_CONTACT_READS = 200_000
DEFAULT_MAX_ARCHIVES = 50  # attributes one run may archive, across all chatbots
DEFAULT_MAX_ARCHIVE_PERCENT = 30.0  # of one chatbot's active attributes (when it has >= 10)
DEFAULT_PERCENT_CAP_FROM = 10  # active attributes a chatbot has before the percentage cap applies
DEFAULT_REQUEST_TIMEOUT = 30.0  # seconds for one whole attempt of a request
DEFAULT_MAX_RESPONSE_BYTES = 32 * 1024 * 1024  # decoded; the largest real answer is far smaller
DEFAULT_MAX_ATTEMPTS = 5  # tries of one request, the first included
# Backoff before retry n: up to base * 2**(n-1) seconds (full jitter), never over the maximum.
DEFAULT_RETRY_BASE_DELAY = 0.5
DEFAULT_RETRY_MAX_DELAY = 30.0
# The base's override, for test suites (botctl's own sets it near 0 so retries cost no time).
RETRY_BASE_DELAY_ENV = "BOTCTL_RETRY_BASE_DELAY"
COMMENT_LIMIT = 60_000  # characters of a Markdown comment: GitHub refuses more than 65,536
DEFAULT_ACCEPT_FOR = "7d"  # how long `drift --accept` acknowledges (a duration: 12h, 2w...)
DEFAULT_DRAIN_TIMEOUT = 20.0  # seconds an interrupted apply waits for requests in flight
DEFAULT_MAX_CONNECTIONS = 64  # the agent's listener: connections open at once
DEFAULT_WATCHDOG = "5m"  # the agent's /healthz fails when its loop stands still this long
STATE_KEY_ENV = "BOTCTL_STATE_KEY"  # the state key: fingerprints and state encryption
OLD_STATE_KEY_ENV = "BOTCTL_OLD_STATE_KEY"  # `state rekey`: the key the state was made under
