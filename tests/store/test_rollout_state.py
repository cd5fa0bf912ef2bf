"""The state's rollout section (resources.rollout): written only once a chatbot has a record,
read back as written, one line per chatbot, refused when malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.errors import StateError
from botctl.models import BotRecord, State
from botctl.resources.rollout import Rollout
from botctl.store.state import load_state, save_state


def test_no_rollout_no_section(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={"bot-1": BotRecord(bot="support")}), path)
    assert "rollout" not in json.loads(path.read_text())
    assert load_state(path).rollout == {}


def test_rollout_round_trips_one_line_per_chatbot(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    state = State(
        bots={"bot-1": BotRecord(bot="support"), "bot-2": BotRecord(bot="staging")},
        rollout={"bot-2": Rollout("sha256:0123456789abcdef", True), "bot-1": Rollout("sha256:1")},
    )
    save_state(state, path)
    text = path.read_text()
    assert '    "bot-1": {"revision": "sha256:1", "tests_passed": null},\n' in text
    assert '    "bot-2": {"revision": "sha256:0123456789abcdef", "tests_passed": true}\n' in text
    assert load_state(path).rollout == {
        "bot-1": Rollout("sha256:1", None),
        "bot-2": Rollout("sha256:0123456789abcdef", True),
    }


def test_a_new_revision_forgets_the_outcome() -> None:
    record = Rollout("sha256:a", True)
    assert record.applied("sha256:a") is record
    assert record.applied("sha256:b") == Rollout("sha256:b", None)


def test_a_malformed_rollout_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={}, rollout={"bot-1": Rollout("sha256:a", True)}), path)
    document = json.loads(path.read_text())
    document["rollout"]["bot-1"]["tests_passed"] = "yes"
    path.write_text(json.dumps(document))
    with pytest.raises(StateError, match=r"rollout\.bot-1\.tests_passed"):
        load_state(path)
