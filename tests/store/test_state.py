"""The state file: atomic writes, serial and lineage, corrupt files, the lock."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from botctl.errors import LockError, StateError
from botctl.models import BotRecord, State
from botctl.plan import BotRef, Operation, OperationKind
from botctl.resources.settings import ChatbotSettings
from botctl.sealing import FingerprintKey
from botctl.store.backend import UNREADABLE_LOCK, LockInfo
from botctl.store.backends.path import PathBackend
from botctl.store.lock import StateLock, break_lock, lock_path_for
from botctl.store.state import StateWriter, load_state, render_json, save_state, state_text
from botctl.store.stateformat import parse_state
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


def test_a_lock_is_never_seen_empty_or_half_written(tmp_path: Path) -> None:
    """Taken and released over and over while another process's look goes on: every look
    finds no lock or the whole of it (a lock created empty, then written, was read as an
    "unreadable lock" in between)."""
    backend = PathBackend(tmp_path / "state.json")
    info = LockInfo.for_this_process("botctl apply")
    seen: list[LockInfo | None] = []
    done = threading.Event()

    def look() -> None:
        while not done.is_set():
            seen.append(backend.read_lock())

    looker = threading.Thread(target=look)
    looker.start()
    try:
        for _ in range(200):
            assert backend.create_lock(info)
            assert not backend.create_lock(info)  # taken: refused, never overwritten
            backend.remove_lock(info, "released")
    finally:
        done.set()
        looker.join()
    assert UNREADABLE_LOCK not in seen
    assert info in seen  # the looks did meet the lock
    assert [p.name for p in tmp_path.iterdir()] == []  # no temporary file left behind


def test_lock_of_dead_process_is_taken_over_or_unlocked(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    info = {"pid": 2**22 + 12345, "host": os.uname().nodename, "since": "then", "command": "apply"}
    lock_path_for(path).write_text(json.dumps(info))
    done = break_lock(path)  # `botctl unlock` removes it
    assert done.holder is not None
    assert done.holder.since == "then"
    assert done.holder_gone
    lock_path_for(path).write_text(json.dumps(info))
    taken = StateLock(path)  # and the next run takes it over without it
    taken.acquire()
    assert taken.took_over is not None
    assert f"its holder no longer runs (pid {2**22 + 12345} on" in taken.took_over
    taken.release()


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
    assert path.read_text() == state_text(existing)
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


SECRET = "s3cr3t-t0ken"


def secret_state() -> State:
    """A state that recorded a value and an attribute label holding a ${secret:...}."""
    st = State()
    st.protect({SECRET}, {})
    st.apply_operation(op(record={"name": "Bot", "instructions": f"use {SECRET}", "temp": 0.2}))
    label = {"name": "tier", "type": "text", "label": f"T {SECRET}", "archived": False}
    st.apply_operation(op("create_attribute", "tier", label))
    return st


def test_a_secret_is_written_as_its_fingerprint_and_read_back_sealed(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(secret_state(), path)
    text = path.read_text()
    assert SECRET not in text
    data = json.loads(text)
    assert data["format_version"] == 4
    # The key of the fingerprints: a key file beside the local state (0600), never in it.
    key_file = tmp_path / "state.json.key"
    assert key_file.stat().st_mode & 0o777 == 0o600
    state_key = key_file.read_text().strip().encode()
    assert state_key.decode() not in text
    key = FingerprintKey(data["salt"], state_key)
    assert data["key_check"] == key.check
    record = data["bots"]["bot-1"]
    assert record["settings"]["instructions"] == {"$sealed": key.fingerprint(f"use {SECRET}")}
    assert record["settings"]["name"] == "Bot"  # no secret: in clear
    assert record["attributes"]["tier"]["label"] == {"$sealed": key.fingerprint(f"T {SECRET}")}
    # The salt alone (as format 3 keyed them) does not give these fingerprints.
    assert FingerprintKey(data["salt"]).fingerprint(f"use {SECRET}") not in text
    salt = data["salt"]
    loaded = load_state(path)
    assert loaded.salt == salt
    assert not loaded.outdated
    rec = loaded.bots["bot-1"]
    assert rec.settings.json_fields == {"name": "Bot", "temp": 0.2}
    assert rec.sealed_settings == {"instructions": key.seal(f"use {SECRET}")}
    assert rec.attributes["tier"].label is None
    assert rec.sealed_attributes == {"tier": {"label": key.seal(f"T {SECRET}")}}
    # Written again without knowing the secret (another run): the fingerprints stay as they were.
    save_state(loaded, path)
    assert json.loads(path.read_text())["bots"] == data["bots"]


def test_a_state_file_an_older_botctl_left_readable_is_narrowed(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(secret_state(), path)
    path.chmod(0o644)  # as an older botctl left it
    save_state(load_state(path), path)
    assert path.stat().st_mode & 0o777 == 0o600


def test_an_operation_replaces_a_sealed_value_it_sends() -> None:
    st = State(salt="ab" * 32)
    st.bots["bot-1"] = load_record_with_sealed(st.salt or "")
    st.apply_operation(op(record={"styles": {"theme": "dark"}}))
    assert st.bots["bot-1"].sealed_settings == {"instructions": FingerprintKey("ab" * 32).seal("x")}
    st.apply_operation(op(record={"instructions": "plain"}))
    assert st.bots["bot-1"].sealed_settings == {}
    assert st.bots["bot-1"].settings.json_fields["instructions"] == "plain"


def load_record_with_sealed(salt: str) -> BotRecord:
    key = FingerprintKey(salt)
    return BotRecord(
        bot="support",
        settings=ChatbotSettings(name="N"),
        sealed_settings={"instructions": key.seal("x"), "styles.displayName": key.seal("y")},
    )


def test_a_version_2_state_with_secrets_in_clear_is_rewritten_sealed(tmp_path: Path) -> None:
    """A state of botctl before this format kept secrets in clear: it is read, and the next
    write seals every value that holds a secret, and every value where the configuration
    holds one (it may be an older secret, rotated since)."""
    path = tmp_path / "state.json"
    old = {
        "format_version": 2,
        "lineage": "L",
        "serial": 4,
        "bots": {
            "bot-1": {
                "bot": "support",
                "settings": {"instructions": f"use {SECRET}", "ipLimitMessage": "0ld-secret"},
                "verified_settings": [],
                "attributes": {},
                "verified_attributes": [],
            }
        },
    }
    path.write_text(json.dumps(old))
    st = load_state(path)
    assert st.outdated
    assert st.bots["bot-1"].settings.instructions == f"use {SECRET}"
    st.protect({SECRET}, {"bot-1": {"settings:ipLimitMessage"}})
    writer = StateWriter(st, path)
    assert writer.dirty  # rewritten even when the run records nothing
    writer.flush()
    text = path.read_text()
    assert SECRET not in text
    assert "0ld-secret" not in text
    again = load_state(path)
    assert (again.lineage, again.serial, again.outdated) == ("L", 5, False)
    assert set(again.bots["bot-1"].sealed_settings) == {"instructions", "ipLimitMessage"}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.pop("salt"), "salt: Field required"),
        (lambda d: d.update(salt="short"), "salt: String should match pattern"),
        (
            lambda d: d["bots"]["bot-1"]["attributes"]["tier"].update(
                type={"$sealed": "hmac-sha256:" + "0" * 64}
            ),
            "bots.bot-1.attributes.tier.type: Input should be",
        ),
        (
            lambda d: d["bots"]["bot-1"]["settings"].update(instructions={"$sealed": "md5:0"}),
            "bots.bot-1.settings.instructions: Input should be a valid string",
        ),
    ],
)
def test_a_malformed_sealed_state_names_the_place(
    tmp_path: Path, change: Any, message: str
) -> None:
    path = tmp_path / "state.json"
    save_state(secret_state(), path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(StateError, match=message):
        load_state(path)


def test_a_sealed_state_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One parse of the text, the sealed values taken in place by the record's validator (a
    state that holds a secret was parsed, dumped and parsed again before)."""
    from pydantic_core import from_json as parse

    from botctl.store import stateformat

    path = tmp_path / "state.json"
    save_state(secret_state(), path)
    calls: list[int] = []

    def counting(text: Any) -> Any:
        calls.append(1)
        return parse(text)

    monkeypatch.setattr(stateformat, "from_json", counting)
    loaded = load_state(path)
    assert calls == [1]
    assert set(loaded.bots["bot-1"].sealed_settings) == {"instructions"}


