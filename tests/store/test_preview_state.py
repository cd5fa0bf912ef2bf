"""The state's previews section (resources.preview): written only while a lease is held, read
back as written (times in UTC ISO 8601), kept by every other write of the state, refused when
malformed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from botctl.errors import StateError
from botctl.models import BotRecord, State
from botctl.resources.preview import PreviewLease
from botctl.store.state import StateWriter, load_state, read_state, save_state

LEASE = PreviewLease("github:org/repo#42", "stage=preview", 1_746_178_200.0, 1_746_181_800.0)


def test_no_lease_no_section(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={"bot-1": BotRecord(bot="support")}), path)
    assert "previews" not in json.loads(path.read_text())
    assert load_state(path).previews == {}


def test_a_lease_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(previews={"bot-2": LEASE}), path)
    assert json.loads(path.read_text())["previews"] == {
        "bot-2": {
            "owner": "github:org/repo#42",
            "stage": "stage=preview",
            "acquired": "2025-05-02T09:30:00Z",
            "expires": "2025-05-02T10:30:00Z",
        }
    }
    assert load_state(path).previews == {"bot-2": LEASE}
    assert LEASE.lapsed(LEASE.expires)
    assert not LEASE.lapsed(LEASE.expires - 1)


def test_an_apply_writing_the_state_keeps_the_leases(tmp_path: Path) -> None:
    path = tmp_path / "state.json"
    save_state(State(bots={"bot-1": BotRecord(bot="support")}, previews={"bot-2": LEASE}), path)
    stored = read_state(path)
    writer = StateWriter(stored.state, path, version=stored.version)
    stored.state.bots["bot-1"] = BotRecord(bot="renamed")
    writer.touched("bot-1")
    writer.close()
    assert load_state(path).previews == {"bot-2": LEASE}


@pytest.mark.parametrize(
    ("field", "value", "problem"),
    [("expires", "tomorrow", "previews: "), ("expires", "2025-05-02T10:30:00", "no time zone"),
     ("owner", "", "previews.bot-2.owner")],
)  # fmt: skip
def test_a_malformed_lease_is_a_clear_error(
    tmp_path: Path, field: str, value: str, problem: str
) -> None:
    path = tmp_path / "state.json"
    save_state(State(previews={"bot-2": LEASE}), path)
    document = json.loads(path.read_text())
    document["previews"]["bot-2"][field] = value
    path.write_text(json.dumps(document))
    with pytest.raises(StateError, match=problem):
        load_state(path)
