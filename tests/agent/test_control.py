"""The control rules apart from HTTP: who may read and steer (``agent.auth``), what holds
applying and what an override lifts (``agent.control``), what a control request's body may
hold (``listener.control_request``)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest

from botctl.agent.auth import Access, is_loopback, weak_token
from botctl.agent.control import Controls, Override
from botctl.agent.listener import Refused, control_request
from botctl.agent.windows import parse_window
from botctl.resources.agentrecord import Suspension

TOKEN = "0123456789abcdef-token"


def basic(password: str, user: str = "me") -> dict[str, str]:
    pair = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"authorization": f"Basic {pair}"}


def bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("10.0.0.5", False),
        ("agent.internal", False),
    ],
)
def test_which_listen_addresses_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_short_token_is_weak() -> None:
    assert weak_token("replace-me") is not None
    assert weak_token("x" * 16) is None


def test_on_loopback_without_a_token_reads_are_open_and_control_is_off() -> None:
    access = Access(None, loopback=True, variable="BOTCTL_CONTROL_TOKEN")
    assert access.reads({}) is None
    refused = access.control(bearer(TOKEN))
    assert refused is not None
    assert refused.code == 403
    assert "BOTCTL_CONTROL_TOKEN" in refused.message


def test_off_loopback_without_a_token_reads_are_closed() -> None:
    access = Access(None, loopback=False, variable="TOKEN_VAR")
    refused = access.reads(bearer(TOKEN))
    assert refused is not None
    assert refused.code == 401
    assert "TOKEN_VAR" in refused.message


@pytest.mark.parametrize("loopback", [True, False])
def test_with_a_token_reads_take_bearer_or_basic_and_control_bearer_only(loopback: bool) -> None:
    access = Access(TOKEN, loopback=loopback, variable="BOTCTL_CONTROL_TOKEN")
    assert access.reads(bearer(TOKEN)) is None
    assert access.reads(basic(TOKEN)) is None
    assert access.reads({"authorization": f"bearer   {TOKEN}  "}) is None
    for wrong in (
        {},
        bearer("nope"),
        basic("nope"),
        basic(TOKEN[:-1]),
        {"authorization": "Basic !!"},
    ):
        refused = access.reads(wrong)
        assert refused is not None
        assert refused.code == 401
        assert refused.challenge is not None
        assert refused.challenge.startswith("Basic")
    assert access.control(bearer(TOKEN)) is None
    for wrong in ({}, basic(TOKEN), bearer(TOKEN + "x"), {"authorization": "Token " + TOKEN}):
        refused = access.control(wrong)
        assert refused is not None
        assert refused.code == 401


class Clock:
    def __init__(self, at: str) -> None:
        self.at = datetime.fromisoformat(at)

    def __call__(self) -> datetime:
        return self.at


WINDOW = parse_window("Sat-Sun 00:00-24:00 UTC")
SATURDAY = "2025-06-07T12:00:00+00:00"
MONDAY = "2025-06-09T12:00:00+00:00"


def test_a_window_holds_and_an_override_lifts_it_once() -> None:
    controls = Controls((WINDOW,), Clock(SATURDAY))
    hold, override = controls.decide()
    assert hold is not None
    assert hold.kind == "window"
    assert hold.until == datetime(2025, 6, 9, tzinfo=UTC)
    assert override is None
    controls.override = _override()
    hold, override = controls.decide()
    assert (hold, override is not None) == (None, True)
    hold, override = controls.decide()  # spent
    assert hold is not None
    assert override is None


def test_an_override_never_lifts_a_suspension_and_is_spent_anyway() -> None:
    controls = Controls((WINDOW,), Clock(SATURDAY))
    controls.suspended = Suspension("2025-06-07T11:00:00+00:00", "alice", "incident")
    controls.override = _override()
    hold, override = controls.decide()
    assert hold is not None
    assert hold.kind == "suspended"
    assert hold.words == "suspended by alice since 2025-06-07T11:00:00+00:00: incident"
    assert override is None
    assert controls.override is None


def test_outside_every_window_nothing_holds_and_a_stray_override_is_spent() -> None:
    controls = Controls((WINDOW,), Clock(MONDAY))
    controls.override = _override()
    assert controls.decide() == (None, None)
    assert controls.override is None
    assert controls.to_document() == {
        "suspended": None,
        "denyWindow": None,
        "denyWindows": ["Sat-Sun 00:00-24:00 UTC"],
        "windowOverride": None,
    }


def _override() -> Override:
    return Override("hotfix", "bob", "2025-06-07T12:00:00+00:00")


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{", "not JSON"),
        (b"[]", "not a JSON object"),
        (b'{"who": "x"}', "unknown field 'who'"),
        (b'{"overrideWindow": "yes"}', "overrideWindow: true or false"),
        (b'{"reason": 7}', "reason: text of at most 1000 characters"),
        (b'{"reason": "' + b"x" * 1001 + b'"}', "reason: text of at most 1000"),
        (b'{"by": "a\\u001b[31mb"}', "by: no control characters"),
        (b'{"reason": "a\\u009bb"}', "reason: no control characters"),
    ],
)
def test_a_bad_control_body_is_refused_naming_the_field(body: bytes, said: str) -> None:
    with pytest.raises(Refused) as raised:
        control_request(body, "127.0.0.1")
    assert raised.value.code == 400
    assert said in raised.value.message


def test_a_control_body_is_read() -> None:
    found = control_request(b'{"by": " ann ", "reason": "why", "overrideWindow": true}', "::1")
    assert (found.by, found.reason, found.override_window, found.peer) == (
        "ann",
        "why",
        True,
        "::1",
    )
    assert control_request(b"", None).by is None
