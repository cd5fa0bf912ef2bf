"""The state's agent section (resources.agentrecord): written only when it holds something,
read back as written, kept by writes that do not touch it, refused when malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.errors import StateError
from botctl.models import BotRecord, State
from botctl.resources.agentrecord import AgentRecord, LastApplied, Suspension
from botctl.store.state import load_state, read_state, save_state


def test_no_record_no_section(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={"bot-1": BotRecord(bot="support")}), path)
    assert "agent" not in json.loads(path.read_text())
    assert load_state(path).agent == AgentRecord()


def test_the_record_round_trips_and_outlives_other_writes(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    record = AgentRecord(
        suspended=Suspension("2026-01-05T10:00:00+00:00", "alice", "incident 42"),
        applied={"bot-1": LastApplied("c0ffee", "2026-01-05T09:00:00+00:00")},
    )
    save_state(State(bots={"bot-1": BotRecord(bot="support")}, agent=record), path)
    assert json.loads(path.read_text())["agent"] == {
        "suspended": {"since": "2026-01-05T10:00:00+00:00", "by": "alice", "reason": "incident 42"},
        "applied": {"bot-1": {"revision": "c0ffee", "at": "2026-01-05T09:00:00+00:00"}},
    }
    # Another writer (an apply from CI) reads and writes the state: the section stays.
    stored = read_state(path)
    stored.state.bots["bot-2"] = BotRecord(bot="sales")
    save_state(stored.state, path, version=stored.version)
    assert load_state(path).agent == record


def test_a_malformed_record_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={}, agent=AgentRecord(Suspension("2026-01-05T10:00:00+00:00"))), path)
    document = json.loads(path.read_text())
    document["agent"]["suspended"]["by"] = 7
    path.write_text(json.dumps(document))
    with pytest.raises(StateError, match=r"agent\.suspended\.by"):
        load_state(path)
