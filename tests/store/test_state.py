"""The state file: atomic writes, serial and lineage, corrupt files, the lock."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from botctl.errors import LockError, StateError
from botctl.models import State
from botctl.plan import BotRef, Operation, OperationKind
from botctl.store.lock import StateLock, break_lock, lock_path_for
from botctl.store.state import StateWriter, load_state, render_json, save_state, state_document
from tests.factories import operation


def op(
    kind: OperationKind = "update_settings",
    key: str = "settings",
    record: dict[str, Any] | None = None,
    chatbot_id: str = "bot-1",
) -> Operation:
    ref = BotRef("support", chatbot_id, "BOTCTL_API_KEY")
    return operation(kind, key, record or {"name": "A"}, ref=ref)


def test_missing_file_is_empty_state(tmp_path: Path) -> None:
    st = load_state(tmp_path / "none.json")
    assert st.lineage is None
    assert st.bots == {}


def test_roundtrip_bumps_serial_and_keeps_lineage(tmp_path: Path) -> None:
    path = tmp_path / "s" / "state.json"
    st = State()
    st.apply_operation(op())
    st.apply_operation(op("create_attribute", "tier", {"name": "tier", "type": "text"}))
    save_state(st, path)
    first = load_state(path)
    assert first.serial == 1
    assert first.lineage
    assert first.bots["bot-1"].settings.json_fields == {"name": "A"}
    assert first.bots["bot-1"].attributes["tier"].type == "text"
    save_state(first, path)
    second = load_state(path)
    assert (second.serial, second.lineage) == (2, first.lineage)
    assert [p.name for p in path.parent.iterdir()] == ["state.json"]  # no temp files left


def test_nested_settings_replace_whole(tmp_path: Path) -> None:
    st = State()
    st.apply_operation(op(record={"styles": {"theme": "dark", "buttonColor": "#fff"}}))
    st.apply_operation(op(record={"styles": {"theme": "light"}}))
    assert st.bots["bot-1"].settings.json_fields == {"styles": {"theme": "light"}}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid botctl state"),
        ('{"format_version": 99}', "format_version 99"),
        ('{"format_version": 1, "lineage": "x"}', "not valid botctl state"),
        # Read through the models: the message names the place, never a KeyError.
        (
            '{"format_version": 1, "lineage": "x", "serial": 1, "bots": {"b": {"bot": "s",'
            ' "attributes": {"t": {"name": "t", "type": "json"}}}}}',
            "bots.b.attributes.t.type: Input should be 'text', 'number', 'boolean' or 'date'",
        ),
        (
            '{"format_version": 1, "lineage": "x", "serial": "7", "bots": {}}',
            "serial: Input should be a valid integer",
        ),
        (
            '{"format_version": 1, "lineage": "x", "serial": 1, "bots": {"b": {"bot": "s",'
            ' "settings": {"temp": 3}}}}',
            "bots.b.settings.temp: Input should be less than or equal to 1",
        ),
        ('{"format_version": 1, "lineage": "x", "serial": 1, "bots": []}', "bots: Input should"),
    ],
)
def test_corrupt_state_is_a_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "state.json"
    path.write_text(content)
    with pytest.raises(StateError, match=message):
        load_state(path)


def test_writer_coalesces_and_flushes(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    writer = StateWriter(State(), path, interval=3600)
    writer.record(op())  # first record writes at once (nothing written yet)
    writer.record(op(record={"temp": 0.1}))  # coalesced
    assert load_state(path).bots["bot-1"].settings.json_fields == {"name": "A"}
    writer.flush()
    assert load_state(path).bots["bot-1"].settings.json_fields == {"name": "A", "temp": 0.1}


def test_second_lock_fails_fast_naming_the_holder(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    with StateLock(path), pytest.raises(LockError, match=f"pid {os.getpid()}"):
        StateLock(path).acquire()
    assert not lock_path_for(path).exists()


def test_lock_of_dead_process_suggests_unlock(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    info = {"pid": 2**22 + 12345, "host": os.uname().nodename, "since": "then", "command": "apply"}
    lock_path_for(path).write_text(json.dumps(info))
    with pytest.raises(LockError, match="botctl unlock"):
        StateLock(path, timeout=0.2).acquire()
    done = break_lock(path)
    assert done.holder is not None
    assert done.holder.since == "then"
    assert done.holder_gone
    StateLock(path).acquire()


def test_state_file_has_one_line_per_record(tmp_path: Path) -> None:
    data = {
        "serial": 3,
        "bots": {
            "bot-1": {
                "bot": "support",
                "settings": {"name": "Süpport", "styles": {"theme": "dark"}},
                "attributes": {"tier": {"name": "tier", "type": "text", "archived": False}},
            }
        },
    }
    text = render_json(data)
    assert json.loads(text) == data
    lines = text.splitlines()
    assert '        "tier": {"name": "tier", "type": "text", "archived": false}' in lines
    assert '        "styles": {"theme": "dark"}' in lines  # settings holds a mapping: expanded
    assert '        "name": "Süpport",' in lines  # not \\u-escaped


def test_writer_rerenders_only_what_changed_and_writes_the_same_file(tmp_path: Path) -> None:
    """The writer's incremental rendering gives byte for byte what a full render gives."""
    path = tmp_path / "state.json"
    existing = State()
    existing.apply_operation(op(chatbot_id="bot-0", record={"name": "Old"}))
    writer = StateWriter(existing, path, interval=3600)
    for i in range(3):
        writer.record(op(chatbot_id=f"bot-{i}", record={"name": f"N{i}"}))
    writer.record(op(chatbot_id="bot-2", record={"temp": 0.5}))
    writer.flush()
    writer.record(op(chatbot_id="bot-1", record={"name": "Renamed"}))
    writer.flush()
    assert path.read_text() == render_json(state_document(existing)) + "\n"
    loaded = load_state(path)
    assert loaded.bots["bot-1"].settings.json_fields == {"name": "Renamed"}
    assert loaded.bots["bot-2"].settings.json_fields == {"name": "N2", "temp": 0.5}
    assert loaded.bots["bot-0"].settings.json_fields == {"name": "N0"}


def test_state_lock_and_plan_files_are_created_0600(tmp_path: Path) -> None:
    """What botctl writes may hold what it sent: readable by its owner only, whatever the
    umask."""
    from botctl.plan import Plan
    from botctl.store.planfile import write_plan_file

    old = os.umask(0o022)
    try:
        path = tmp_path / ".botctl" / "state.json"
        with StateLock(path):
            save_state(State(), path)
            assert lock_path_for(path).stat().st_mode & 0o777 == 0o600
        write_plan_file(Plan(), tmp_path / "plan.json")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o777 == 0o600
    assert (tmp_path / "plan.json").stat().st_mode & 0o777 == 0o600
