"""Notifications: JSON POSTed to each ``--notify`` URL on the events chosen with
``--notify-on``, with a Slack-compatible ``text`` and the structured ``event``.

Sending never blocks the loop: each URL has a bounded queue and a worker of its own (a slow
receiver delays only its own notifications; when its queue is full, the oldest is dropped and
counted). Each notification is tried up to ``attempts`` times with exponential backoff. Bodies
pass through the ``Redactor``: no key or secret value is ever sent. The ``text`` is escaped for
the chat tools it targets (Slack's ``&``, ``<``, ``>``), whatever a revision or the service
put in it: ``<!channel>`` or ``<https://evil|Click here>`` shows as written, pinging no one
and linking nowhere. A URL is named in logs by its scheme and host only (a Slack webhook's
path is its credential)."""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

import httpx

from botctl.agent.log import Log, Redactor
from botctl.agent.status import Metrics, now_iso
from botctl.values import url_origin

EVENTS = ("failed", "test_failed", "drift", "healed", "recovered", "synced")
DEFAULT_EVENTS = ("failed", "test_failed", "drift", "healed", "recovered")
_QUEUE = 100


def chat_text(text: str) -> str:
    """``text`` as Slack (and the tools that read its format) shows it literally: its three
    control characters escaped, so no mention, link or command can form inside."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class Notifier:
    def __init__(
        self,
        urls: tuple[str, ...],
        events: frozenset[str],
        redact: Redactor,
        log: Log,
        metrics: Metrics,
        *,
        attempts: int = 5,
        base_delay: float = 1.0,
        timeout: float = 10.0,
    ) -> None:
        self.urls = urls
        self.events = events
        self.redact = redact
        self.log = log
        self.metrics = metrics
        self.attempts = attempts
        self.base_delay = base_delay
        self.timeout = timeout
        self._queues: list[asyncio.Queue[bytes]] = []
        self._workers: list[asyncio.Task[None]] = []
        self._client: httpx.AsyncClient | None = None

    def start(self) -> None:
        if not self.urls:
            return
        self._client = httpx.AsyncClient(timeout=self.timeout)
        for url in self.urls:
            queue: asyncio.Queue[bytes] = asyncio.Queue(maxsize=_QUEUE)
            self._queues.append(queue)
            self._workers.append(asyncio.create_task(self._work(url, queue)))

    def notify(self, event: str, text: str, **details: Any) -> None:
        """Queue ``event`` for every URL, if it is one chosen; returns at once."""
        if event not in self.events or not self._queues:
            return
        body = {"text": chat_text(text), "event": {"type": event, "time": now_iso(), **details}}
        data = self.redact(json.dumps(body, default=str, ensure_ascii=False)).encode("utf-8")
        for queue in self._queues:
            if queue.full():
                queue.get_nowait()
                self.metrics.notifications.labels(result="dropped").inc()
            queue.put_nowait(data)

    async def _work(self, url: str, queue: asyncio.Queue[bytes]) -> None:
        while True:
            data = await queue.get()
            try:
                await self._post(url, data)
            finally:
                queue.task_done()

    async def _post(self, url: str, data: bytes) -> None:
        assert self._client is not None
        headers = {"Content-Type": "application/json", "User-Agent": "botctl-agent"}
        problem = ""
        for attempt in range(1, self.attempts + 1):
            try:
                answer = await self._client.post(url, content=data, headers=headers)
                if answer.status_code < 300:
                    self.metrics.notifications.labels(result="sent").inc()
                    return
                problem = f"HTTP {answer.status_code}"
                if answer.status_code < 500 and answer.status_code not in (408, 429):
                    break
            except httpx.HTTPError as exc:
                problem = type(exc).__name__
            if attempt < self.attempts:
                await asyncio.sleep(min(self.base_delay * 2 ** (attempt - 1), 60.0))
        self.metrics.notifications.labels(result="failed").inc()
        where = url_origin(url)  # never the path: a Slack webhook's path is its credential
        self.log.warning("notify", f"notification to {where} not delivered: {problem}")

    async def close(self, timeout: float) -> None:
        """Give queued notifications up to ``timeout`` seconds, then stop."""
        if self._queues:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await asyncio.gather(*(q.join() for q in self._queues))
        for worker in self._workers:
            worker.cancel()
        for worker in self._workers:
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        if self._client is not None:
            await self._client.aclose()
