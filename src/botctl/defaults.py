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
# Conversation tests: how like the recorded answer a new one must be (expect.similarTo's
# minSimilarity when not given, and what `conversations pull` writes), and when a pulled
# conversation's questions are a near-duplicate of one already taken.
DEFAULT_MIN_SIMILARITY = 0.5
DEFAULT_DUPLICATE_SIMILARITY = 0.8
DEFAULT_PULL_SINCE = "7d"  # `conversations pull --since`
DEFAULT_PULL_MAX = 20  # tests one pull writes per chatbot
DEFAULT_PREVIEW_TTL = "1h"  # `preview acquire --ttl`: a pull request job's apply and tests
DEFAULT_PREVIEW_POLL = 2.0  # seconds between tries of a `preview acquire --wait`
# Seconds a preview acquire or release waits for the state lock at the least: it holds the
# lock for one read and one write, so a job racing another for it waits, never fails.
PREVIEW_LOCK_WAIT = 30.0
# Seconds one git process may run (the state's git backend, --changed-since); the agent's
# source has its own --fetch-timeout.
DEFAULT_GIT_TIMEOUT = 60.0
GIT_TIMEOUT_ENV = "BOTCTL_GIT_TIMEOUT"
# Seconds one attempt of an S3 state's request may wait to connect, and for an answer; an
# attempt is tried at most S3_ATTEMPTS times (boto3's own defaults, 60 s and 5 attempts, let
# a hung store hold a run for ten minutes).
DEFAULT_S3_TIMEOUT = 20.0
S3_TIMEOUT_ENV = "BOTCTL_S3_TIMEOUT"
S3_CONNECT_TIMEOUT = 5.0
S3_ATTEMPTS = 3
DEFAULT_FETCH_TIMEOUT = 60.0  # botctl agent --fetch-timeout
# What one revision of the agent's source may hold (its YAML files): more is an invalid
# revision. A file's limit is the loader's (config.yamlnodes.MAX_FILE_BYTES).
REVISION_MAX_FILES = 20_000
REVISION_MAX_FILE_BYTES = 10 * 2**20
REVISION_MAX_BYTES = 256 * 2**20
