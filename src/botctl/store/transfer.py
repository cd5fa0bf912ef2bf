"""Moving a state document between backends (``botctl state push`` and ``migrate``) without
breaking the lineage and serial rules: a state of another lineage is another history, and a
serial never goes backwards (a plan saved against any earlier write must stay stale)."""

from __future__ import annotations

from dataclasses import dataclass

from botctl.errors import StateError
from botctl.models import State
from botctl.sealing import new_salt
from botctl.store.backend import LockInfo, StateBackend
from botctl.store.backends import StateLocation, open_backend, using_backend
from botctl.store.crypt import Encryption
from botctl.store.keys import FOR_ENCRYPTION, StateKeyError, ensure_key, find_key, write_key_file
from botctl.store.lock import StateLock
from botctl.store.protection import check_not_weaker, remember
from botctl.store.state import prepare_write, read_state, state_text, stored_text


@dataclass(frozen=True)
class Summary:
    """What ``botctl state show`` reports."""

    where: str
    lineage: str | None  # None: no state stored
    serial: int
    chatbots: dict[str, str]  # chatbot id -> metadata.name
    lock: LockInfo | None
    encryption: Encryption = "none"
    # How its fingerprints are keyed: "state key (<origin>)", "salt only (format 3)", or
    # "none" when it holds no fingerprint.
    fingerprints: str = "none"
    warnings: tuple[str, ...] = ()


def summarize(where: StateLocation | StateBackend) -> Summary:
    with using_backend(where) as backend:
        source = find_key(backend)
        state = read_state(backend, source).state
        chatbots = {chatbot_id: rec.bot for chatbot_id, rec in sorted(state.bots.items())}
        if state.legacy_keyed:
            fingerprints = "salt only, stored in the state (format 3): run `botctl state rekey`"
        elif state.has_sealed:
            fingerprints = f"state key ({source.origin})"
        else:
            fingerprints = "none"
        return Summary(
            backend.where,
            state.lineage,
            state.serial,
            chatbots,
            backend.read_lock(),
            "passphrase" if state.encrypted else "none",
            fingerprints,
            tuple(state.warnings),
        )


@dataclass(frozen=True)
class Replaced:
    """What a push or a migration did: ``written`` False when the target already held that
    very state; ``serial`` is the serial written (raised when ``--force`` replaced a newer
    one)."""

    where: str
    written: bool
    lineage: str
    serial: int
    replaced: str | None  # "lineage L, serial N" of the state overwritten, if any


def replace_state(
    incoming: State,
    target: StateBackend,
    *,
    force: bool,
    lock_timeout: float,
    command: str,
    downgrade: bool = False,
) -> Replaced:
    """Store ``incoming`` in ``target`` under its lock, as a compare-and-swap against what
    the target held. Refused, unless ``force``, when the target holds another lineage, a
    newer serial, or the same serial with other content; refused, unless ``downgrade``
    (``--state-encryption none``), when it is weaker than the state kept there was
    (``store.protection``)."""
    if incoming.lineage is None:
        raise StateError("the state to store has no lineage: it is not a written botctl state")
    with StateLock(target, timeout=lock_timeout, command=command):
        stored = read_state(target)
        current = stored.state
        replaced = None
        if current.lineage is not None:
            replaced = f"lineage {current.lineage}, serial {current.serial}"
            if current.lineage == incoming.lineage:
                # One lineage, one salt (the key of its fingerprints): a state of a format
                # that had none (before 3) takes the other's, so that the two compare by
                # content and the target's salt is never replaced under its lineage.
                shared = incoming.salt or current.salt or new_salt()
                incoming.salt, current.salt = incoming.salt or shared, current.salt or shared
            prepare_write(current, target)
        _carry_key(incoming, target)
        check_not_weaker(incoming, target, downgrade=downgrade)
        prepare_write(incoming, target)
        if current.lineage is not None:
            _check_replace(incoming, current, target.where, force)
            if state_text(incoming) == state_text(current):
                return Replaced(target.where, False, incoming.lineage, incoming.serial, None)
            if current.lineage == incoming.lineage and incoming.serial <= current.serial:
                incoming.serial = current.serial + 1  # --force: the serial still moves on
        target.write(stored_text(incoming), stored.version, f"botctl {command}: state replaced")
        remember(incoming, target, downgrade=downgrade)
        return Replaced(target.where, True, incoming.lineage, incoming.serial, replaced)


