"""Secrets kept out of botctl's files.

A value the configuration marks ``${secret:VAR}`` is resolved into memory, where botctl needs
it to send it and to compare it, and is shown masked everywhere (``values.mask_secrets``). The
state file and saved plans hold, in its place, a fingerprint: HMAC-SHA256 of the value under a
``FingerprintKey``. That key is derived (scrypt) from the *state key*, a secret that is never
written where the state goes (``BOTCTL_STATE_KEY``, or a key file beside a local state: see
``store.keys``), and the random salt of one state history (its lineage), which is kept in the
state; a plan made without such a state carries a salt of its own. Equal values have equal
fingerprints under one key, which is all a comparison needs; a fingerprint never gives the
value back, and without the state key it cannot even be checked against a guess. The state
records a *key check* (``FingerprintKey.check``) so that a run under another key is an error,
never "every secret changed".

States of format 3 keyed their fingerprints with the salt alone (``FingerprintKey(salt,
None)``): whoever reads such a state can check guesses. They are still read (with a warning)
until ``botctl state rekey`` moves them under a state key.

In files a fingerprinted value is written where the value would be, as ``{"$sealed":
"hmac-sha256:<hex>"}``; in memory it is a ``Sealed``. A saved plan's request bodies hold, for
each string that carries a secret, ``{"$secret": [text, {"variable", "fingerprint"}, ...]}``:
the pieces to put together again from the environment when the plan is applied.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import re
import secrets as _random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botctl.values import MIN_MASKED_LENGTH, SECRET_MASK, JsonValue, mask_secrets

SEALED_KEY = "$sealed"
SECRET_KEY = "$secret"
FINGERPRINT_PREFIX = "hmac-sha256:"
FINGERPRINT_PATTERN = r"^hmac-sha256:[0-9a-f]{64}$"
SALT_PATTERN = r"^[0-9a-f]{64}$"
_FINGERPRINT = re.compile(FINGERPRINT_PATTERN)


@dataclass(frozen=True)
class Secret:
    """A value the configuration marked ``${secret:VAR}``: in memory only, to be sent and
    masked. ``defaulted``: it came from the reference's ``:-default``, not the environment."""

    value: str
    variable: str
    defaulted: bool = False

    def __repr__(self) -> str:  # never the value, in a traceback or a debug print
        return f"Secret(${self.variable})"


# scrypt's cost for deriving a fingerprint key from the state key: ~40 ms once per run, and as
# much per guess of a state key chosen by a person (a generated one cannot be guessed).
SCRYPT_N = 2**14
SCRYPT_R = 8
SCRYPT_P = 1
_KEY_CHECK_MESSAGE = b"botctl state key check"


