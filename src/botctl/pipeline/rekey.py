"""``botctl state rekey``: move a state's fingerprints from the key they were made under (the
salt alone, format 3; or an old state key) to the state key set now, without sending
anything.

A fingerprint cannot be re-keyed by itself: HMAC gives nothing back. Each one is matched, under
the old key, against the value the configuration declares at its place (its secrets taken from
the environment, as for a plan) and, when it matches, fingerprinted again under the new key.
One that matches nothing (a chatbot no longer declared, a secret rotated since) is forgotten:
that value is no longer recorded, so the next plan sends it (``unknown``) rather than trust
it. With ``forget``, a state whose old key is lost forgets every fingerprint this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from botctl.defaults import OLD_STATE_KEY_ENV, STATE_KEY_ENV
from botctl.models import BotRecord, BotSpec, State
from botctl.resources.registry import kinds
from botctl.sealing import FingerprintKey
from botctl.store.backends import StateLocation, open_backend
from botctl.store.keys import KeySource, StateKeyError, ensure_key, find_key, give_key
from botctl.store.lock import StateLock
from botctl.store.state import read_state, save_state


@dataclass(frozen=True)
class Rekeyed:
    where: str
    moved: int  # fingerprints made again under the new key
    forgotten: tuple[str, ...]  # "chatbot: place" of those dropped
    written: bool
    serial: int
    new_origin: str


def rekey_state(
    state_path: StateLocation,
    specs: Mapping[str, BotSpec] | None,
    environ: Mapping[str, str],
    *,
    forget: bool,
    lock_timeout: float,
) -> Rekeyed:
    """Rekey the state at ``state_path``; ``specs``: the configuration's chatbots by id (None:
    no configuration was given, which only a state without fingerprints, or ``forget``, can
    do without)."""
    with (
        open_backend(state_path) as backend,
        StateLock(backend, timeout=lock_timeout, command="state rekey"),
    ):
        current = find_key(backend, environ)
        old_value = environ.get(OLD_STATE_KEY_ENV, "")
        old = (
            KeySource(old_value.encode("utf-8"), f"${OLD_STATE_KEY_ENV}", current.file)
            if old_value
            else current
        )
        stored = read_state(backend, old, check_key=False)
        state = stored.state
        if state.lineage is None:
            raise StateKeyError(f"no state at {backend.where}: nothing to rekey")
        new = ensure_key(current, "`botctl state rekey` moves the state to it")
        assert new.key is not None
        assert state.salt is not None  # a written state has a salt
        new_key = FingerprintKey(state.salt, new.key)
        if specs is None and state.has_sealed and not forget:
            raise StateKeyError(
                f"the state at {backend.where} holds fingerprints: give the configuration "
                "(PATH..., or botctl.yaml's paths) so that each is matched with its value, or "
                "pass --forget to drop them"
            )
        old_key = _old_key(state, old, backend.where, forget)
        if (
            not state.legacy_keyed
            and old_key is not None
            and old_key.state_key == new.key
            and state.key_check == new_key.check
        ):
            return Rekeyed(backend.where, 0, (), False, state.serial, new.origin)
        moved, forgotten = 0, []
        for chatbot_id, record in sorted(state.bots.items()):
            spec = specs.get(chatbot_id) if specs is not None else None
            m, f = _rekey_record(record, spec, old_key, new_key)
            moved += m
            forgotten += [f"{record.bot} ({chatbot_id}): {place}" for place in f]
        state.legacy_keyed = False
        give_key(state, new)
        state.key_check = new_key.check
        state.cipher = None  # encrypted again under the new key
        save_state(state, backend, version=stored.version, message="botctl state rekey")
        return Rekeyed(backend.where, moved, tuple(forgotten), True, state.serial, new.origin)


def _old_key(state: State, old: KeySource, where: str, forget: bool) -> FingerprintKey | None:
    """The key the state's fingerprints were made under; None when it is lost and
    ``forget`` says to drop them."""
    assert state.salt is not None
    if state.legacy_keyed:
        return FingerprintKey(state.salt)
    if not state.has_sealed or state.key_check is None:
        return None if old.key is None else FingerprintKey(state.salt, old.key)
    if old.key is not None and FingerprintKey(state.salt, old.key).check == state.key_check:
        return FingerprintKey(state.salt, old.key)
    if forget:
        return None
    what = "no old key is set" if old.key is None else f"{old.origin} is not it"
    raise StateKeyError(
        f"the fingerprints of {where} were made under another state key, and {what}: set "
        f"{OLD_STATE_KEY_ENV} to that key (and {STATE_KEY_ENV} to the new one), or pass "
        "--forget to drop them (botctl then sends those values again at the next apply)"
    )


def _rekey_record(
    record: BotRecord, spec: BotSpec | None, old: FingerprintKey | None, new: FingerprintKey
) -> tuple[int, list[str]]:
    """Re-fingerprint one record's sealed values in place, each kind its own
    (``ResourceKind.rekey``); returns how many moved and the places forgotten."""
    moved, forgotten = 0, []
    for kind in kinds():
        m, f = kind.rekey(record, spec, old, new)
        moved += m
        forgotten += f
    return moved, forgotten
