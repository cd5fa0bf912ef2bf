"""Plan files: round trip, checksum, format version; summaries and ordering."""

from __future__ import annotations

import json
from typing import Any

import pytest

from botctl.errors import PlanError
from botctl.store.planfile import plan_file_document, plan_from_document
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


def test_summary_counts_actions() -> None:
    summary = sample_plan().summary()
    assert summary == {
        "create": 1,
        "update": 6,
        "archive": 1,
        "unarchive": 0,
        "unmanaged": 1,
        "unverified": 3,
        "operations": 4,
    }