def test_the_salt_is_made_before_writing_not_by_rendering(tmp_path: Path) -> None:
    from botctl.errors import StateError as Refused
    from botctl.store.state import state_text as render

    st = secret_state()
    with pytest.raises(Refused, match="salt"):
        render(st)  # rendering makes nothing: the writer's preparation does
    assert st.salt is None
    save_state(st, tmp_path / "state.json")
    assert st.salt is not None
    assert render(st) == (tmp_path / "state.json").read_text()


def test_recorded_attributes_alike_are_parsed_once_and_each_still_checked() -> None:
    """A state's attribute records are parsed once per distinct content (a fleet records the
    same ones for every chatbot): one instance serves them all, and a record that differs
    only in a value's type (``0`` for ``false``), or holds a sealed label, is still read by
    itself: refused at its place, or its fingerprint taken."""
    record = {"name": "tier", "type": "text", "label": "Tier", "archived": False}
    bots = {f"bot-{i}": {"bot": f"b{i}", "attributes": {"tier": dict(record)}} for i in range(3)}
    sealed = "hmac-sha256:" + "0" * 64
    bots["bot-3"] = {"bot": "b3", "attributes": {"tier": record | {"label": {"$sealed": sealed}}}}
    document = {
        "format_version": 4,
        "lineage": "l",
        "serial": 1,
        "salt": "a" * 64,
        "key_check": "b" * 64,
        "bots": bots,
    }
    loaded = parse_state(json.dumps(document), "state.json")
    first = loaded.bots["bot-0"].attributes["tier"]
    assert all(loaded.bots[f"bot-{i}"].attributes["tier"] is first for i in range(3))
    assert loaded.bots["bot-3"].attributes["tier"].label is None
    assert set(loaded.bots["bot-3"].sealed_attributes["tier"]) == {"label"}
    bots["bot-4"] = {"bot": "b4", "attributes": {"tier": record | {"archived": 0}}}
    with pytest.raises(StateError, match=r"bots\.bot-4\.attributes\.tier\.archived"):
        parse_state(json.dumps(document), "state.json")
