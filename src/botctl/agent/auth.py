"""Who may read the status and steer the agent: the control token (``--control-token-env VAR``,
default ``BOTCTL_CONTROL_TOKEN``).

- ``POST /control/*`` (sync, suspend, resume) needs ``Authorization: Bearer <token>``, always;
  with no token configured the control API is off (403). Only a bearer token: a browser sends
  no such header by itself, so a page elsewhere cannot steer the agent through a password
  the browser remembers (Basic credentials are attached to cross-site form posts).
- ``GET /status`` and ``GET /`` need the token (bearer, or as the password of Basic
  authentication, which a browser asks for) whenever a token is configured, and, with none,
  whenever the listener is not on loopback: there they are closed (401) until one is. On
  loopback with no token they stay open, as before.
- ``/healthz``, ``/readyz``, ``/metrics`` and the webhook (its own secret) are never asked.

Tokens are compared in constant time (their SHA-256 digests, so that not even the length
leaks through timing).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass

MIN_TOKEN_LENGTH = 16
REALM = 'realm="botctl agent"'


def is_loopback(host: str) -> bool:
    """Whether a listen address is reachable from this machine only."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a name: it may resolve beyond loopback


def weak_token(token: str) -> str | None:
    """Why ``token`` may not guard the agent (None: it may)."""
    if len(token) < MIN_TOKEN_LENGTH:
        return (
            f"{len(token)} characters; give at least {MIN_TOKEN_LENGTH} (e.g. the output of "
            "`openssl rand -hex 32`)"
        )
    return None


@dataclass(frozen=True)
class Refusal:
    code: int  # 401 or 403
    message: str
    challenge: str | None = None  # WWW-Authenticate


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()


class Access:
    def __init__(self, token: str | None, *, loopback: bool, variable: str) -> None:
        self._digest = _digest(token) if token else None
        self.loopback = loopback
        self.variable = variable

    @property
    def configured(self) -> bool:
        return self._digest is not None

    @property
    def guards_reads(self) -> bool:
        """Whether ``/status`` and the page ask for the token."""
        return self.configured or not self.loopback

    def _matches(self, given: str) -> bool:
        return self._digest is not None and hmac.compare_digest(_digest(given), self._digest)

    def reads(self, headers: Mapping[str, str]) -> Refusal | None:
        """``/status`` and the page: None when they may be served."""
        if not self.guards_reads:
            return None
        if not self.configured:
            return Refusal(
                401,
                "this agent listens beyond loopback and has no control token: /status and the "
                f"page are closed until it is started with one in {self.variable} "
                "(--control-token-env VAR)",
            )
        given = _credential(headers.get("authorization", ""), basic=True)
        if given is not None and self._matches(given):
            return None
        return Refusal(
            401,
            "the control token is needed: Authorization: Bearer <token> (a browser asks for it "
            "as the password, any user name)",
            f"Basic {REALM}, Bearer {REALM}",
        )

    def control(self, headers: Mapping[str, str]) -> Refusal | None:
        """``POST /control/*``: None when the request may steer the agent."""
        if not self.configured:
            return Refusal(
                403,
                f"the control API is off: start the agent with a token in {self.variable} "
                "(--control-token-env VAR)",
            )
        given = _credential(headers.get("authorization", ""), basic=False)
        if given is None:
            return Refusal(401, "missing Authorization: Bearer <token>", f"Bearer {REALM}")
        if not self._matches(given):
            return Refusal(401, "wrong control token", f'Bearer {REALM}, error="invalid_token"')
        return None


def _credential(header: str, *, basic: bool) -> str | None:
    """The token an Authorization header carries: a bearer token, or (when ``basic``) the
    password of Basic credentials."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    if basic and scheme.lower() == "basic":
        try:
            decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return decoded.partition(":")[2] or None
    return None
