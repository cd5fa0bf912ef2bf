"""From one request's outcome to what botctl works with: the records of a read, or the botctl
error a person can act on. Every error says which operation on which chatbot, what the service
answered or why there was no usable answer, and what to check; every text is redacted of the
key and the secrets (in all their escaped forms) before it is cut short, and cleaned of
control characters, since much of it is the service's own words.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx

from botctl import contract
from botctl.errors import (
    MAY_HAVE_BEEN_APPLIED,
    AmbiguousApiError,
    ApiError,
    ReadsUnavailable,
    ServiceError,
    TransportError,
)
from botctl.service.reply import (
    DeadlineExceeded,
    NestedTooDeep,
    Reply,
    ResponseTooLarge,
    format_size,
)
from botctl.service.retry import NEVER_SENT, Kind
from botctl.values import SECRET_MASK, mask_url_credentials

LIST_CHATBOTS = "/get-chatbots"
_EXCERPT = 200
_TRACE_BODY = 4000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    operation: str  # human: "create attribute plan_tier"
    kind: Kind
    chatbot_id: str | None = None
    body: dict[str, Any] | None = None
    accept: str | None = None  # the Accept header, when not JSON (the chat's event stream)
    # The operation without what it names ("create attribute"), when it names something: the
    # metrics label, whose values must stay few (not one per attribute or contact).
    label: str | None = None

    @property
    def metric(self) -> str:
        return self.label if self.label is not None else self.operation


@dataclass(frozen=True)
class Translator:
    """Errors and quoted text for the client of one key. ``scrub`` redacts a text."""

    base_url: str
    key_name: str
    request_timeout: float
    scrub: Callable[[str], str]
    # The secrets, and the whole values that hold one: a body's string equal to one of them
    # is masked where it stands (the client's ``Redactor.secrets``).
    exact: Collection[str] = ()

    # -- answers with an error status -------------------------------------------------------

    def api_error(self, call: Call, reply: Reply, attempts: int) -> ServiceError:
        status = reply.status_code
        message = self.quote(reply.service_message()) or reply.reason_phrase or "(empty answer)"
        if call.kind == "read" and reads_unavailable(call, status, message):
            return ReadsUnavailable(
                call.operation,
                f"HTTP {status}: {message} ({ReadsUnavailable.HINT})",
                status=status,
                chatbot_id=call.chatbot_id,
            )
        cls = AmbiguousApiError if call.kind == "create" and status >= 500 else ApiError
        hint = self._hint(call, reply, message, attempts)
        return cls(call.operation, status, message, chatbot_id=call.chatbot_id, hint=hint)

    def _hint(self, call: Call, reply: Reply, message: str, attempts: int) -> str:
        status = reply.status_code
        if 300 <= status < 400:
            target = reply.headers.get("location", "")
            to = f" to {self.quote(target)}" if target else ""
            return (
                f"redirected{to}; botctl follows no redirect, so that the key never goes "
                "elsewhere: is --api-url the service's own base address?"
            )
        if status == 401:
            return f"check the API key in ${self.key_name}"
        if status == 403:
            return f"the account of ${self.key_name} is not allowed this, or its quota is used up"
        if status == 404 and call.path == LIST_CHATBOTS:
            url = self.scrub(shown(self.base_url + call.path))
            return (
                f"nothing answers GET {url}: is --api-url right? It must be the service's "
                "base address, ending in /api/v1. A deployment that offers no reads is "
                "declared with --no-reads or BOTCTL_NO_READS=1 (plan, apply, drift)"
            )
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

    # -- no usable answer -------------------------------------------------------------------

    def transport_error(self, call: Call, exc: httpx.RequestError, attempts: int) -> TransportError:
        host = urlsplit(self.base_url).hostname or self.base_url
        detail = str(exc) or type(exc).__name__
        # A read changes nothing, so "may have been applied" would only alarm the reader.
        doubt = "" if call.kind == "read" else f"; {MAY_HAVE_BEEN_APPLIED}"
        tries = f" ({attempts} attempts)" if attempts > 1 else ""
        request = f"{call.method} {call.path}"
        unknown = not isinstance(exc, NEVER_SENT)
        if isinstance(exc, ResponseTooLarge) and exc.together:
            message = (
                f"the answers being read at once passed {format_size(exc.limit)} (4 times "
                f"--max-response-bytes) while reading {request}; botctl stopped reading{doubt}"
            )
        elif isinstance(exc, ResponseTooLarge):
            message = (
                f"the answer to {request} is larger than {format_size(exc.limit)} "
                f"(--max-response-bytes); botctl stopped reading it{doubt}"
            )
        elif isinstance(exc, DeadlineExceeded | httpx.ReadTimeout | httpx.WriteTimeout):
            # httpx's own per-read timeout is the deadline too: whichever fired first, the
            # attempt had no complete answer within --request-timeout.
            message = (
                f"no complete answer to {request} from {host} within "
                f"{self.request_timeout:g} s (--request-timeout){tries}{doubt}"
            )
        elif isinstance(exc, httpx.DecodingError):
            message = f"the answer to {request} could not be decoded: {detail}{doubt}"
        elif not unknown:
            message = f"could not reach {host} ({detail}); the request was not sent"
        else:
            message = f"connection to {host} failed ({detail}){tries}{doubt}"
        return TransportError(
            call.operation,
            printable(self.scrub(message)),
            chatbot_id=call.chatbot_id,
            outcome_unknown=unknown,
        )

    # -- answers of the wrong shape ---------------------------------------------------------

    def json_of(self, call: Call, reply: Reply) -> Any:
        if not reply.content.strip():
            raise self.shape_error(call, f"HTTP {reply.status_code} with an empty body")
        try:
            return reply.json()
        except NestedTooDeep as exc:
            raise self.shape_error(call, str(exc)) from None
        except ValueError:
            kind = self.quote(reply.headers.get("content-type", "no content type"))
            text = self.quote(reply.readable())
            raise self.shape_error(call, f"not JSON ({kind}): {text}") from None

    def records(self, call: Call, records: Any, shape: str, what: str) -> list[dict[str, Any]]:
        if not isinstance(records, list):
            raise self.shape_error(call, f"expected {shape}, got {self.describe(records)}")
        for number, record in enumerate(records, 1):
            if not isinstance(record, dict):
                raise self.shape_error(
                    call, f"item {number} of {what} is {self.describe(record)}, not an object"
                )
        return records

    def shape_error(self, call: Call, what: str) -> ServiceError:
        message = printable(self.scrub(f"unexpected answer to {call.method} {call.path}: {what}"))
        return ServiceError(call.operation, message, chatbot_id=call.chatbot_id)

    def describe(self, value: Any) -> str:
        """What a JSON value is, for a message about a wrong shape."""
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "a boolean"
        if isinstance(value, int | float):
            return "a number"
        if isinstance(value, str):
            return f"a string ({self.quote(value, 40)!r})"
        if isinstance(value, list):
            return f"a list of {len(value)}"
        if isinstance(value, dict):
            keys = sorted(str(key) for key in value)
            shown_keys = ", ".join(repr(self.quote(key, 40)) for key in keys[:5])
            more = f" and {len(keys) - 5} more" if len(keys) > 5 else ""
            return f"an object with keys {shown_keys}{more}" if keys else "an empty object"
        return type(value).__name__

    # -- text -------------------------------------------------------------------------------

    def quote(self, text: str, limit: int = _EXCERPT) -> str:
        """Text from the service, fit for a message: redacted first (so that no cut can
        leave half a secret), then on one line, without control characters, and short."""
        flat = printable(" ".join(self.scrub(text).split()))
        return flat if len(flat) <= limit else flat[: limit - 3] + "..."

    def trace_body(self, body: Any) -> str:
        if body is None:
            return ""
        # Each string is redacted before JSON escapes it once more: a service that quotes
        # a request body back in its message holds a secret escaped already.
        text = self.scrub(json.dumps(self._scrubbed(body), ensure_ascii=False, sort_keys=True))
        if len(text) > _TRACE_BODY:
            text = text[:_TRACE_BODY] + "..."
        return f" body={printable(text)}"

    def _scrubbed(self, value: Any) -> Any:
        if isinstance(value, str):
            # A value that is a secret, or the whole text that holds one, is masked where it
            # stands, however short: the substring net leaves short secrets alone.
            return SECRET_MASK if value in self.exact else self.scrub(value)
        if isinstance(value, list):
            return [self._scrubbed(item) for item in value]
        if isinstance(value, dict):
            return {self.scrub(str(k)): self._scrubbed(v) for k, v in value.items()}
        return value


def reads_unavailable(call: Call, status: int, message: str) -> bool:
    """API-NOTES note 3: a deployment without reads answers them 404 or 405. A 404 on the
    chatbot list is not taken for that: it is what any wrong base URL answers, and a
    deployment without reads is declared with --no-reads. 405 and 501 say the path exists
    and refuses GET, which a wrong URL does not; on the attribute list, a 404 that is not
    "Chatbot not found" is only reached once the chatbot list worked or said 405."""
    if status in (405, 501):
        return True
    if status != 404 or call.path == LIST_CHATBOTS:
        return False
    chatbot_missing = message.strip().rstrip(".").lower() == contract.MSG_CHATBOT_NOT_FOUND.lower()
    return not chatbot_missing


def shown(url: str) -> str:
    """A URL as printed: without any user:password@ it may carry, and without the value of a
    query parameter named like a credential (``?access_token=``)."""
    parts = urlsplit(url)
    return mask_url_credentials(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl())


def printable(text: str) -> str:
    """No terminal control sequence from a service reaches a terminal through a message."""
    return _CONTROL.sub("\ufffd", text)