def _check_replace(incoming: State, current: State, where: str, force: bool) -> None:
    if force:
        return
    theirs = f"lineage {current.lineage}, serial {current.serial}"
    ours = f"lineage {incoming.lineage}, serial {incoming.serial}"
    if current.lineage != incoming.lineage:
        raise StateError(
            f"refusing to replace the state at {where} ({theirs}) with another history "
            f"({ours}): plans and records of one do not apply to the other. Pass --force to "
            "replace it anyway"
        )
    if incoming.serial < current.serial:
        raise StateError(
            f"refusing to replace the state at {where} ({theirs}) with an older one ({ours}): "
            "it would undo what later runs recorded. Pass --force to replace it anyway"
        )
    if incoming.serial == current.serial and state_text(incoming) != state_text(current):
        raise StateError(
            f"refusing to replace the state at {where} ({theirs}) with a different state of "
            "the same serial: the two have diverged. Pass --force to replace it anyway"
        )


def _carry_key(incoming: State, target: StateBackend) -> None:
    """The state key ``incoming``'s fingerprints (or encryption) use must be the target's
    too: copied into a local target's key file when it has none, else an error naming what
    to set (nothing is written)."""
    sealed = not incoming.legacy_keyed and incoming.has_sealed and incoming.key_check is not None
    if not (sealed or incoming.encrypted):
        return
    found = find_key(target)
    if incoming.state_key is None:  # encrypted from now on, and the source had no key
        incoming.state_key = ensure_key(found, FOR_ENCRYPTION).key
        return
    if found.key is not None:
        if found.key != incoming.state_key:
            raise StateKeyError(
                f"{found.origin} is not the state key of the state moved to {target.where}: "
                "set BOTCTL_STATE_KEY to the key it was made under; nothing was written"
            )
        return
    if found.file is None:
        raise StateKeyError(
            f"{target.where} is shared: the state's key must come from BOTCTL_STATE_KEY there "
            "(set it to the key the state was made under, e.g. the content of the local key "
            "file, and keep it as a CI secret); nothing was written"
        )
    write_key_file(found.file, incoming.state_key.decode("utf-8"))


def migrate_state(
    source: StateLocation,
    target: StateLocation | None,
    *,
    force: bool,
    lock_timeout: float,
    encryption: Encryption | None = None,
) -> Replaced:
    """Copy the state at ``source`` to ``target`` (same lineage and serial), holding the
    source's lock meanwhile so that no run writes it during the copy. The source is left as
    it was. ``encryption``: how the copy is kept (None: as the source is); without a
    ``target``, the state is rewritten in place so (same serial: the same state)."""
    with open_backend(source) as src, open_backend(target or source) as dst:
        if target is not None and src.where == dst.where:
            raise StateError(f"--to {dst.where} is the state's own location")
        with StateLock(src, timeout=lock_timeout, command="state migrate"):
            stored = read_state(src)
            state = stored.state
            if state.lineage is None:
                raise StateError(f"no state at {src.where}: nothing to migrate")
            wanted = state.encrypted if encryption is None else encryption == "passphrase"
            if target is None and wanted == state.encrypted:
                return Replaced(src.where, False, state.lineage, state.serial, None)
            if wanted != state.encrypted:
                state.encrypted, state.cipher = wanted, None
            downgrade = encryption == "none"
            if target is None:
                return _rewrite_in_place(state, src, stored.version, downgrade)
            return replace_state(
                state,
                dst,
                force=force,
                lock_timeout=lock_timeout,
                command="state migrate",
                downgrade=downgrade,
            )


def _rewrite_in_place(
    state: State, backend: StateBackend, version: str | None, downgrade: bool
) -> Replaced:
    """The state written again where it is, now encrypted or now clear (only reached when
    that changes, so the text always differs), serial unchanged."""
    assert state.lineage is not None
    check_not_weaker(state, backend, downgrade=downgrade)
    prepare_write(state, backend)
    text = stored_text(state)
    backend.write(text, version, "botctl state migrate: encryption changed")
    remember(state, backend, downgrade=downgrade)
    return Replaced(backend.where, True, state.lineage, state.serial, None)
