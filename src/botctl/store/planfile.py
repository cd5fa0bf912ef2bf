"""Plan files (``botctl plan --out``): everything ``apply --plan`` needs, checksummed, so a
saved plan is applied exactly as reviewed or not at all.

The file holds the published plan document (what a reviewer or tool reads) and the plan
itself (operations with their changes, the values relied on, the state serial and lineage).
It never holds a secret (``botctl.sealing``): in a request, each string that holds a
``${secret:VAR}`` is kept as its pieces, the variable and the fingerprint of its value, for
``apply --plan`` to put together again from the environment; a value relied on that holds one
is kept as its fingerprint. The fingerprints are keyed with the salt of the state the plan was
made against, which stays in the state; a plan made without such a state carries a salt of its
own. It is read back through pydantic: a malformed file is an error naming the place.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError
from pydantic_core import from_json

from botctl.errors import PlanError
from botctl.plan import BotRef, Dependency, Operation, Plan, Reads, Unmanageable, Unmanaged
from botctl.sealing import (
    SALT_PATTERN,
    decode,
    encode,
    holds_secret,
    new_salt,
    seal,
    seal_strings,
    secret_pieces,
)
from botctl.store.files import first_problem, read_text, write_atomically
from botctl.values import JsonValue

PLAN_FILE_KIND = "botctl-plan"
FORMAT_VERSION = 3  # 2: operations carry their changes; 3: no secret in clear


@dataclass(frozen=True)
class SavedPlan:
    """A plan file as read. ``plan``'s requests still hold their secrets as pieces (see
    ``reconcile.freshness.resolve_secrets``, which makes them whole); ``salt`` is the key of
    its fingerprints when the file carries one (else it is the state's)."""

    plan: Plan
    salt: str | None


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
    bots: tuple[BotRef, ...]
    unverified: int
    warnings: tuple[str, ...]
    violations: tuple[str, ...]
    reads: Reads = "service"  # absent from files written before --no-reads existed
    checksum: str


def plan_file_document(plan: Plan, salt: str | None = None) -> dict[str, Any]:
    """The file's content. Fingerprints use the salt of the state the plan was made against;
    without one, ``salt`` (a new one when not given), written in the file."""
    key = plan.state_salt or salt or new_salt()
    body: dict[str, Any] = {
        "kind": PLAN_FILE_KIND,
        "format_version": FORMAT_VERSION,
        "plan": plan.to_document(),
        "operations": [_operation_document(op, plan, key) for op in plan.operations],
        "unmanaged": [asdict(u) for u in plan.unmanaged],
        "unmanageable": [asdict(u) for u in plan.unmanageable],
        "depends_on": [_dependency_document(dep, plan, key) for dep in plan.depends_on],
        "state": {"serial": plan.state_serial, "lineage": plan.state_lineage},
        "salt": None if plan.state_salt else key,
        "bots": [asdict(ref) for ref in plan.bots],
        "unverified": plan.unverified,
        "warnings": list(plan.warnings),
        "violations": list(plan.violations),
        "reads": plan.reads,
    }
    body["checksum"] = _checksum(body)
    return body


def _operation_document(op: Operation, plan: Plan, salt: str) -> dict[str, Any]:
    """An operation, each secret in its requests as the pieces to put together again (its
    changes are masked already)."""
    document = asdict(op)
    for key in ("body", "state_record", "fallback"):
        document[key] = seal_strings(document[key], plan.secrets, salt)
    return document


def _dependency_document(dep: Dependency, plan: Plan, salt: str) -> dict[str, Any]:
    """A value relied on; where it holds a secret (or the configuration holds one there: a
    value read may hold a secret rotated since), its fingerprint."""
    document = asdict(dep)
    value: JsonValue = dep.value
    if value is not None and (dep.secret or holds_secret(value, plan.secret_values)):
        value = seal(salt, value)
    document["value"] = encode(value)
    return document


def plan_from_document(data: Any) -> SavedPlan:
    if not isinstance(data, dict) or data.get("kind") != PLAN_FILE_KIND:
        raise PlanError("not a botctl plan file")
    if data.get("format_version") != FORMAT_VERSION:
        raise PlanError(
            f"plan file format_version {data.get('format_version')!r} is not supported "
            f"(this botctl writes and reads {FORMAT_VERSION}); run `botctl plan --out` again"
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
    return SavedPlan(plan, parsed.salt)


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


def write_plan_file(plan: Plan, path: Path) -> None:
    try:
        write_atomically(path, json.dumps(plan_file_document(plan), indent=2) + "\n")
    except OSError as exc:
        raise PlanError(f"cannot write plan file {path}: {exc.strerror}") from None


def read_plan_file(path: Path) -> SavedPlan:
    text = read_text(path, "plan file", PlanError)
    try:
        data = from_json(text)  # bounded nesting (json.loads raises RecursionError)
    except ValueError as exc:
        raise PlanError(f"plan file {path} is not JSON: {exc}") from None
    return plan_from_document(data)
