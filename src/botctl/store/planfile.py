"""Plan files (``botctl plan --out``): everything ``apply --plan`` needs, checksummed, so a
saved plan is applied exactly as reviewed or not at all.

The file holds the published plan document (what a reviewer or tool reads) and the plan
itself (operations with their changes, the live values relied on, the state serial and
lineage). It is read back through pydantic: a malformed file is an error naming the place.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import from_json

from botctl.errors import PlanError
from botctl.plan import BotRef, Dependency, Operation, Plan, Reads, Unmanageable, Unmanaged
from botctl.store.files import first_problem, read_text, write_atomically

PLAN_FILE_KIND = "botctl-plan"
FORMAT_VERSION = 2  # 2: operations carry their changes


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
    bots: tuple[BotRef, ...]
    unverified: int
    warnings: tuple[str, ...]
    violations: tuple[str, ...]
    secrets: tuple[str, ...]
    reads: Reads = "service"  # absent from files written before --no-reads existed
    checksum: str


def plan_file_document(plan: Plan) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": PLAN_FILE_KIND,
        "format_version": FORMAT_VERSION,
        "plan": plan.to_document(),
        "operations": [asdict(op) for op in plan.operations],
        "unmanaged": [asdict(u) for u in plan.unmanaged],
        "unmanageable": [asdict(u) for u in plan.unmanageable],
        "depends_on": [asdict(dep) for dep in plan.depends_on],
        "state": {"serial": plan.state_serial, "lineage": plan.state_lineage},
        "bots": [asdict(ref) for ref in plan.bots],
        "unverified": plan.unverified,
        "warnings": list(plan.warnings),
        "violations": list(plan.violations),
        "secrets": sorted(plan.secrets),
        "reads": plan.reads,
    }
    body["checksum"] = _checksum(body)
    return body


def plan_from_document(data: Any) -> Plan:
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
    return Plan(
        operations=parsed.operations,
        unmanaged=parsed.unmanaged,
        unmanageable=parsed.unmanageable,
        unverified=parsed.unverified,
        depends_on=parsed.depends_on,
        state_serial=parsed.state.serial,
        state_lineage=parsed.state.lineage,
        warnings=parsed.warnings,
        bots=parsed.bots,
        violations=parsed.violations,
        secrets=frozenset(parsed.secrets),
        reads=parsed.reads,
    )


def _checksum(body: dict[str, Any]) -> str:
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def write_plan_file(plan: Plan, path: Path) -> None:
    try:
        write_atomically(path, json.dumps(plan_file_document(plan), indent=2) + "\n")
    except OSError as exc:
        raise PlanError(f"cannot write plan file {path}: {exc.strerror}") from None


def read_plan_file(path: Path) -> Plan:
    text = read_text(path, "plan file", PlanError)
    try:
        data = from_json(text)  # bounded nesting (json.loads raises RecursionError)
    except ValueError as exc:
        raise PlanError(f"plan file {path} is not JSON: {exc}") from None
    return plan_from_document(data)
