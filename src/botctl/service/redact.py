"""Keeping secrets out of text: the API keys and the values marked ``${secret:...}``.

A secret rarely reaches a message as written. httpx quotes a bad header as a bytes repr
(``b'Bearer abc\\n'``), a trace line holds it JSON-escaped, a redirect target or a proxy's
error page percent-encoded. ``redact`` replaces every one of those forms, so that whatever
path a secret takes into a message, a trace or an excerpt of a service's answer, it leaves
as a mask.

``check_api_key`` refuses a key that an HTTP header cannot carry before any request is
built, naming the variable that holds it and never the value.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from botctl.errors import BotctlError
from botctl.values import SECRET_MASK, mask_quoted, net_worthy, secret_forms

__all__ = [
    "KEY_MASK",
    "NOTHING_SECRET",
    "SECRET_MASK",
    "Redactor",
    "check_api_key",
    "redact",
    "secret_forms",
]

KEY_MASK = "***"


def _masks(keys: Iterable[str], secrets: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """(form, mask) for every spelling of each key and secret, longest form first (a secret
    shorter than ``values.MIN_MASKED_LENGTH`` is not looked for in text: see
    ``translate.Say.trace_body`` for where it is masked)."""
    masks = [(form, KEY_MASK) for key in keys for form in secret_forms(key)]
    masks += [
        (form, SECRET_MASK) for secret in net_worthy(secrets) for form in secret_forms(secret)
    ]
    return tuple(sorted(masks, key=lambda pair: len(pair[0]), reverse=True))


def redact(text: str, keys: Iterable[str] = (), secrets: Iterable[str] = ()) -> str:
    """``text`` with every form of each key as ``***`` and of each secret as ``(secret)``."""
    return Redactor(frozenset(keys), frozenset(secrets))(text)


@dataclass(frozen=True)
class Redactor:
    """What must never leave in a text, handed explicitly to whoever produces text (the HTTP
    client): the API ``keys`` (shown as ``***``) and the ``secrets`` (``${secret:...}``
    values, shown as ``(secret)``), in every spelling (``secret_forms``). Immutable: a run
    builds one once it knows its secrets, and a client masks exactly what it was given."""

    keys: frozenset[str] = frozenset()
    secrets: frozenset[str] = frozenset()
    _masks: tuple[tuple[str, str], ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_masks", _masks(self.keys, self.secrets))

    def __repr__(self) -> str:  # never the values
        return f"Redactor({len(self.keys)} key(s), {len(self.secrets)} secret(s))"

    def with_key(self, key: str) -> Redactor:
        """This redactor, masking ``key`` too."""
        return Redactor(self.keys | {key}, self.secrets)

    def __call__(self, text: str) -> str:
        for form, mask in self._masks:
            if form in text:
                text = text.replace(form, mask)
        return mask_quoted(text, self.secrets)


NOTHING_SECRET = Redactor()  # a client's own key is all it masks


def check_api_key(env_name: str, value: str) -> None:
    """Refuse a key that cannot travel as ``Authorization: Bearer <key>``.

    Only printable ASCII without spaces is accepted: a header cannot carry a line break or
    a control character at all, httpx refuses non-ASCII (quoting the value in its error),
    and a bearer token (RFC 6750) has no spaces, so surrounding whitespace is a copying
    mistake, not part of the key. The message names the variable and the kind of problem,
    never the value or where in it the problem lies."""
    problem = api_key_problem(value)
    if problem:
        raise BotctlError(unusable_keys_message([f"${env_name} {problem}"]))


def unusable_keys_message(problems: list[str]) -> str:
    """One message for every unusable key (each problem reads "$VAR contains ...")."""
    return (
        "unusable API key: "
        + "; ".join(problems)
        + ". An API key is printable ASCII without spaces: check how it was put into the "
        "environment (a trailing newline from a file or a secret store is the usual cause). "
        "No value is shown, and nothing was sent."
    )


def api_key_problem(value: str) -> str:
    """What makes ``value`` unusable as a bearer key ("" when nothing does)."""
    if "\n" in value or "\r" in value:
        return "contains a line break"
    if value != value.strip():
        return "starts or ends with whitespace"
    if any(c in " \t" for c in value):
        return "contains a space or a tab"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        return "contains a control character"
    if not value.isascii():
        return "contains a character outside ASCII"
    return ""
