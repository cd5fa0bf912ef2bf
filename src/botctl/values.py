"""JSON values as botctl compares, walks and shows them: the one equality rule, dotted paths
into nested settings, and the masking of values the user marked ``${secret:...}``.

Kept free of any library: equality sits on the hot path of every plan (once per managed value),
where a general structural differ costs two orders of magnitude more than this walk.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

JsonValue = Any  # a value as it appears in JSON: str, int, float, bool, None, list, dict

SECRET_MASK = "(secret)"
# The substring net: a secret is masked by its text wherever it appears in text only when it
# is at least this long. A shorter one ("1", a PIN) would mangle other text (a URL, a version)
# if masked there; it is masked where it stands instead, as the whole value that holds it
# (``models.BotSpec.secret_values``), and warned about (BC103).
MIN_MASKED_LENGTH = 8


def net_worthy(secrets: Iterable[str]) -> list[str]:
    """The secrets long enough for the substring net (see ``MIN_MASKED_LENGTH``)."""
    return [secret for secret in secrets if len(secret) >= MIN_MASKED_LENGTH]


# Numbers read back from the service may come from single-precision storage (0.2 reads back
# as 0.2000000029802322): closer than this, two numbers are the same setting.
NUMBER_TOLERANCE = 1e-6


def same_value(a: JsonValue, b: JsonValue) -> bool:
    """Equality as the service means it: 1 and 1.0 are the same temperature, and so are 0.2
    and a 0.2000000029 read back from single-precision storage, at any depth. Lists compare in
    order (the order of greeting messages matters); a boolean is never a number."""
    kind_a, kind_b = type(a), type(b)
    if kind_a in _NUMBERS and kind_b in _NUMBERS:
        return bool(a == b) or math.isclose(a, b, rel_tol=1e-9, abs_tol=NUMBER_TOLERANCE)
    if kind_a in _SEQUENCES and kind_b in _SEQUENCES:
        return len(a) == len(b) and all(same_value(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)
    return kind_a is kind_b and bool(a == b)


# Exact types, not isinstance: bool is an int subclass, and a boolean is never a number here.
_NUMBERS = (int, float)
_SEQUENCES = (list, tuple)


def flatten(value: Mapping[str, JsonValue], prefix: str = "") -> dict[str, JsonValue]:
    """Nested mapping -> dotted leaf paths (``styles.buttonColor``); lists are leaves."""
    flat: dict[str, JsonValue] = {}
    for key, item in value.items():
        path = f"{prefix}{key}"
        if isinstance(item, Mapping):
            flat.update(flatten(item, f"{path}."))
        else:
            flat[path] = item
    return flat


def as_json(value: Any) -> JsonValue:
    """Tuples (as the models hold sequences) as lists, at any depth: the shape a JSON document
    and a reader see."""
    if isinstance(value, tuple | list):
        return [as_json(item) for item in value]
    if isinstance(value, Mapping):
        return {key: as_json(item) for key, item in value.items()}
    return value


def unflatten(leaves: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """Dotted leaf paths -> the nested mapping they came from (``flatten``'s inverse)."""
    nested: dict[str, JsonValue] = {}
    for path, value in leaves.items():
        *parents, last = path.split(".")
        node = nested
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return nested


def mask_secrets(value: JsonValue, secrets: frozenset[str]) -> JsonValue:
    """Replace every occurrence of a secret in a value shown to people (changes only: the
    requests keep the real values, which apply must send)."""
    if not secrets:
        return value
    if isinstance(value, str):
        if value in secrets:  # a secret, or a whole value that holds one: where it stands
            return SECRET_MASK
        for secret in sorted(net_worthy(secrets), key=len, reverse=True):
            value = value.replace(secret, SECRET_MASK)
        return value
    if isinstance(value, list | tuple):
        return [mask_secrets(item, secrets) for item in value]
    if isinstance(value, Mapping):
        return {key: mask_secrets(item, secrets) for key, item in value.items()}
    return value


@functools.lru_cache(maxsize=256)
def secret_forms(secret: str) -> tuple[str, ...]:
    """Every spelling of ``secret`` a message might carry, longest first: as written,
    escaped as JSON or Python would (a message quoting a value with ``!r`` or as JSON), and
    each of those percent-encoded (a URL's query may carry an escaped body), plus the bytes
    repr httpx gives a bad header."""
    if not secret:
        return ()
    escaped = {
        secret,
        json.dumps(secret)[1:-1],  # JSON, ASCII-escaped
        json.dumps(secret, ensure_ascii=False)[1:-1],  # JSON as botctl's messages write it
        repr(secret)[1:-1],  # Python repr, as exception texts quote it
        ascii(secret)[1:-1],
    }
    forms = {repr(secret.encode("utf-8", "backslashreplace"))[2:-1]}
    for text in escaped:
        forms |= {text, quote(text, safe=""), quote(text), quote_plus(text)}
    return tuple(sorted((f for f in forms if f), key=len, reverse=True))


def mask_secrets_in_text(text: str, secrets: Iterable[str]) -> str:
    """A message for people (a validation error, a read-back warning) with every spelling of
    each secret (``secret_forms``) as ``(secret)``: the message may quote a value that holds
    one, escaped."""
    secrets = list(secrets)
    forms = sorted(
        {form for secret in net_worthy(secrets) for form in secret_forms(secret)}, key=len
    )
    for form in reversed(forms):
        if form in text:
            text = text.replace(form, SECRET_MASK)
    return mask_quoted(text, secrets)


def mask_quoted(text: str, secrets: Iterable[str]) -> str:
    """``text`` with each secret too short for the substring net masked where it stands as a
    whole quoted value (``"1234"``, ``'1234'``, as JSON or Python quote one): never inside
    other words."""
    for secret in secrets:
        if len(secret) >= MIN_MASKED_LENGTH or not secret:
            continue
        for quoted in {json.dumps(secret), json.dumps(secret, ensure_ascii=False), repr(secret)}:
            if quoted in text:
                text = text.replace(quoted, quoted[0] + SECRET_MASK + quoted[-1])
    return text


# What reorders or breaks a shown line beyond the C0 and C1 controls: the Unicode line
# separators and the bidirectional controls (embeddings, overrides, isolates, marks): a U+202E
# in a value would show a line in reverse, so that a FAIL reads as a PASS.
_REORDERING = "\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
_CONTROLS = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_REORDERING}]")
# What JSON leaves unescaped (it escapes C0 itself) but a terminal would act on.
_JSON_CONTROLS = re.compile(f"[\x7f-\x9f{_REORDERING}]")


