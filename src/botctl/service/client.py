"""The one HTTP boundary: auth, timeouts, retries, pacing and error translation.

Every request goes through ``ServiceClient._send``, which paces it, sends it, and either
returns a 2xx response or raises a botctl error:

* ``ApiError``: the service answered with an error status (after retries where allowed).
  A 404 on the chatbot list names the URL: it almost always means a wrong ``--api-url``.
  * ``AmbiguousApiError``: an attribute create answered 5xx. The service may have created it,
    so it is not retried; ``outcome_unknown`` is true and the caller resolves it by reading
    the attribute list before trying again.
* ``ReadsUnavailable``: botctl cannot read this. Either the deployment says it has no such
  read (405 or 501 on a read; 404 on the attribute list other than ``Chatbot not found``;
  API-NOTES note 3), or reads are off (``--no-reads``) and no request was sent. ``live.py``
  falls back to the state file.
* ``TransportError``: no usable answer: unreachable, dropped, no complete answer within the
  per-attempt deadline (``--request-timeout``), a body over ``--max-response-bytes``, an
  encoding that cannot be decoded. ``outcome_unknown`` is false only when the request
  certainly never reached the service (connect failures, pool timeout).

Every answer is read through ``reply.receive``: streamed, decoded in bounded steps and capped,
inside a deadline that covers the whole attempt (connect, send, headers and the last byte of
the body), so neither a huge, compressed nor a dripping answer can hold a run.

(The errors themselves are defined in ``botctl.errors``, the one error vocabulary.)

The API key lives only in the request headers: it is never formatted into a message, a trace
line or a repr, and every text that leaves this module is redacted once more, in every
escaped and percent-encoded form, in case the service echoes it back (so are the values
marked ``${secret:...}`` that requests carry).
"""

from __future__ import annotations

import asyncio
import functools
import ssl
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import httpx

from botctl import contract
from botctl.defaults import (
    DEFAULT_API_KEY_ENV,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_REQUEST_TIMEOUT,
)
from botctl.errors import ReadsUnavailable
from botctl.service.inflate import ACCEPT_ENCODING
from botctl.service.options import Fence
from botctl.service.pacing import OnWait, Pacer, RequestStats
from botctl.service.redact import NOTHING_SECRET, Redactor, check_api_key
from botctl.service.reply import DeadlineExceeded, InFlight, Reply, receive
from botctl.service.retry import (
    DEFAULT_RETRY,
    Kind,
    RetryPolicy,
    announced_limit,
    announced_window,
    may_retry_failure,
    may_retry_status,
    server_delay,
)
from botctl.service.sse import ChatAnswer, parse_events
from botctl.service.translate import LIST_CHATBOTS, Call, Translator
from botctl.service.wire import AsyncioTransport, proxied

__all__ = [
    "IN_FLIGHT_CAPS",
    "ChatAnswer",
    "InFlight",
    "RequestStats",
    "RetryPolicy",
    "ServiceClient",
]

# Answers read at once share a cap of this many single caps (see reply.InFlight).
IN_FLIGHT_CAPS = 4


