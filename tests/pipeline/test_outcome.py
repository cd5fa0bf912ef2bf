"""The reconciler's typed outcomes: each reason's conditions and whether a retry could help;
which errors are terminal."""

from __future__ import annotations

import pytest

from botctl.errors import (
    ConfigError,
    ImpossibleChangeError,
    LockError,
    SafetyCapError,
    ServiceError,
    StateWriteError,
)
from botctl.models import Live, LiveBot
from botctl.pipeline.outcome import REASONS, Outcome, terminal
from botctl.plan import Plan
from botctl.reconcile.apply import ApplyReport


@pytest.mark.parametrize(
    ("reason", "ready", "requeue"),
    [
        ("Applied", "True", False),
        ("NothingToDo", "True", False),
        ("Declined", "False", False),
        ("Held", "False", False),
        ("Interrupted", "False", True),
        ("OperationsFailed", "False", True),
        ("StateNotWritten", "False", True),
    ],
)
def test_each_reason_says_ready_and_whether_to_try_again(
    reason: str, ready: str, requeue: bool
) -> None:
    outcome = Outcome(reason, Plan(), held="a deny window" if reason == "Held" else None)  # type: ignore[arg-type]
    conditions = {c.type: c for c in outcome.conditions()}
    assert (conditions["Ready"].status, conditions["Ready"].reason) == (ready, reason)
    assert outcome.requeue is requeue
    assert outcome.applied is (ready == "True")
    assert set(REASONS) >= {reason}


def test_verified_says_what_the_read_back_found() -> None:
    read = Live(bots={"bot-1": LiveBot(chatbot_id="bot-1")})
    none = Outcome("Applied", Plan(), ApplyReport(()))
    assert none.conditions()[1].status == "Unknown"
    kept = Outcome("Applied", Plan(), read_back=read)
    assert kept.conditions()[1].to_document()["reason"] == "ReadBackAsSent"
    lost = Outcome("Applied", Plan(), read_back=read, not_taken=("temp: sent 0.2, read 0.3",))
    assert (lost.conditions()[1].status, lost.conditions()[1].message) == (
        "False",
        "temp: sent 0.2, read 0.3",
    )
    failed = Outcome("StateNotWritten", Plan(), state_error=StateWriteError("disk full"))
    assert "disk full" in failed.conditions()[0].message


def test_observed_is_the_read_with_the_chatbots_written_as_read_back() -> None:
    before = Live(
        bots={"a": LiveBot(chatbot_id="a"), "b": LiveBot(chatbot_id="b")},
        listed={"KEY": {"a": "A", "b": "B"}},
    )
    after = Live(bots={"b": LiveBot(chatbot_id="b", exists=False)})
    observed = Outcome("Applied", Plan(), live=before, read_back=after).observed()
    assert observed is not None
    assert observed.bots["a"] is before.bots["a"]
    assert observed.bots["b"] is after.bots["b"]
    assert observed.listed == before.listed


def test_terminal_errors_are_those_a_retry_cannot_change() -> None:
    assert terminal(ConfigError([]))
    assert terminal(SafetyCapError("too many archives"))
    assert terminal(ImpossibleChangeError("type change"))
    assert not terminal(ServiceError("read chatbot list", "503"))
    assert not terminal(LockError("held"))
    assert not terminal(StateWriteError("disk full"))
