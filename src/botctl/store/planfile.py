"""Plan files (``botctl plan --out``): everything ``apply --plan`` needs, checksummed, so a
saved plan is applied exactly as reviewed or not at all.

The file holds the published plan document (what a reviewer or tool reads) and the plan
itself (operations with their changes, the values relied on, the state serial and lineage).
It never holds a secret (``botctl.sealing``): in a request, each string that holds a
``${secret:VAR}`` is kept as its pieces, the variable and the fingerprint of its value, for
``apply --plan`` to put together again from the environment; a value relied on that holds one
is kept as its fingerprint. The fingerprints are keyed with the state key (never written here)
and the salt of the state the plan was made against, which stays in the state; a plan made
without such a state carries a salt of its own. ``key_check`` says which state key (null: the
salt alone, a plan made against a state of format 3). A plan made against a state encrypted
at rest is encrypted too, with the same key (``store.crypt``). It is read back through
pydantic: a malformed file is an error naming the place.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic_core import from_json

from botctl.errors import PlanError
from botctl.plan import BotRef, Dependency, Operation, Plan, Reads, Unmanageable, Unmanaged
from botctl.sealing import (
    SALT_PATTERN,
    FingerprintKey,
    decode,
    encode,
    holds_secret,
    new_salt,
    seal_strings,
    secret_pieces,
)
from botctl.store import crypt
from botctl.store.files import first_problem, read_text, write_atomically
from botctl.values import JsonValue

PLAN_FILE_KIND = "botctl-plan"
# 2: operations carry their changes; 3: no secret in clear; 4: fingerprints keyed with the
# state key (3 is still read: its fingerprints are keyed with the salt alone)
FORMAT_VERSION = 4
READABLE_VERSIONS = (3, 4)


@dataclass(frozen=True)
class SavedPlan:
    """A plan file as read. ``plan``'s requests still hold their secrets as pieces (see
    ``reconcile.freshness.resolve_secrets``, which makes them whole); ``salt``: the salt of
    its fingerprints when the file carries one (else it is the state's); ``key_check``: the
    state key they were made under (None: the salt alone)."""

    plan: Plan
    salt: str | None
    key_check: str | None = None
    encrypted: bool = False  # the file was encrypted at rest (its state is, or will be)


class _StateRef(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    serial: int | None
    lineage: str | None


class _PlanFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: str
    format_version: int
    plan: dict[str, Any]  # the published document: for readers, not read back
    operations: tuple[Operation, ...]
    unmanaged: tuple[Unmanaged, ...]
    unmanageable: tuple[Unmanageable, ...] = ()
    depends_on: tuple[Dependency, ...]
    state: _StateRef
    salt: Annotated[str, StringConstraints(pattern=SALT_PATTERN)] | None
    key_check: Annotated[str, StringConstraints(pattern=SALT_PATTERN)] | None = None  # from 4
    bots: tuple[BotRef, ...]
    unverified: int
    warnings: tuple[str, ...]
    violations: tuple[str, ...]
    reads: Reads = "service"  # absent from files written before --no-reads existed
    checksum: str


def plan_key(plan: Plan, salt: str | None = None) -> FingerprintKey | None:
    """The key of a plan file's fingerprints: the state's, or the state key with ``salt`` (a
    new one when not given) written in the file. None when the plan has no state key."""
    if plan.fingerprints is not None:
        return plan.fingerprints
    if plan.state_key is None:
        return None
    return FingerprintKey(salt or new_salt(), plan.state_key)


def plan_file_document(plan: Plan, salt: str | None = None) -> dict[str, Any]:
    """The file's content. Fingerprints use the key of the state the plan was made against;
    without one, the state key with ``salt`` (a new one when not given), written in the
    file. A plan with secrets needs one of the two (``pipeline.flows`` sees to it)."""
    key = plan_key(plan, salt)
    if key is None:
        if plan.secrets:
            raise PlanError("internal: a plan with secrets is saved without a state key")
        key = FingerprintKey(salt or new_salt())  # keys nothing: the plan holds no secret
    body: dict[str, Any] = {
        "kind": PLAN_FILE_KIND,
        "format_version": FORMAT_VERSION,
        "plan": plan.to_document(),
        "operations": [_operation_document(op, plan, key) for op in plan.operations],
        "unmanaged": [asdict(u) for u in plan.unmanaged],
        "unmanageable": [asdict(u) for u in plan.unmanageable],
        "depends_on": [_dependency_document(dep, plan, key) for dep in plan.depends_on],
        "state": {"serial": plan.state_serial, "lineage": plan.state_lineage},
        "salt": None if plan.fingerprints else key.salt,
        "key_check": key.check,
        "bots": [asdict(ref) for ref in plan.bots],
        "unverified": plan.unverified,
        "warnings": list(plan.warnings),
        "violations": list(plan.violations),
        "reads": plan.reads,
    }
    body["checksum"] = _checksum(body)
    return body


def _operation_document(op: Operation, plan: Plan, key: FingerprintKey) -> dict[str, Any]:
    """An operation, each secret in its requests as the pieces to put together again (its
    changes are masked already)."""
    document = asdict(op)
    for name in ("body", "state_record", "fallback"):
        document[name] = seal_strings(document[name], plan.secrets, key)
    return document


def _dependency_document(dep: Dependency, plan: Plan, key: FingerprintKey) -> dict[str, Any]:
    """A value relied on; where it holds a secret (or the configuration holds one there: a
    value read may hold a secret rotated since), its fingerprint."""
    document = asdict(dep)
    value: JsonValue = dep.value
    if value is not None and (dep.secret or holds_secret(value, plan.secret_values)):
        value = key.seal(value)
    document["value"] = encode(value)
    return document


def plan_from_document(data: Any) -> SavedPlan:
    if not isinstance(data, dict) or data.get("kind") != PLAN_FILE_KIND:
        raise PlanError("not a botctl plan file")
    if data.get("format_version") not in READABLE_VERSIONS:
        raise PlanError(
            f"plan file format_version {data.get('format_version')!r} is not supported "
            f"(this botctl writes {FORMAT_VERSION} and reads "
            f"{', '.join(map(str, READABLE_VERSIONS))}); run `botctl plan --out` again"
        )
    unsigned = {k: v for k, v in data.items() if k != "checksum"}
    if data.get("checksum") != _checksum(unsigned):
        raise PlanError("plan file checksum does not match: it was edited or truncated")
    try:
        parsed = _PlanFile.model_validate(data)
    except ValidationError as exc:
        raise PlanError(f"plan file is malformed: {first_problem(exc)}") from None
    for i, op in enumerate(parsed.operations):
        for key in ("body", "state_record", "fallback"):
            _check_secrets(getattr(op, key), f"operations.{i}.{key}")
    plan = Plan(
        operations=parsed.operations,
        unmanaged=parsed.unmanaged,
        unmanageable=parsed.unmanageable,
        unverified=parsed.unverified,
        depends_on=tuple(replace(dep, value=decode(dep.value)) for dep in parsed.depends_on),
        state_serial=parsed.state.serial,
        state_lineage=parsed.state.lineage,
        warnings=parsed.warnings,
        bots=parsed.bots,
        violations=parsed.violations,
        reads=parsed.reads,
    )
    return SavedPlan(plan, parsed.salt, parsed.key_check)


def _check_secrets(value: JsonValue, where: str) -> None:
    """Every ``{"$secret": ...}`` in a request is well formed (the checksum only says the file
    is as written)."""
    try:
        pieces = secret_pieces(value)
    except ValueError as exc:
        raise PlanError(f"plan file is malformed: {where}: {exc}") from None
    if pieces is not None:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            _check_secrets(item, f"{where}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _check_secrets(item, f"{where}.{i}")


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def write_plan_file(plan: Plan, path: Path, cipher: crypt.Cipher | None = None) -> None:
    """Write the plan file; encrypted with ``cipher`` (the state's) when given."""
    text = json.dumps(plan_file_document(plan), indent=2) + "\n"
    if cipher is not None:
        text = crypt.encrypt(text, cipher, "plan")
    try:
        write_atomically(path, text)
    except OSError as exc:
        raise PlanError(f"cannot write plan file {path}: {exc.strerror}") from None


def read_plan_file(
    path: Path, key_of: Callable[[], tuple[bytes | None, str]] | None = None
) -> SavedPlan:
    """Read a plan file; one encrypted at rest is opened with the state key ``key_of`` gives
    (asked only then: the key, and what to set when there is none)."""
    text = read_text(path, "plan file", PlanError)
    encrypted = crypt.is_encrypted(text)
    if encrypted:
        key, hint = key_of() if key_of is not None else (None, "set BOTCTL_STATE_KEY")
        text, _ = crypt.decrypt(text, key, f"plan file {path}", hint, "plan")
    try:
        data = from_json(text)  # bounded nesting (json.loads raises RecursionError)
    except ValueError as exc:
        raise PlanError(f"plan file {path} is not JSON: {exc}") from None
    saved = plan_from_document(data)
    return replace(saved, encrypted=True) if encrypted else saved
