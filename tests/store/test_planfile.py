"""Plan files: round trip, checksum, format version; summaries and ordering."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from botctl.errors import PlanError
from botctl.store.planfile import (
    _checksum,
    plan_file_document,
    plan_from_document,
    read_plan_file,
    write_plan_file,
)
from tests.test_render import sample_plan


def test_plan_file_roundtrip_is_exact() -> None:
    plan = sample_plan()
    data = json.loads(json.dumps(plan_file_document(plan)))
    again = plan_from_document(data)
    assert again == plan


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d.update(format_version=0), "format_version 0"),
        (lambda d: d["operations"][0]["body"].update(name="evil"), "checksum"),
        (lambda d: d.update(kind="other"), "not a botctl plan"),
    ],
)
def test_plan_file_refused(mutate: Any, message: str) -> None:
    data = json.loads(json.dumps(plan_file_document(sample_plan())))
    mutate(data)
    with pytest.raises(PlanError, match=message):
        plan_from_document(data)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["operations"][0].update(kind="delete_bot"), "operations.0.kind: Input"),
        (lambda d: d["operations"][1]["bot"].pop("api_key_env"), "operations.1.bot.api_key_env"),
        (lambda d: d.update(state={"serial": "3", "lineage": None}), "state.serial"),
        (lambda d: d.pop("depends_on"), "depends_on: Field required"),
    ],
)
def test_a_malformed_plan_file_names_the_place(mutate: Any, message: str) -> None:
    """Even with a matching checksum (a tool wrote it), the content is checked field by field."""
    data = json.loads(json.dumps(plan_file_document(sample_plan())))
    mutate(data)
    data["checksum"] = _checksum({k: v for k, v in data.items() if k != "checksum"})
    with pytest.raises(PlanError, match=f"plan file is malformed: {message}"):
        plan_from_document(data)


def test_reading_a_plan_file_that_is_not_one(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(PlanError, match="not UTF-8"):
        read_plan_file(path)
    path.write_text("{")
    with pytest.raises(PlanError, match="is not JSON"):
        read_plan_file(path)
    with pytest.raises(PlanError, match="cannot read plan file"):
        read_plan_file(tmp_path / "missing.json")


def test_written_plan_file_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "plan.json"
    write_plan_file(sample_plan(), path)
    assert read_plan_file(path) == sample_plan()


def test_summary_counts_actions() -> None:
    summary = sample_plan().summary()
    assert summary == {
        "create": 1,
        "update": 6,
        "archive": 1,
        "unarchive": 0,
        "reassert": 0,
        "unmanaged": 1,
        "unmanageable": 1,
        "unverified": 3,
        "missing": 0,
        "operations": 4,
    }
