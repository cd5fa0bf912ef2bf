"""Sealing the state: what is written only as a fingerprint, under which key.

On the way in, the state key found for the state (``store.keys``) is checked against the
``key_check`` it was written with, so that a run under another key is an error naming what to
set, never a state whose every secret seems changed. On the way out, the salt and the key are
made *before* anything is rendered (``prepare``: a new state gets its salt, a local one its key
file), and each chatbot's record is rendered with every value that holds a secret, or sits
where the configuration holds one, as its fingerprint (``record_document``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from botctl import lint
from botctl.defaults import STATE_KEY_ENV
from botctl.models import BotRecord, State, attribute_location, settings_location
from botctl.resources.registry import kinds
from botctl.sealing import FingerprintKey, encode, holds_secret, new_salt
from botctl.store.keys import (
    FOR_ENCRYPTION,
    FOR_SECRETS,
    KeySource,
    StateKeyError,
    ensure_key,
    give_key,
)
from botctl.store.stateformat import SEALABLE_ATTRIBUTE_FIELDS
from botctl.values import JsonValue, unflatten


def unlock(state: State, source: KeySource, where: str) -> None:
    """Give ``state`` the key found for it, refusing one its fingerprints were not made
    under (a state that holds none simply takes the key it is given at the next write)."""
    give_key(state, source)
    if state.legacy_keyed or state.key_check is None or not state.has_sealed:
        return
    assert state.salt is not None  # checked by the format
    if source.key is None:
        raise StateKeyError(
            f"the state at {where} holds fingerprints made under a state key, and no key is "
            f"set: {source.hint()} (the key it was made under). Lost it? `botctl state rekey "
            "--forget` drops the fingerprints (botctl then re-sends those values)"
        )
    if FingerprintKey(state.salt, source.key).check != state.key_check:
        raise StateKeyError(
            f"{source.origin} is not the state key the fingerprints of {where} were made "
            f"under: set {STATE_KEY_ENV} to that key, or move the state to this one with "
            "`botctl state rekey` (BOTCTL_OLD_STATE_KEY: the old key)"
        )


def legacy_warning(state: State, where: str) -> str | None:
    """The warning a state of format 3 with fingerprints earns, else None."""
    if not state.legacy_keyed:
        return None
    return lint.coded(
        lint.SALT_ONLY_STATE,
        f"the state at {where} keeps fingerprints keyed with a salt stored in it (format 3): "
        "whoever can read it can check guesses at its secrets. Move it under a state key with "
        "`botctl state rekey`",
    )


def needs_key(state: State) -> bool:
    """Whether writing ``state`` encrypts, or makes or keeps a fingerprint under the state
    key (a state of format 3 keeps its salt-only fingerprints until rekeyed)."""
    if state.encrypted:
        return True
    if state.legacy_keyed:
        return False
    locations = any(found for found in state.secret_locations.values())
    return bool(state.secrets or locations or state.has_sealed)


def prepare(state: State, find: Callable[[], KeySource]) -> None:
    """Before a write: the lineage's salt, and the state key when the state needs one and
    holds none yet (``find`` looks for it then, not at every write; a local state's key file
    is created then), with its ``key_check``."""
    if state.salt is None:
        state.salt = new_salt()
    if state.state_key is None and needs_key(state):
        found = ensure_key(find(), FOR_ENCRYPTION if state.encrypted else FOR_SECRETS)
        give_key(state, found)
    if state.state_key is not None and not state.legacy_keyed:
        check = FingerprintKey(state.salt, state.state_key).check
        if state.key_check not in (None, check) and state.has_sealed:
            raise StateKeyError("internal: the state's fingerprints are of another key")
        state.key_check = check


def record_document(state: State, chatbot_id: str) -> dict[str, Any]:
    """One chatbot's record as written: every value that holds a secret the run knows of, or
    sits where the configuration holds one, as its fingerprint (``State.protect``)."""
    record = state.bots[chatbot_id]
    secret = _secret_test(state, chatbot_id)
    settings: JsonValue = record.settings.json_fields
    if secret is not None or record.sealed_settings:
        leaves: dict[str, Any] = {
            path: state.fingerprint_key().seal(value)
            if secret is not None and secret(settings_location(path), value)
            else value
            for path, value in record.settings.leaves.items()
        }
        settings = encode(unflatten({**leaves, **record.sealed_settings}))
    document = {
        "bot": record.bot,
        "settings": settings,
        "verified_settings": sorted(record.verified_settings),
        "attributes": {
            name: _attribute_document(state, record, name, secret)
            for name in sorted(record.attributes)
        },
        "verified_attributes": sorted(record.verified_attributes),
        **_kind_documents(state, record, secret),
    }
    if record.migrations:  # renames under way only (see BotRecord.migrations)
        document["migrations"] = {
            name: record.migrations[name] for name in sorted(record.migrations)
        }
    return document


def _kind_documents(
    state: State, record: BotRecord, secret: Callable[[str, JsonValue], bool] | None
) -> dict[str, JsonValue]:
    """The keys of the kinds that keep their own, each value sealed where it must be."""

    def sealed(location: str, value: JsonValue) -> JsonValue:
        if secret is None or value is None or not secret(location, value):
            return value
        return encode(state.fingerprint_key().seal(value))

    documents: dict[str, JsonValue] = {}
    for kind in kinds():
        documents.update(kind.dump(record, sealed))
    return documents


def _secret_test(state: State, chatbot_id: str) -> Callable[[str, JsonValue], bool] | None:
    """Whether a value at a location must be sealed; None when nothing of this chatbot can."""
    locations = state.secret_locations.get(chatbot_id, set())
    secrets = state.secrets
    if not (locations or secrets):
        return None
    return lambda location, value: location in locations or holds_secret(value, secrets)


def _attribute_document(
    state: State,
    record: BotRecord,
    name: str,
    secret: Callable[[str, JsonValue], bool] | None,
) -> dict[str, Any]:
    document = record.attributes[name].to_json()
    sealed = record.sealed_attributes.get(name, {})
    if secret is None and not sealed:
        return document
    for key in SEALABLE_ATTRIBUTE_FIELDS:
        value = document.get(key)
        if value is None or secret is None:
            continue
        if secret(attribute_location(name, key), value):
            document[key] = state.fingerprint_key().seal(value)
    return dict(encode({**document, **sealed}))