@functools.cache
def _user_agent() -> str:
    try:
        return f"botctl/{metadata.version('botctl')}"
    except metadata.PackageNotFoundError:  # running from a source tree without install
        return "botctl/0"


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's verifying TLS context, built once per process and shared by every client:
    loading the CA bundle takes ~30 ms, and a run has one client per API key."""
    return httpx.create_ssl_context()


def _verify_for(base_url: str) -> ssl.SSLContext:
    if urlsplit(base_url).scheme == "https":
        return _tls_context()
    # Plain http never uses TLS (and redirects are not followed): a context that still
    # verifies but trusts no CA costs nothing to make and can never accept a certificate.
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class ServiceClient:
    """Async client of the Chatbot Management Service API v1 for one API key.

    ``base_url`` ends in ``/api/v1``. ``key_name`` is the environment variable the key came
    from, named in hints (its value never is); a key no header can carry is refused here.
    ``timeout`` bounds each attempt as a whole, from connecting to the last byte of the
    answer; ``max_response_bytes`` caps each decoded answer, and ``in_flight`` (shared by
    the clients of a run) all answers being read at once. ``reads=False`` (``--no-reads``)
    sends no read at all: reads raise ``ReadsUnavailable`` at once. ``rate_limit`` paces this
    client to at most that many requests per second across all concurrent calls (0 =
    unpaced; the service's announced window and its 429s pace it too). ``on_wait`` is told
    of each wait for a turn. ``trace`` receives one line per request and per response.
    ``redactor`` masks, besides this client's key, what the run must never show (the
    configuration's ``${secret:...}`` values) in every text this client produces.
    ``fence`` (the agent's lease) is asked immediately before every request and every retry
    goes out: when it raises, nothing is sent and its error is the request's.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        key_name: str = DEFAULT_API_KEY_ENV,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_REQUEST_TIMEOUT,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        reads: bool = True,
        retry: RetryPolicy = DEFAULT_RETRY,
        rate_limit: float = 0.0,
        trace: Callable[[str], None] | None = None,
        max_connections: int = 32,
        redactor: Redactor = NOTHING_SECRET,
        in_flight: InFlight | None = None,
        contact_reads: bool = True,
        on_wait: OnWait | None = None,
        fence: Fence | None = None,
    ) -> None:
        check_api_key(key_name, api_key)
        self.base_url = base_url.rstrip("/")
        self.key_name = key_name
        self.retry = retry
        self.request_timeout = timeout
        self.max_response_bytes = max_response_bytes
        self.in_flight = in_flight or InFlight(IN_FLIGHT_CAPS * max_response_bytes)
        self.reads = reads
        # --no-contact-reads: the contact list is never requested (``ReadsUnavailable``).
        self.contact_reads = contact_reads
        self.stats = RequestStats()
        # Reads the deployment said it does not offer: (operation, status) -> how often.
        self.refused_reads: Counter[tuple[str, int]] = Counter()
        self._api_key = api_key
        self._redact = redactor.with_key(api_key)
        self._trace = trace
        self._fence = fence
        self._say = Translator(self.base_url, key_name, timeout, self._scrub, redactor.secrets)
        self._pacer = Pacer(rate_limit, retry.clock, retry.sleep, on_wait, key_name)
        verify = _verify_for(self.base_url)
        limits = httpx.Limits(
            max_connections=max(16, max_connections),
            max_keepalive_connections=max(16, max_connections),
        )
        if transport is None and not proxied():
            # httpx's pool over asyncio's sockets (wire.py): the same requests, less CPU each.
            transport = AsyncioTransport(ssl_context=verify, limits=limits)
        # Requests go to the transport itself: httpx's client around it keeps cookies, takes
        # credentials from the URL, follows redirects when asked and runs event hooks, and
        # botctl uses none of these (0.15 ms an answer). A proxy from the environment (no
        # transport here) and credentials in the URL keep the client's whole path.
        self._direct = None if transport is None or urlsplit(self.base_url).username else transport
        self._http = httpx.AsyncClient(
            transport=transport,
            verify=verify,
            timeout=httpx.Timeout(timeout),
            limits=limits,
            headers={
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                "Accept-Encoding": ACCEPT_ENCODING,  # only what inflate.py decodes, bounded
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
        call = Call("GET", LIST_CHATBOTS, "read chatbot list", "read")
        body = self._say.json_of(call, await self._send(call))
        # A wrong shape is described as what it is: the object itself when a key is missing.
        records = body.get("chatbots", body) if isinstance(body, dict) else body
        if isinstance(records, dict):  # observed live shape {"chatbots": {"data": [...]}}
            records = records.get("data", records)
        return self._say.records(call, records, '{"chatbots": [...]}', "the chatbot list")

    async def list_attributes(self, chatbot_id: str) -> list[dict[str, Any]]:
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes"
        call = Call("GET", path, "read attributes", "read", chatbot_id)
        body = self._say.json_of(call, await self._send(call))
        records = body.get("data", body) if isinstance(body, dict) else body
        return self._say.records(call, records, '{"data": [...]}', "the attribute list")

    async def update_settings(self, chatbot_id: str, fields: dict[str, Any]) -> None:
        # Absolute values: sending the same body twice leaves the same settings, so retryable.
        body = {"chatbotId": chatbot_id, **fields}
        call = Call(
            "POST", "/update-chatbot-settings", "update settings", "idempotent", chatbot_id, body
        )
        await self._send(call)

    async def create_attribute(self, chatbot_id: str, body: dict[str, Any]) -> dict[str, Any]:
        name = str(body.get("name", ""))
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes"
        call = Call(
            "POST",
            path,
            f"create attribute {name}",
            "create",
            chatbot_id,
            body,
            label="create attribute",
        )
        return _data(await self._send(call))

    async def update_attribute(
        self, chatbot_id: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        path = f"/chatbots/{_seg(chatbot_id)}/custom-attributes/{_seg(name)}"
        call = Call(
            "PUT",
            path,
            f"update attribute {name}",
            "idempotent",
            chatbot_id,
            body,
            label="update attribute",
        )
        return _data(await self._send(call))

    async def request(
        self,
        method: str,
        path: str,
        operation: str,
        kind: Kind,
        *,
        chatbot_id: str | None = None,
        body: dict[str, Any] | None = None,
        label: str | None = None,
    ) -> Any:
        """One request under ``path`` (below the API's base URL), with everything the named
        operations above get: retries as ``kind`` allows ("read", "idempotent", "create"),
        pacing, the deadline, bounded answers, errors that name ``operation`` and never the
        key. Returns the answer's JSON (None when it is empty). The building block of a
        resource kind's own methods; a path segment from data goes through ``path_segment``.
        An ``operation`` that names what it acts on ("update widget w1") gives ``label``, the
        operation without it ("update widget"), for the metrics."""
        call = Call(method, path, operation, kind, chatbot_id, body, label=label)
        reply = await self._send(call)
        return self._say.json_of(call, reply) if reply.content.strip() else None

    async def list_contacts(
        self, chatbot_id: str, page: int, per_page: int = contract.CONTACTS_PAGE_SIZE_MAX
    ) -> ContactPage:
        """One page of the chatbot's contacts (4.5; `per_page`/`page` per API-NOTES)."""
        path = f"/chatbots/{_seg(chatbot_id)}/contacts?per_page={per_page}&page={page}"
        call = Call("GET", path, "read contacts", "read", chatbot_id)
        if not self.contact_reads:
            raise ReadsUnavailable(
                call.operation,
                "contact reads are off (--no-contact-reads); nothing was sent",
                status=None,
                chatbot_id=chatbot_id,
            )
        body = self._say.json_of(call, await self._send(call))
        records = body.get("data") if isinstance(body, dict) else body
        shape = '{"data": [...], "total": N, "pages": {...}}'
        contacts = self._say.records(call, records, shape, "the contact list")
        total = body.get("total") if isinstance(body, dict) else None
        pages = body.get("pages") if isinstance(body, dict) else None
        total_pages = pages.get("total_pages") if isinstance(pages, dict) else None
        return ContactPage(
            contacts,
            total if _count(total) else None,
            total_pages if _count(total_pages) else None,
        )

    async def list_conversations(
        self,
        chatbot_id: str,
        page: int,
        *,
        start: str | None = None,
        end: str | None = None,
        sources: tuple[str, ...] = (),
        size: int = contract.CONVERSATIONS_PAGE_SIZE_MAX,
    ) -> list[dict[str, Any]]:
        """One page of the chatbot's stored conversations (4.6, with API-NOTES' names:
        ``chatbotId``, ``filteredSources`` (comma-separated), ``startDate``/``endDate``
        (YYYY-MM-DD), ``page``, ``size``). The answer has no totals: a page shorter than
        ``size`` is the last."""
        query: dict[str, str | int] = {"chatbotId": chatbot_id}
        if sources:
            query["filteredSources"] = ",".join(sources)
        if start is not None:
            query["startDate"] = start
        if end is not None:
            query["endDate"] = end
        query.update(page=page, size=size)
        path = "/get-conversations?" + urlencode(query, quote_via=quote)
        call = Call("GET", path, "read conversations", "read", chatbot_id)
        body = self._say.json_of(call, await self._send(call))
        records = body.get("data") if isinstance(body, dict) else body
        return self._say.records(call, records, '{"data": [...]}', "the conversation list")

    async def update_contact(
        self, chatbot_id: str, contact_id: str, custom_attributes: dict[str, Any]
    ) -> dict[str, Any]:
        """4.7, sending only `custom_attributes` (whole: correct whether the service merges
        or replaces the map). The same body twice leaves the same contact: retryable."""
        path = f"/chatbots/{_seg(chatbot_id)}/contacts/{_seg(contact_id)}"
        body = {"data": {"custom_attributes": custom_attributes}}
        call = Call(
            "PATCH",
            path,
            f"update contact {contact_id}",
            "idempotent",
            chatbot_id,
            body,
            label="update contact",
        )
        return _data(await self._send(call))

    async def chat(
        self,
        chatbot_id: str,
        messages: list[dict[str, str]],
        *,
        stream: bool = False,
        model: str | None = None,
        temperature: float | None = None,
        conversation_id: str | None = None,
    ) -> ChatAnswer:
        """4.2: the chatbot's answer to the conversation ``messages`` (all of it so far). Not
        stored on the service unless ``conversation_id`` is given. With ``stream`` the answer
        is read as data-only server-sent events up to ``data: [DONE]``, and the time to the
        first event is measured. A 403 is the plan's (chat needs a paid plan; gpt-4 and
        gpt-4-turbo the standard plan): the caller says so."""
        body: dict[str, Any] = {"chatbotId": chatbot_id, "messages": messages}
        if stream:
            body["stream"] = True
        if model is not None:
            body["model"] = model
        if temperature is not None:
            body["temperature"] = temperature
        if conversation_id is not None:
            body["conversationId"] = conversation_id
        accept = "text/event-stream" if stream else None
        # Retried like a write that repeats safely: unsaved, or saved replacing itself (4.2).
        call = Call("POST", "/chat", "chat", "idempotent", chatbot_id, body, accept)
        reply = await self._send(call)
        content_type = reply.headers.get("content-type", "").lower()
        if stream and "text/event-stream" in content_type:
            try:
                text = parse_events(reply.content.decode("utf-8"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise self._say.shape_error(call, f"the event stream is unusable: {exc}") from None
            return ChatAnswer(text, reply.elapsed, reply.first_byte, streamed=True)
        answer = self._say.json_of(call, reply)
        said = answer.get("text") if isinstance(answer, dict) else None
        if not isinstance(said, str):
            raise self._say.shape_error(
                call, f'expected {{"text": "..."}}, got {self._say.describe(answer)}'
            )
        return ChatAnswer(said, reply.elapsed, None, streamed=False)

    # -- the request loop -------------------------------------------------------------------

    async def _send(self, call: Call) -> Reply:
        if call.kind == "read" and not self.reads:
            raise ReadsUnavailable(
                call.operation,
                "reads are off (--no-reads); nothing was sent",
                status=None,
                chatbot_id=call.chatbot_id,
            )
        attempt = 0
        while True:
            attempt += 1
            waited = await self._pacer.acquire()  # not `+= await`: that reads before waiting
            self.stats.pace_wait += waited
            if self._pacer.limit_waited:
                self.stats.limit_wait[self.key_name] = self._pacer.limit_waited
            if self._fence is not None:
                self._fence()  # after the wait for a turn, which may have been long
            sent_at = self.retry.clock()
            try:
                reply = await self._attempt(call, attempt)
            except httpx.RequestError as exc:
                self.stats.responses[(call.metric, "error")] += 1
                if attempt >= self.retry.max_attempts or not may_retry_failure(call.kind, exc):
                    self.stats.failed += 1
                    # Not chained: httpx's own text may quote what botctl just redacted.
                    raise self._say.transport_error(call, exc, attempt) from None
                await self._backoff(attempt, None)
                continue
            self.stats.responses[(call.metric, str(reply.status_code))] += 1
            announced = self._watch_window(reply)
            if reply.status_code == 429:
                self.stats.rate_limited += 1
                hint = server_delay(reply.headers, self.retry.wall_clock())
                self._pacer.refused(announced=announced, sent_at=sent_at, retry_after=hint)
            if reply.is_success:
                self._pacer.succeeded()
                return reply
            if attempt < self.retry.max_attempts and may_retry_status(call.kind, reply.status_code):
                await self._backoff(attempt, self._hint_delay(reply))
                continue
            self.stats.failed += 1
            error = self._say.api_error(call, reply, attempt)
            if isinstance(error, ReadsUnavailable) and error.status is not None:
                self.refused_reads[(call.operation, error.status)] += 1
            raise error

    async def _attempt(self, call: Call, attempt: int) -> Reply:
        """One try, within the deadline: neither a silent nor a dripping server stretches it
        (httpx's own timeouts are per read, and a byte every few seconds resets them)."""
        url = self.base_url + call.path
        self.stats.requests[call.method] += 1
        self.stats.by_key[self.key_name] += 1
        tracing = self._trace is not None  # trace lines (JSON of bodies) only when asked for
        of = f"attempt {attempt}/{self.retry.max_attempts}"
        if tracing:
            body = self._say.trace_body(call.body)
            self._emit(f"-> {call.method} {url} {of} Authorization: Bearer ***{body}")
        started = self.retry.clock()
        headers = {"Accept": call.accept} if call.accept else None
        request = self._http.build_request(call.method, url, json=call.body, headers=headers)
        if self._fence is not None:
            request.extensions["trace"] = self._fence_at_send
        deadline = asyncio.timeout(self.request_timeout)
        try:
            try:
                async with deadline:
                    reply = await receive(
                        self._exchange,
                        request,
                        max_bytes=self.max_response_bytes,
                        in_flight=self.in_flight,
                    )
            except TimeoutError:
                if not deadline.expired():
                    raise
                raise DeadlineExceeded("deadline", request=request) from None
        except httpx.RequestError as exc:
            if tracing:
                elapsed = (self.retry.clock() - started) * 1000
                self._emit(f"<- {type(exc).__name__} {call.method} {url} {elapsed:.0f}ms {of}")
            raise
        if tracing:
            elapsed = (self.retry.clock() - started) * 1000
            body = self._say.trace_body(reply.maybe_json())
            self._emit(f"<- {reply.status_code} {call.method} {url} {elapsed:.0f}ms {of}{body}")
        return reply

    async def _exchange(self, request: httpx.Request) -> httpx.Response:
        """The response to ``request``, its body not read yet."""
        if self._direct is None:
            return await self._http.send(request, stream=True)
        response = await self._direct.handle_async_request(request)
        response.request = request
        return response

    async def _fence_at_send(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: the fence asked once more on the connection, after it was
        opened (which may take a while) and before the first byte of the request is written,
        the last moment at which a request can still be kept from the service. Raising here
        closes the connection with nothing sent."""
        if event.endswith(".send_request_headers.started"):
            assert self._fence is not None
            self._fence()

    async def _backoff(self, attempt: int, hinted: float | None) -> None:
        delay = self.retry.cap(hinted) if hinted else self.retry.backoff(attempt)
        self.stats.retries += 1
        self.stats.backoff_wait += delay
        await self.retry.sleep(delay)

    def _hint_delay(self, reply: Reply) -> float | None:
        delay = server_delay(reply.headers, self.retry.wall_clock())
        if delay and reply.status_code == 429:
            # The limit is per key: hold every concurrent request of this client, not only
            # the one refused, so they stop bouncing off the same window.
            self._pacer.block_for(self.retry.cap(delay))
        return delay

    def _watch_window(self, reply: Reply) -> bool:
        """Pace by the window the answer announces (``X-RateLimit-Remaining`` until
        ``X-RateLimit-Reset``); whether it announced one."""
        window = announced_window(reply.headers, self.retry.wall_clock())
        if window is None:
            return False
        remaining, reset_in = window
        self._pacer.announced(remaining, self.retry.cap(reset_in))
        limit = announced_limit(reply.headers)
        if limit is not None:
            self.stats.announced(self.key_name, limit, self.retry.cap(reset_in))
        return True

    def _emit(self, line: str) -> None:
        if self._trace is not None:
            self._trace(self._scrub(line))

    def _scrub(self, text: str) -> str:
        # Belt and braces: nothing we format contains the key, but a service or proxy might
        # echo the Authorization header (or a secret of a body) back in what we quote.
        return self._redact(text)


@dataclass(frozen=True)
class ContactPage:
    """One page of contacts as read; ``total`` and ``total_pages`` None when not given."""

    contacts: list[dict[str, Any]]
    total: int | None
    total_pages: int | None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _data(reply: Reply) -> dict[str, Any]:
    body = reply.maybe_json()
    data = body.get("data") if isinstance(body, dict) else None
    return data if isinstance(data, dict) else {}


def _seg(value: str) -> str:
    return quote(value, safe="")


def path_segment(value: str) -> str:
    """``value`` as one segment of a request path (``/`` and the rest escaped)."""
    return _seg(value)
