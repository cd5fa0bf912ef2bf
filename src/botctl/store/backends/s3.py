"""State in an S3 object: ``s3://bucket/key``, on AWS or any S3-compatible store.

The version of the state is the object's ETag. A write is a conditional PUT: ``If-Match:
<ETag read>`` (``If-None-Match: *`` when there was no state), which the store refuses with
412 when the object changed: a lost compare-and-swap. The lock is the object ``key + ".lock"``,
created with ``If-None-Match: *`` (so only one creator succeeds) and removed with ``If-Match``
on its own ETag. This needs a store that honours conditional writes (AWS S3 does; so do
MinIO, Cloudflare R2 and moto's server): one that ignores the headers gives no guarantee.

boto3 is an optional dependency (``botctl[s3]``), imported only when an ``s3://`` state is
used. Endpoint, region and credentials come from boto3's own configuration: the environment
(``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``...), ``~/.aws``, instance roles.
Its deadlines are botctl's (``BOTCTL_S3_TIMEOUT`` an attempt, at most ``S3_ATTEMPTS``): a
store that accepts and never answers fails the run, where boto3's defaults held it ten minutes.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from botctl.defaults import (
    DEFAULT_S3_TIMEOUT,
    S3_ATTEMPTS,
    S3_CONNECT_TIMEOUT,
    S3_TIMEOUT_ENV,
)
from botctl.errors import StateError
from botctl.store.backend import (
    LockInfo,
    LostCompareAndSwap,
    Snapshot,
    StateBackend,
    Version,
)

SCHEME = "s3://"


def request_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds one attempt of a request may wait for an answer: ``BOTCTL_S3_TIMEOUT``, else
    the default (an unusable value is the default too, as for git's)."""
    text = (os.environ if environ is None else environ).get(S3_TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_S3_TIMEOUT
    except ValueError:
        return DEFAULT_S3_TIMEOUT
    return value if 0 < value < float("inf") else DEFAULT_S3_TIMEOUT


_CHANGED = {"PreconditionFailed", "ConditionalRequestConflict", "NoSuchKey", "412", "409"}


def parse_s3_url(url: str) -> tuple[str, str]:
    bucket, _, key = url[len(SCHEME) :].partition("/")
    if not bucket or not key or key.endswith("/"):
        raise StateError(
            f"state URL {url!r}: expected s3://<bucket>/<key>, e.g. s3://my-bucket/botctl/state.json"
        )
    return bucket, key


class _Unsupported(Exception):
    """The store does not implement a header botctl sent (a conditional delete)."""


class S3Backend(StateBackend):
    poll_interval = 0.5

    def __init__(self, url: str) -> None:
        self.bucket, self.key = parse_s3_url(url)
        self.lock_key = self.key + ".lock"
        self.where = url
        try:
            import boto3
            from botocore.config import Config
            from botocore.exceptions import BotoCoreError, ClientError
        except ImportError:
            raise StateError(
                f"state {url} needs boto3, which is not installed: install botctl with its "
                "s3 extra, e.g. `pip install 'botctl[s3]'` or `uv tool install 'botctl[s3]'`"
            ) from None
        seconds = request_timeout()
        config = Config(
            connect_timeout=min(S3_CONNECT_TIMEOUT, seconds),
            read_timeout=seconds,
            retries={"total_max_attempts": S3_ATTEMPTS, "mode": "standard"},
        )
        self._client: Any = boto3.client("s3", config=config)
        self._client_error: type[Exception] = ClientError
        self._boto_error: type[Exception] = BotoCoreError

    def _call(self, action: str, operation: str, **params: Any) -> Any:
        """One S3 call; None when the object is missing or a condition failed."""
        try:
            return getattr(self._client, operation)(Bucket=self.bucket, **params)
        except self._client_error as exc:
            error = getattr(exc, "response", {}).get("Error", {})
            code = str(error.get("Code", ""))
            if code in _CHANGED:
                return None
            if code == "NotImplemented":
                raise _Unsupported(code) from None
            message = error.get("Message") or code
            raise StateError(f"state {self.where}: cannot {action}: {code}: {message}") from None
        except self._boto_error as exc:
            raise StateError(f"state {self.where}: cannot {action}: {exc}") from None

    def _get(self, key: str, action: str) -> tuple[str, str] | None:
        got = self._call(action, "get_object", Key=key)
        if got is None:
            return None
        try:
            body = got["Body"].read()
        except self._boto_error as exc:
            raise StateError(f"state {self.where}: cannot {action}: {exc}") from None
        return body.decode("utf-8", errors="replace"), str(got["ETag"])

    def read(self) -> Snapshot:
        found = self._get(self.key, "read the state")
        return Snapshot(None, None) if found is None else Snapshot(*found)

    def write(self, text: str, expected: Version, message: str) -> Version:
        condition = {"IfMatch": expected} if expected is not None else {"IfNoneMatch": "*"}
        put = self._call(
            "write the state",
            "put_object",
            Key=self.key,
            Body=text.encode("utf-8"),
            ContentType="application/json",
            **condition,
        )
        if put is None:
            raise LostCompareAndSwap(self.where)
        return str(put["ETag"])

    def create_lock(self, info: LockInfo) -> bool:
        put = self._call(
            "create the lock",
            "put_object",
            Key=self.lock_key,
            Body=info.to_text().encode("utf-8"),
            ContentType="application/json",
            IfNoneMatch="*",
        )
        return put is not None

    def replace_lock(self, expected: LockInfo, new: LockInfo, message: str) -> bool:
        """Conditional on the lock's ETag as read: of two standbys taking over a lapsed lease,
        one wins."""
        found = self._get(self.lock_key, "read the lock")
        if found is None or LockInfo.from_text(found[0]) != expected:
            return False
        put = self._call(
            "renew the lease",
            "put_object",
            Key=self.lock_key,
            Body=new.to_text().encode("utf-8"),
            ContentType="application/json",
            IfMatch=found[1],
        )
        return put is not None

    def read_lock(self) -> LockInfo | None:
        found = self._get(self.lock_key, "read the lock")
        return None if found is None else LockInfo.from_text(found[0])

    def remove_lock(self, expected: LockInfo | None, message: str) -> LockInfo | None:
        found = self._get(self.lock_key, "read the lock")
        if found is None:
            return None
        current = LockInfo.from_text(found[0])
        if expected is not None and current != expected:
            return None
        # Conditional on the ETag just read, so that a lock replaced meanwhile is left alone;
        # stores without conditional deletes get a plain one (the window is milliseconds).
        try:
            deleted = self._call(
                "remove the lock", "delete_object", Key=self.lock_key, IfMatch=found[1]
            )
        except _Unsupported:
            deleted = self._call("remove the lock", "delete_object", Key=self.lock_key)
        return None if deleted is None else current
