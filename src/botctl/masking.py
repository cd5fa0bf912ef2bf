"""Masking of values the user marked ``${secret:...}`` wherever they are shown to people."""

from __future__ import annotations

from botctl.models import JsonValue

SECRET_MASK = "(secret)"


def mask_secrets(value: JsonValue, secrets: frozenset[str]) -> JsonValue:
    """Replace every occurrence of a secret in a value shown to people (changes only: the
    operations keep the real values, which apply must send)."""
    if not secrets:
        return value
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            value = value.replace(secret, SECRET_MASK)
        return value
    if isinstance(value, list):
        return [mask_secrets(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: mask_secrets(item, secrets) for key, item in value.items()}
    return value