@dataclass(frozen=True)
class FingerprintKey:
    """The key of one file's fingerprints: the lineage's ``salt`` (hex, kept in the state) and
    the state key (never kept there). ``state_key`` None: the salt alone (format 3, legacy)."""

    salt: str
    state_key: bytes | None = field(default=None, repr=False)

    @property
    def legacy(self) -> bool:
        return self.state_key is None

    @property
    def hmac_key(self) -> bytes:
        if self.state_key is None:
            return bytes.fromhex(self.salt)
        return _derive(self.state_key, self.salt)

    @property
    def check(self) -> str | None:
        """What the state records to tell the key it was made under (None when legacy): an
        HMAC of a constant, which says nothing of any secret."""
        if self.state_key is None:
            return None
        return hmac.new(self.hmac_key, _KEY_CHECK_MESSAGE, hashlib.sha256).hexdigest()

    def fingerprint(self, value: JsonValue) -> str:
        """HMAC-SHA256 of ``value``'s canonical JSON under this key."""
        canonical = json.dumps(
            encode(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False
        ).encode()
        return FINGERPRINT_PREFIX + hmac.new(self.hmac_key, canonical, hashlib.sha256).hexdigest()

    def seal(self, value: JsonValue) -> Sealed:
        return Sealed(self.fingerprint(value))


@functools.lru_cache(maxsize=16)
def _derive(state_key: bytes, salt: str) -> bytes:
    return hashlib.scrypt(
        state_key,
        salt=b"botctl fingerprints\0" + bytes.fromhex(salt),
        n=SCRYPT_N,
        r=SCRYPT_R,
        p=SCRYPT_P,
        dklen=32,
    )


@dataclass(frozen=True)
class Sealed:
    """A value botctl keeps only as its fingerprint (under the key of the file it is in)."""

    fingerprint: str

    def matches(self, value: JsonValue, key: FingerprintKey) -> bool:
        """Whether ``value`` (clear, or itself sealed) is the value this was made from."""
        if isinstance(value, Sealed):
            return value == self
        return value is not None and hmac.compare_digest(key.fingerprint(value), self.fingerprint)


def new_salt() -> str:
    return _random.token_hex(32)


def holds_secret(value: JsonValue, secrets: frozenset[str]) -> bool:
    """Whether any string in ``value`` is one of ``secrets`` or contains one long enough for
    the substring net (a shorter one would be found in unrelated text: the whole values that
    hold it are among ``secrets``, see ``models.BotSpec.secret_values``)."""
    if not secrets:
        return False
    if isinstance(value, str):
        return value in secrets or any(
            secret in value for secret in secrets if len(secret) >= MIN_MASKED_LENGTH
        )
    if isinstance(value, list | tuple):
        return any(holds_secret(item, secrets) for item in value)
    if isinstance(value, Mapping):
        return any(holds_secret(item, secrets) for item in value.values())
    return False


def mask_beside(shown: JsonValue, declared: JsonValue, secrets: frozenset[str]) -> JsonValue:
    """``shown`` (a value read or recorded) masked for a reader: wholly where the value
    ``declared`` at the same place holds a secret, since it may hold another one (a secret
    rotated since, which masking by value cannot know); elsewhere by value."""
    if isinstance(shown, Sealed):
        return SECRET_MASK
    if not secrets:
        return shown  # the common case, once per change of a plan: nothing to mask
    if isinstance(shown, Mapping):
        inner = declared if isinstance(declared, Mapping) else {}
        return {key: mask_beside(item, inner.get(key), secrets) for key, item in shown.items()}
    if shown is not None and holds_secret(declared, secrets):
        return SECRET_MASK
    return mask_secrets(shown, secrets)


def split(text: str, secrets: Iterable[Secret]) -> list[str | Secret]:
    """``text`` as literal pieces and the secrets in it, left to right (at each place the
    longest secret that starts there)."""
    by_length = sorted(secrets, key=lambda s: (-len(s.value), s.variable))
    pieces: list[str | Secret] = []
    literal: list[str] = []
    i = 0
    while i < len(text):
        found = next((s for s in by_length if s.value and text.startswith(s.value, i)), None)
        if found is None:
            literal.append(text[i])
            i += 1
            continue
        if literal:
            pieces.append("".join(literal))
            literal = []
        pieces.append(found)
        i += len(found.value)
    if literal:
        pieces.append("".join(literal))
    return pieces


# --- the files' encoding ------------------------------------------------------------------------


def encode(value: Any) -> JsonValue:
    """A value as JSON: each ``Sealed`` in it as ``{"$sealed": fingerprint}``."""
    if isinstance(value, Sealed):
        return {SEALED_KEY: value.fingerprint}
    if isinstance(value, list | tuple):
        return [encode(item) for item in value]
    if isinstance(value, Mapping):
        return {key: encode(item) for key, item in value.items()}
    return value


def decode(value: JsonValue) -> Any:
    """``encode``'s inverse: each ``{"$sealed": fingerprint}`` as a ``Sealed``."""
    sealed = sealed_of(value)
    if sealed is not None:
        return sealed
    if isinstance(value, list):
        return [decode(item) for item in value]
    if isinstance(value, dict):
        return {key: decode(item) for key, item in value.items()}
    return value


def sealed_of(value: JsonValue) -> Sealed | None:
    """The ``Sealed`` a file's ``{"$sealed": fingerprint}`` stands for, else None."""
    if (
        isinstance(value, dict)
        and len(value) == 1
        and isinstance(value.get(SEALED_KEY), str)
        and _FINGERPRINT.match(value[SEALED_KEY])
    ):
        return Sealed(value[SEALED_KEY])
    return None


# --- secrets in a saved plan's requests ----------------------------------------------------------


@dataclass(frozen=True)
class SecretRef:
    """A secret a saved plan's request needs: the variable it was resolved from, and the
    fingerprint of its value then (under the plan file's key)."""

    variable: str
    fingerprint: str
    defaulted: bool = False


_VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def seal_strings(value: JsonValue, secrets: Iterable[Secret], key: FingerprintKey) -> JsonValue:
    """``value`` (a request body) with every string that holds a secret as ``{"$secret":
    pieces}``: its literal text, and for each secret in it the variable and the fingerprint."""
    secrets = tuple(secrets)
    if not secrets:
        return value
    if isinstance(value, str):
        pieces = split(value, secrets)
        if all(isinstance(piece, str) for piece in pieces):
            return value
        return {SECRET_KEY: [_piece_document(piece, key) for piece in pieces]}
    if isinstance(value, list | tuple):
        return [seal_strings(item, secrets, key) for item in value]
    if isinstance(value, Mapping):
        return {name: seal_strings(item, secrets, key) for name, item in value.items()}
    return value


def _piece_document(piece: str | Secret, key: FingerprintKey) -> JsonValue:
    if isinstance(piece, str):
        return piece
    document: dict[str, JsonValue] = {
        "variable": piece.variable,
        "fingerprint": key.fingerprint(piece.value),
    }
    if piece.defaulted:
        document["default"] = True
    return document


def open_strings(value: JsonValue, resolve: Callable[[SecretRef], str]) -> JsonValue:
    """``seal_strings``'s inverse: each ``{"$secret": pieces}`` put together again, each
    secret given by ``resolve``. Raises ValueError on a malformed one."""
    pieces = secret_pieces(value)
    if pieces is not None:
        return "".join(p if isinstance(p, str) else resolve(p) for p in pieces)
    if isinstance(value, list):
        return [open_strings(item, resolve) for item in value]
    if isinstance(value, dict):
        return {key: open_strings(item, resolve) for key, item in value.items()}
    return value


def secret_pieces(value: JsonValue) -> list[str | SecretRef] | None:
    """The pieces of a ``{"$secret": pieces}``; None for any other value; ValueError when it is
    one but malformed."""
    if not (isinstance(value, dict) and SECRET_KEY in value):
        return None
    raw = value[SECRET_KEY]
    if len(value) != 1 or not isinstance(raw, list):
        raise ValueError(f"malformed {SECRET_KEY}: expected a list of pieces")
    pieces: list[str | SecretRef] = []
    for piece in raw:
        if isinstance(piece, str):
            pieces.append(piece)
            continue
        if (
            isinstance(piece, dict)
            and set(piece) <= {"variable", "fingerprint", "default"}
            and isinstance(piece.get("variable"), str)
            and _VARIABLE.match(piece["variable"])
            and isinstance(piece.get("fingerprint"), str)
            and _FINGERPRINT.match(piece["fingerprint"])
            and isinstance(piece.get("default", False), bool)
        ):
            pieces.append(
                SecretRef(piece["variable"], piece["fingerprint"], piece.get("default", False))
            )
            continue
        raise ValueError(f"malformed {SECRET_KEY} piece: {piece!r}")
    return pieces
