"""The one HTTP boundary: auth, timeouts, retries, pacing and error translation.

Every request goes through ``ServiceClient._send``, which paces it, sends it, and either
returns a 2xx response or raises a botctl error:

* ``ApiError``: the service answered with an error status (after retries where allowed).
  * ``ReadsUnavailable``: a read answered 404 (other than ``Chatbot not found``), 405 or 501,
    i.e. this deployment has no such read; ``live.py`` falls back to the state file.
  * ``AmbiguousApiError``: an attribute create answered 5xx. The service may have created it,
    so it is not retried; ``outcome_unknown`` is true and the caller resolves it by reading
    the attribute list before trying again.
* ``TransportError``: no usable answer. ``outcome_unknown`` is false only when the request
  certainly never reached the service (connect failures, pool timeout).

(The errors themselves are defined in ``botctl.errors``, the one error vocabulary.)

The API key lives only in the request headers: it is never formatted into a message, a trace
line or a repr, and every text that leaves this module is scrubbed of it once more in case the
service echoes it back.
"""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from botctl import contract
from botctl.defaults import DEFAULT_API_KEY_ENV, DEFAULT_REQUEST_TIMEOUT
from botctl.errors import (
    MAY_HAVE_BEEN_APPLIED,
    AmbiguousApiError,
    ApiError,
    ReadsUnavailable,
    ServiceError,
    TransportError,
)
from botctl.service.pacing import Pacer, RequestStats
from botctl.service.retry import (
    DEFAULT_RETRY,
    NEVER_SENT,
    Kind,
    RetryPolicy,
    may_retry_failure,
    may_retry_status,
    server_delay,
    window_exhausted_delay,
)

__all__ = ["RequestStats", "RetryPolicy", "ServiceClient"]

_EXCERPT = 200
_TRACE_BODY = 4000


