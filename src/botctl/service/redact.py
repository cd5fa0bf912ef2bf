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

import functools
import json
from collections.abc import Iterable
from urllib.parse import quote, quote_plus

from botctl.errors import BotctlError

KEY_MASK = "***"
SECRET_MASK = "(secret)"  # the mask plans and traces already use for ${secret:...}


@functools.lru_cache(maxsize=256)
def secret_forms(secret: str) -> tuple[str, ...]:
    """Every spelling of ``secret`` a message might carry, longest first: as written,
    escaped as JSON or Python would, and each of those percent-encoded (a URL's query may
    carry an escaped body), plus the bytes repr httpx gives a bad header."""
    if not secret:
        return ()
    escaped = {
        secret,
        json.dumps(secret)[1:-1],  # JSON, ASCII-escaped
        json.dumps(secret, ensure_ascii=False)[1:-1],  # JSON as botctl's traces write it
        repr(secret)[1:-1],  # Python repr, as exception texts quote it
        ascii(secret)[1:-1],
    }
    forms = {repr(secret.encode("utf-8", "backslashreplace"))[2:-1]}
    for text in escaped:
        forms |= {text, quote(text, safe=""), quote(text), quote_plus(text)}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def redact(text: str, keys: Iterable[str] = (), secrets: Iterable[str] = ()) -> str:
    """``text`` with every form of each key as ``***`` and of each secret as ``(secret)``."""
    masks = [(form, KEY_MASK) for key in keys for form in secret_forms(key)]
    masks += [(form, SECRET_MASK) for secret in secrets for form in secret_forms(secret)]
    for form, mask in sorted(masks, key=lambda pair: len(pair[0]), reverse=True):
        if form in text:
            text = text.replace(form, mask)
    return text


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
