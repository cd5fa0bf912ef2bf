"""The other side of the control API: what ``botctl agent sync|suspend|resume|status --url``
sends to a running agent, and the errors in words a person acts on.

Through a Service in front of two replicas a request may reach the standby, which answers 503
(control) or shows a standby's empty status: the client asks again on a new connection (a
Service balances connections, not requests), up to ``ATTEMPTS`` times, and otherwise names the
lease holder the standby reported. The token travels as ``Authorization: Bearer``; it is never
shown (every message passes through the caller's redaction too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

from botctl.errors import BotctlError
from botctl.values import mask_url_credentials

ATTEMPTS = 6  # tries to reach the active replica through a Service
RETRY_PAUSE = 0.2  # seconds between them


class Remote:
    def __init__(self, url: str, token: str | None, variable: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.variable = variable
        self.timeout = timeout

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"} if self.token else {}

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> httpx.Response:
        # A client per attempt: a new connection, which a Service may send elsewhere.
        try:
            with httpx.Client(timeout=self.timeout, headers=self._headers()) as client:
                return client.request(method, self.url + path, json=body)
        except httpx.HTTPError as exc:
            raise BotctlError(
                f"cannot reach the agent at {mask_url_credentials(self.url)}: "
                f"{type(exc).__name__}: {exc} (--url, or BOTCTL_AGENT_URL)"
            ) from None

    def _answer(self, answer: httpx.Response) -> dict[str, Any]:
        try:
            found = answer.json()
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise BotctlError(
                f"{self.url} answered {answer.status_code} with no JSON object: is it a "
                "botctl agent?"
            )
        return found

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        *,
        retry: Callable[[httpx.Response, dict[str, Any]], bool] = lambda a, d: a.status_code == 503,
    ) -> dict[str, Any]:
        """The agent's JSON answer; ``retry`` says when to ask again (a standby)."""
        for attempt in range(ATTEMPTS):
            answer = self._send(method, path, body)
            doc = self._answer(answer)
            if not retry(answer, doc) or attempt == ATTEMPTS - 1:
                break
            time.sleep(RETRY_PAUSE)
        if answer.status_code in (401, 403):
            raise BotctlError(self._refused(answer.status_code, doc))
        if answer.status_code >= 400:
            holder = doc.get("leaseHolder")
            held = f" (the lease holder: {holder})" if holder else ""
            raise BotctlError(
                f"the agent answered {answer.status_code}: {doc.get('error', doc)}{held}"
            )
        return doc

    def _refused(self, code: int, doc: dict[str, Any]) -> str:
        said = doc.get("error", "refused")
        if code == 403:
            return f"the agent refused: {said}"
        if not self.token:
            return (
                f"the agent refused (401: {said}): set the control token in {self.variable} "
                "(or name another variable with --control-token-env VAR)"
            )
        return f"the agent refused the token in {self.variable} (401: {said})"

    def control(self, action: str, body: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"/control/{action}", body)

    def status(self) -> dict[str, Any]:
        """``/status`` of the active replica, when a few tries reach it."""
        return self.request(
            "GET",
            "/status",
            retry=lambda answer, doc: answer.status_code == 503 or doc.get("role") == "standby",
        )

    def wait_for_cycle(self, number: int, timeout: float, poll: float = 0.5) -> dict[str, Any]:
        """The record of cycle ``number`` once it has finished."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self.status()
            found = next((c for c in doc.get("cycles", []) if c.get("number") == number), None)
            if found is not None:
                return dict(found)
            newest = max((c.get("number", 0) for c in doc.get("cycles", [])), default=0)
            if newest > number:
                raise BotctlError(
                    f"cycle {number} is no longer in the agent's history (its newest is "
                    f"{newest}): did another replica take over?"
                )
            if time.monotonic() > deadline:
                running = doc.get("cycleInProgress")
                raise BotctlError(
                    f"cycle {number} did not finish within {timeout:g} s (in progress: "
                    f"{running if running is not None else 'none'}; --timeout)"
                )
            time.sleep(poll)
