"""State (and saved plans) encrypted at rest: ``--state-encryption passphrase``.

The document is encrypted whole with AES-256-GCM under a key derived from the state key
(``store.keys``: ``BOTCTL_STATE_KEY``, or a local state's key file) with scrypt, its salt and
parameters stored beside the ciphertext. The envelope is one JSON object::

    {"kind": "botctl-encrypted", "format_version": 1, "content": "state",
     "kdf": {"name": "scrypt", "salt": "<base64>", "n": 32768, "r": 8, "p": 1},
     "cipher": "AES-256-GCM", "key_check": "<hex>", "nonce": "<base64>",
     "ciphertext": "<base64>"}

Everything but the ciphertext is authenticated as associated data, so a changed parameter,
a flipped byte or a truncated document fails authentication and is refused, never parsed.
``key_check`` (an HMAC of a constant under a second derived key) tells a wrong key from an
altered document; it allows no more than trying to decrypt does. Each write takes a new
random nonce; the derived key is kept for the run (one scrypt per run, not per write).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import re
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic_core import from_json

from botctl.errors import BotctlError

ENVELOPE_KIND = "botctl-encrypted"
ENVELOPE_VERSION = 1
CIPHER = "AES-256-GCM"
Encryption = Literal["none", "passphrase"]
ENCRYPTIONS: tuple[Encryption, ...] = ("none", "passphrase")
# scrypt's cost per derivation (~80 ms, 32 MiB): once per run, and per guess of a passphrase.
KDF_N = 2**15
KDF_R = 8
KDF_P = 1
_MAXMEM = 256 * 1024 * 1024  # the largest parameters botctl accepts from a file
_CHECK = b"botctl encrypted state key check"


class DecryptError(BotctlError):
    """An encrypted document that cannot be opened: no key, a wrong key, or altered."""


@dataclass(frozen=True)
class Cipher:
    """A derived key and the parameters it was derived with (kept to encrypt again)."""

    salt: bytes
    n: int
    r: int
    p: int
    key: bytes = field(repr=False)
    check: str

    def header(self, content: str) -> dict[str, Any]:
        return {
            "kind": ENVELOPE_KIND,
            "format_version": ENVELOPE_VERSION,
            "content": content,
            "kdf": {
                "name": "scrypt",
                "salt": _b64(self.salt),
                "n": self.n,
                "r": self.r,
                "p": self.p,
            },
            "cipher": CIPHER,
            "key_check": self.check,
        }


def derive(
    state_key: bytes, salt: bytes | None = None, n: int = KDF_N, r: int = KDF_R, p: int = KDF_P
) -> Cipher:
    salt = os.urandom(16) if salt is None else salt
    try:
        material = hashlib.scrypt(state_key, salt=salt, n=n, r=r, p=p, dklen=64, maxmem=_MAXMEM)
    except (ValueError, MemoryError) as exc:
        raise DecryptError(
            f"unusable key derivation parameters (n={n}, r={r}, p={p}): {exc}"
        ) from None
    check = hmac.new(material[32:], _CHECK, hashlib.sha256).hexdigest()
    return Cipher(salt, n, r, p, material[:32], check)


_ENVELOPE = re.compile(r'\A\s*\{\s*"kind"\s*:\s*"' + ENVELOPE_KIND + '"')


def is_encrypted(text: str) -> bool:
    """Whether ``text`` is an envelope (by its first bytes: no parse)."""
    return _ENVELOPE.match(text) is not None


def encrypt(plaintext: str, cipher: Cipher, content: str) -> str:
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    header = cipher.header(content)
    nonce = os.urandom(12)
    header["nonce"] = _b64(nonce)
    sealed = AESGCM(cipher.key).encrypt(nonce, plaintext.encode("utf-8"), _aad(header))
    document = {**header, "ciphertext": _b64(sealed)}
    lines = [f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in document.items()]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def decrypt(
    text: str,
    state_key: bytes | None,
    where: str,
    hint: str,
    content: str,
    known: Cipher | None = None,
) -> tuple[str, Cipher]:
    """The plaintext of an envelope, and the cipher that opened it. ``hint`` says what to
    set when there is no key; ``known``: a cipher already derived (no second scrypt when its
    parameters match)."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    def broken(why: str) -> DecryptError:
        return DecryptError(
            f"{where} is an encrypted botctl {content} that cannot be read ({why}): it was "
            "altered or truncated; nothing was changed. Restore it from a backup"
        )

    try:
        data = from_json(text)
    except ValueError:
        raise broken("not complete JSON") from None
    if not isinstance(data, dict) or data.get("kind") != ENVELOPE_KIND:
        raise broken("not an envelope")
    if data.get("format_version") != ENVELOPE_VERSION or data.get("cipher") != CIPHER:
        raise DecryptError(
            f"{where} is encrypted in a way this botctl does not read (format "
            f"{data.get('format_version')!r}, cipher {data.get('cipher')!r})"
        )
    if data.get("content") != content:
        raise DecryptError(f"{where} is an encrypted {data.get('content')!r}, not a {content}")
    fields = _envelope_fields(data)
    if fields is None:
        raise broken("malformed envelope")
    salt, n, r, p, nonce, body, check = fields
    if state_key is None:
        raise DecryptError(f"{where} is encrypted and no state key is set: {hint}")
    if known is not None and (known.salt, known.n, known.r, known.p) == (salt, n, r, p):
        cipher = known
    else:
        cipher = derive(state_key, salt, n, r, p)
    if not hmac.compare_digest(cipher.check, check):
        if (n, r, p) != (KDF_N, KDF_R, KDF_P):
            # A key that opens nothing under parameters botctl never writes: the parameters
            # were changed (a wrong key under botctl's own parameters is said as such).
            raise broken(f"its key derivation parameters n={n}, r={r}, p={p} are not botctl's")
        raise DecryptError(
            f"the state key is not the key {where} was encrypted with; nothing was changed ({hint})"
        )
    header = {k: v for k, v in data.items() if k != "ciphertext"}
    try:
        plaintext = AESGCM(cipher.key).decrypt(nonce, body, _aad(header))
    except (InvalidTag, ValueError):
        raise broken("authentication failed") from None
    return plaintext.decode("utf-8"), cipher


def _envelope_fields(data: dict[str, Any]) -> tuple[bytes, int, int, int, bytes, bytes, str] | None:
    """An envelope's KDF salt and parameters, nonce, ciphertext and key check; None when any
    is missing or malformed."""
    kdf = data.get("kdf")
    check = data.get("key_check")
    if set(data) != set(CIPHER_FIELDS) or not isinstance(kdf, dict) or not isinstance(check, str):
        return None
    if set(kdf) != {"name", "salt", "n", "r", "p"} or kdf["name"] != "scrypt":
        return None
    n, r, p = kdf["n"], kdf["r"], kdf["p"]
    if not all(type(v) is int and v > 0 for v in (n, r, p)):
        return None
    try:
        salt, nonce, body = (
            base64.b64decode(value, validate=True)
            for value in (kdf["salt"], data["nonce"], data["ciphertext"])
        )
    except (TypeError, ValueError, binascii.Error):
        return None
    return salt, n, r, p, nonce, body, check


CIPHER_FIELDS = (
    "kind",
    "format_version",
    "content",
    "kdf",
    "cipher",
    "key_check",
    "nonce",
    "ciphertext",
)


def _aad(header: dict[str, Any]) -> bytes:
    return json.dumps(header, sort_keys=True, separators=(",", ":")).encode()


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
