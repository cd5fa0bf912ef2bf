"""The push webhook's rules, apart from HTTP: who sent a delivery (judged from its headers,
before any body is read), whether a body is the one signed, what event it is, and whether it
was seen before.

- GitHub (and Gitea, Forgejo) sign the body: ``X-Hub-Signature-256: sha256=<HMAC-SHA256 of the
  body under the secret>``; the event is ``X-GitHub-Event`` and a delivery's id
  ``X-GitHub-Delivery``. A signature covers the body only: a captured delivery replayed under a
  new id still verifies, so a signed body is remembered by its digest too.
- GitLab sends the secret itself, ``X-Gitlab-Token``; the event is ``X-Gitlab-Event`` and the
  id ``X-Gitlab-Event-UUID``.

Only a push moves a branch: GitHub's ``push`` and GitLab's ``Push Hook`` trigger a cycle. A
tag push (``Tag Push Hook``; GitHub's push of a ``refs/tags/`` ref) moves none, and the other
events (issues, stars, pipelines) say nothing about the configuration.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

SIGNATURE = "x-hub-signature-256"
TOKEN = "x-gitlab-token"
PUSH_EVENTS = {"x-github-event": "push", "x-gitlab-event": "Push Hook"}
DELIVERY_IDS = ("x-github-delivery", "x-gitlab-event-uuid")


@dataclass(frozen=True)
class Credential:
    """What a delivery shows to prove it knows the secret."""

    kind: Literal["signature", "token"]
    value: str

    @property
    def needs_body(self) -> bool:
        return self.kind == "signature"


def credential(headers: Mapping[str, str]) -> Credential | None:
    """The delivery's credential, from its headers alone (a signature first)."""
    signature = headers.get(SIGNATURE)
    if signature is not None:
        return Credential("signature", signature.strip())
    token = headers.get(TOKEN)
    return Credential("token", token) if token is not None else None


def token_matches(found: Credential, secret: str) -> bool:
    return found.kind == "token" and hmac.compare_digest(found.value.encode(), secret.encode())


def signature_matches(found: Credential, body: bytes, secret: str) -> bool:
    if found.kind != "signature":
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(found.value.encode(), expected.encode())


Kind = Literal["push", "ping", "other"]


def event(headers: Mapping[str, str]) -> tuple[Kind, str]:
    """What the delivery is about, and its name as the sender spelled it."""
    github = headers.get("x-github-event")
    if github is not None:
        if github == "ping":
            return "ping", github
        return ("push" if github == PUSH_EVENTS["x-github-event"] else "other"), github
    gitlab = headers.get("x-gitlab-event")
    if gitlab is not None:
        return ("push" if gitlab == PUSH_EVENTS["x-gitlab-event"] else "other"), gitlab
    return "other", "(no event header)"


def ref_of(body: bytes) -> str | None:
    """The ref a push moved (both GitHub and GitLab say ``ref``), when the body says."""
    try:
        ref = json.loads(body).get("ref")
    except (ValueError, AttributeError):
        return None
    return ref if isinstance(ref, str) else None


def delivery_keys(headers: Mapping[str, str], body: bytes, found: Credential) -> tuple[str, ...]:
    """What identifies this delivery: its id, and a signed body's digest (what a replay under
    a new id cannot change without breaking the signature)."""
    keys = [f"id:{headers[name]}" for name in DELIVERY_IDS if headers.get(name)]
    if found.needs_body:
        keys.append("sha256:" + hashlib.sha256(body).hexdigest())
    return tuple(keys)


class Deliveries:
    """The deliveries acted on, the newest ``capacity`` remembered (bounded memory)."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._seen: OrderedDict[str, None] = OrderedDict()

    def seen(self, keys: Iterable[str]) -> bool:
        return any(key in self._seen for key in keys)

    def remember(self, keys: Iterable[str]) -> None:
        for key in keys:
            self._seen[key] = None
            self._seen.move_to_end(key)
        while len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