def controls_shown(text: str) -> str:
    """Control characters (the Unicode line separators and bidirectional controls too) shown
    as ``\\xNN`` (``\\u202e`` beyond one byte): text that cannot move a terminal's cursor,
    start a line of its own or reorder what is shown around it."""
    return _CONTROLS.sub(_escaped, text)


def json_controls_escaped(document: str) -> str:
    """A JSON document with the controls JSON leaves as they are written as JSON escapes: the
    same document to a reader, inert text to a terminal."""
    return _JSON_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", document)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


# The user info of a URL: everything up to the last '@' of its authority (``u:p@ss@host``
# holds the password ``p@ss``).
_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#\s]*@")
# A query parameter whose name says it holds a credential (access_token, api_key, sig,
# X-Amz-Signature, password...).
_CREDENTIAL_PARAMETER = re.compile(
    r"(?P<name>[?&;][A-Za-z0-9_.\-]*?"
    r"(?:token|key|secret|passw|pwd|sig|auth|credential|session|code)[A-Za-z0-9_.\-]*=)"
    r"[^&#;\s\"'<>]*",
    re.IGNORECASE,
)


def mask_url_credentials(text: str) -> str:
    """``text`` with the credentials of every URL in it masked: the user info
    (``https://***@host``) and the value of each query parameter named like a credential
    (``?access_token=***``)."""
    if "://" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    return _CREDENTIAL_PARAMETER.sub(r"\g<name>***", text)


def url_origin(url: str) -> str:
    """A URL as ``scheme://host[:port]`` only: where a URL's path is the credential (a Slack
    webhook's), the rest is never shown."""
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*://)([^/?#]*)", url.strip())
    if match is None:
        return "(a URL)"
    return match.group(1) + match.group(2).rpartition("@")[2]
