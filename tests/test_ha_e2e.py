"""A holder paused past its lease sends nothing once it resumes (issue 24, finding 1): two
agents on one state and a slow service; the active one is stopped (SIGSTOP) in the middle of
an apply, right after its first write reached the service; the standby takes over and applies
the next revision; the paused one is resumed (SIGCONT). Every request it would still have sent
is refused by its fence: the service and the state end at the newer revision."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from botctl.store.lock import read_lock
from tests.agent.support import last_cycle
from tests.e2e_support import Bench
from tests.ha_support import (
    agents_running,
    holder_and_standby,
    quiet,
    service_revisions,
    settings_writes,
    stale_writes,
    state_revisions,
    until,
    write_revision,
)

BOTS = 4
LATENCY_MS = 400  # each request: the apply of one revision takes seconds
FLAGS = ("--interval", "0.3s", "--lease", "3s", "--parallelism", "1")


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(latency_ms=LATENCY_MS)
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for n in range(BOTS):
        bench.create_bot(f"bot-{n}")
    return bench


REFUSED = {
    "method": "POST",
    "path": "*/update-chatbot-settings",
    "status": 503,
    "retry_after": 10,  # retried 10 s later: the pause lands in the wait
}


@pytest.mark.parametrize("instant", ["in flight", "before its retry"])
def test_a_holder_paused_mid_apply_past_its_lease_sends_nothing_when_resumed(
    bench: Bench, instant: str
) -> None:
    """Paused while its first v4 write is in flight (the answer takes 400 ms, the next write
    is sent only after it), or while that write, refused (503, Retry-After), waits for its
    retry. Either way, resumed once the standby applied v5, it sends nothing more."""
    write_revision(bench, BOTS, 3)
    with agents_running() as started:
        first, second = holder_and_standby(bench, started, *FLAGS)
        if instant == "before its retry":
            bench.admin("POST", "/faults", REFUSED)
        write_revision(bench, BOTS, 4)
        wanted = None if instant == "in flight" else 503
        until(
            lambda: [w for w in settings_writes(bench) if (w.revision, w.status) == (4, wanted)],
            f"a v4 write {instant}",
        )
        first.proc.send_signal(signal.SIGSTOP)
        # Where the pause landed: one v4 write sent (unanswered, or refused and not retried
        # yet), the other chatbots' not yet.
        sent_before = [w for w in settings_writes(bench) if w.revision == 4]
        assert [w.status for w in sent_before] == [wanted], sent_before

        write_revision(bench, BOTS, 5)
        second.wait_for(
            lambda d: d["role"] == "active" and last_cycle(d) == "applied", 60, "v5 applied"
        )
        assert service_revisions(bench, BOTS) == {f"bot-{n}": "v5" for n in range(BOTS)}
        first.proc.send_signal(signal.SIGCONT)
        first.wait_for(lambda d: d["role"] == "standby", 60, "the resumed one standing by")
        writes = settings_writes(bench)
        quiet(bench)

    # Nothing more of v4 reached the service: only the write sent before the pause.
    assert [w.seq for w in writes if w.revision == 4] == [w.seq for w in sent_before], (
        first.log_text()
    )
    assert stale_writes(writes) == []
    assert service_revisions(bench, BOTS) == {f"bot-{n}": "v5" for n in range(BOTS)}
    assert state_revisions(bench, BOTS) == {f"bot-{n}": "v5" for n in range(BOTS)}
    # It said why: a request refused by its fence, or its state write by the lease.
    messages = [e.get("message", "") for e in first.log()]
    lost = [m for m in messages if "not sent: " in m or "no longer holds the lease" in m]
    assert lost, first.log_text()
    assert not any("no such file" in m for m in messages), first.log_text()


def test_the_standby_logs_the_holder_once_and_takes_over_as_its_lease_lapses(
    bench: Bench,
) -> None:
    """With an interval of an hour, a standby that tried only every interval would never take
    over here: it tries again as the holder's lease would lapse (the holder is paused). It
    logs who holds the lease, and until when, once per holder, however often it renews."""
    write_revision(bench, BOTS, 1)
    with agents_running() as started:
        first, second = holder_and_standby(bench, started, "--interval", "1h", "--lease", "3s")
        renewals: set[object] = set()

        def renewed_thrice() -> bool:
            renewals.add(read_lock(bench.state_path))
            return len(renewals) >= 4

        until(renewed_thrice, "three renewals of the first's lease")
        # Paused, not killed: a dead holder of this host would be taken over at once.
        first.proc.send_signal(signal.SIGSTOP)
        doc = second.wait_for(
            lambda d: last_cycle(d) not in (None, "standby"), 60, "the takeover's first cycle"
        )
    lines = [e["message"] for e in second.log() if e.get("event") == "lease"]
    assert len(lines) == 2, lines
    standing, holding = lines
    assert f"held by botctl agent pid {first.proc.pid} on " in standing
    assert "lease until " in standing
    assert "holding the state's lease: reconciling" in holding
    assert f"taken over: its lease lapsed (pid {first.proc.pid} on" in holding
    assert doc["role"] == "active"
    assert last_cycle(doc) == "synced", doc  # what the first applied, it found applied