@functools.cache
def _user_agent() -> str:
    try:
        return f"botctl/{metadata.version('botctl')}"
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "botctl/0"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's verifying TLS context, built once per process and shared by every client:
    loading the CA bundle is costly (see README, Benchmarks), and a run has one client per
    API key."""
    return httpx.create_ssl_context()


def _verify_for(base_url: str) -> ssl.SSLContext:
    if urlsplit(base_url).scheme == "https":
        return _tls_context()
    # Plain http never uses TLS (and redirects are not followed): a context that still
    # verifies but trusts no CA costs nothing to make and can never accept a certificate.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


@dataclass(frozen=True)
class _Call:
    method: str
    path: str
    operation: str  # human: "create attribute plan_tier"
    kind: Kind
    chatbot_id: str | None = None
    body: dict[str, Any] | None = None


class ServiceClient:
    """Async client of the Chatbot Management Service API v1 for one API key.

    ``base_url`` ends in ``/api/v1``. ``key_name`` is the environment variable the key came
    from, named in hints (its value never is). ``rate_limit`` paces this client to at most
    that many requests per second across all concurrent calls (0 = unpaced). ``trace``
    receives one line per request and per response, with the key masked.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        key_name: str = DEFAULT_API_KEY_ENV,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        retry: RetryPolicy = DEFAULT_RETRY,
        rate_limit: float = 0.0,
        trace: Callable[[str], None] | None = None,
        max_connections: int = 32,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.key_name = key_name
        self.retry = retry
        self.stats = RequestStats()
        self._api_key = api_key
        self._trace = trace
        self._pacer = Pacer(rate_limit, retry.clock, retry.sleep)
        self._http = httpx.AsyncClient(
            transport=transport,
            verify=_verify_for(self.base_url),
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(
                max_connections=max(16, max_connections),
                max_keepalive_connections=max(16, max_connections),
            ),
            headers={
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "User-Agent": _user_agent(),
            },
        )

    def __repr__(self) -> str:
        return f"ServiceClient(base_url={self.base_url!r}, key_name={self.key_name!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> ServiceClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- operations -------------------------------------------------------------------------

    async def list_chatbots(self) -> list[dict[str, Any]]:
        """All chatbot records of the account, raw; both documented and observed shapes."""
        call = _Call("GET", "/get-chatbots", "read chatbot list", "read")
        body = self._json(call, await self._send(call))
        records = body.get("chatbots") if isinstance(body, dict) else body
        if isinstance(records, dict):  # observed live shape {"chatbots": {"data": [...]}}
            records = records.get("data")
        return self._records(call, records)

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]:
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes"
        call = _Call("GET", path, "read attributes", "read", chatbot_id)
        body = self._json(call, await self._send(call))
        return self._records(call, body.get("data") if isinstance(body, dict) else None)

    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None:
        # Absolute values: sending the same body twice leaves the same settings, so retryable.
        body = {"chatbotId": chatbot_id, **fields}
        call = _Call(
            "POST", "/update-chatbot-settings", "update settings", "idempotent", chatbot_id, body
        )
        await self._send(call)

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name", ""))
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes"
        call = _Call("POST", path, f"create attribute {name}", "create", chatbot_id, body)
        return _data(await self._send(call))

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes/{_seg(name)}"
        call = _Call("PUT", path, f"update attribute {name}", "idempotent", chatbot_id, body)
        return _data(await self._send(call))

    # -- the request loop -------------------------------------------------------------------

    async def _send(self, call: _Call) -> httpx.Response:
        attempt = 0
        while True:
            attempt += 1
            waited = await self._pacer.acquire()  # not `+= await`: that reads before waiting
            self.stats.pace_wait += waited
            try:
                response = await self._attempt(call, attempt)
            except httpx.RequestError as exc:
                error = self._transport_error(call, exc)
                if attempt >= self.retry.max_attempts or not may_retry_failure(call.kind, exc):
                    raise error from exc
                await self._backoff(attempt, None)
                continue
            self._watch_window(response)
            if response.is_success:
                return response
            if attempt < self.retry.max_attempts and may_retry_status(
                call.kind, response.status_code
            ):
                await self._backoff(attempt, self._hint_delay(response))
                continue
            raise self._api_error(call, response, attempt)

    async def _attempt(self, call: _Call, attempt: int) -> httpx.Response:
        url = self.base_url + call.path
        self.stats.requests[call.method] += 1
        tracing = self._trace is not None  # trace lines (JSON of bodies) only when asked for
        of = f"attempt {attempt}/{self.retry.max_attempts}"
        if tracing:
            body = _trace_body(call.body)
            self._emit(f"-> {call.method} {url} {of} Authorization: Bearer ***{body}")
        started = self.retry.clock()
        try:
            response = await self._http.request(call.method, url, json=call.body)
        except httpx.RequestError as exc:
            if tracing:
                elapsed = (self.retry.clock() - started) * 1000
                self._emit(f"<- {type(exc).__name__} {call.method} {url} {elapsed:.0f}ms {of}")
            raise
        if tracing:
            elapsed = (self.retry.clock() - started) * 1000
            body = _trace_body(_maybe_json(response))
            self._emit(f"<- {response.status_code} {call.method} {url} {elapsed:.0f}ms {of}{body}")
        return response

    async def _backoff(self, attempt: int, hinted: float | None) -> None:
        delay = self.retry.cap(hinted) if hinted else self.retry.backoff(attempt)
        self.stats.retries += 1
        self.stats.backoff_wait += delay
        await self.retry.sleep(delay)

    def _hint_delay(self, response: httpx.Response) -> float | None:
        delay = server_delay(response.headers, self.retry.wall_clock())
        if delay and response.status_code == 429:
            # The limit is per key: hold every concurrent request of this client, not only
            # the one refused, so they stop bouncing off the same window.
            self._pacer.block_for(self.retry.cap(delay))
        return delay

    def _watch_window(self, response: httpx.Response) -> None:
        delay = window_exhausted_delay(response.headers, self.retry.wall_clock())
        if delay:
            self._pacer.block_for(self.retry.cap(delay))

    # -- translation ------------------------------------------------------------------------

    def _api_error(self, call: _Call, response: httpx.Response, attempts: int) -> ApiError:
        status = response.status_code
        message = self._scrub(_service_message(response))
        if call.kind == "read" and _reads_unavailable(status, message):
            return ReadsUnavailable(
                call.operation,
                status,
                message,
                chatbot_id=call.chatbot_id,
                hint=ReadsUnavailable.HINT,
            )
        cls = AmbiguousApiError if call.kind == "create" and status >= 500 else ApiError
        hint = self._hint(call, status, message, attempts)
        return cls(call.operation, status, message, chatbot_id=call.chatbot_id, hint=hint)

    def _hint(self, call: _Call, status: int, message: str, attempts: int) -> str:
        if status == 401:
            return f"check the API key in ${self.key_name}"
        if status == 403:
            return f"the account of ${self.key_name} is not allowed this, or its quota is used up"
        if status == 404:
            if message.strip() == contract.MSG_ATTRIBUTE_NOT_FOUND:
                return "attribute not found on this chatbot"
            return f"chatbot not found in the account of ${self.key_name}"
        if status == 429:
            return f"rate limited {attempts} times; lower --rate-limit or try again later"
        if call.kind == "create" and status >= 500:
            return f"{MAY_HAVE_BEEN_APPLIED}; botctl reads the attribute list before retrying"
        if status >= 500:
            return f"service error after {attempts} attempt(s); try again later"
        return ""

    def _transport_error(self, call: _Call, exc: httpx.RequestError) -> TransportError:
        host = urlsplit(self.base_url).hostname or self.base_url
        detail = str(exc) or type(exc).__name__
        # A read changes nothing, so "may have been applied" would only alarm the reader.
        doubt = "" if call.kind == "read" else f"; {MAY_HAVE_BEEN_APPLIED}"
        unknown = not isinstance(exc, NEVER_SENT)
        if not unknown:
            message = f"could not reach {host} ({detail}); the request was not sent"
        elif isinstance(exc, httpx.TimeoutException):
            message = f"no answer from {host} in time ({detail}){doubt}"
        else:
            message = f"connection to {host} failed ({detail}){doubt}"
        return TransportError(
            call.operation,
            self._scrub(message),
            chatbot_id=call.chatbot_id,
            outcome_unknown=unknown,
        )

    def _json(self, call: _Call, response: httpx.Response) -> Any:
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise self._shape_error(call, f"not JSON: {_excerpt(response.text)}") from None

    def _records(self, call: _Call, records: Any) -> list[dict[str, Any]]:
        if not isinstance(records, list) or not all(isinstance(r, dict) for r in records):
            raise self._shape_error(call, "expected a list of records")
        return records

    def _shape_error(self, call: _Call, what: str) -> ServiceError:
        message = self._scrub(f"unexpected response from the service: {what}")
        return ServiceError(call.operation, message, chatbot_id=call.chatbot_id)

    def _emit(self, line: str) -> None:
        if self._trace is not None:
            self._trace(self._scrub(line))

    def _scrub(self, text: str) -> str:
        # Belt and braces: nothing we format contains the key, but a service or proxy might
        # echo the Authorization header back in a body we quote.
        return text.replace(self._api_key, "***") if self._api_key else text


def _data(response: httpx.Response) -> dict[str, Any]:
    body = _maybe_json(response)
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, dict) else {}


def _seg(value: str) -> str:
    return quote(value, safe="")


def _reads_unavailable(status: int, message: str) -> bool:
    if status in (405, 501):
        return True
    chatbot_missing = message.strip().rstrip(".").lower() == contract.MSG_CHATBOT_NOT_FOUND.lower()
    return status == 404 and not chatbot_missing


def _service_message(response: httpx.Response) -> str:
    body = _maybe_json(response)
    if isinstance(body, dict):
        for key in ("message", "error"):
            if isinstance(body.get(key), str) and body[key]:
                return str(body[key])
    text = _excerpt(response.text)
    return text or response.reason_phrase or "(empty response)"


def _maybe_json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT else flat[: _EXCERPT - 3] + "..."


def _trace_body(body: Any) -> str:
    if body is None:
        return ""
    text = json.dumps(body, ensure_ascii=False, sort_keys=True)
    if len(text) > _TRACE_BODY:
        text = text[:_TRACE_BODY] + "..."
    return f" body={text}"
