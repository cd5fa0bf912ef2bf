"""The loop's bookkeeping, without a service: backoff doubles to its ceiling however long
the failures last, and one success resets it."""

from __future__ import annotations

from pathlib import Path

from botctl.agent.log import Log, Redactor
from botctl.agent.loop import Agent, AgentSettings
from botctl.agent.notify import Notifier
from botctl.agent.source import DirectorySource
from botctl.agent.status import AgentStatus, CycleRecord
from botctl.pipeline.workspace import Workspace
from botctl.store.lock import Lease


def test_backoff_doubles_to_the_ceiling_for_any_number_of_failures(tmp_path: Path) -> None:
    redact = Redactor({}, [], set())
    lines: list[str] = []
    log = Log("text", lines.append, redact)
    status = AgentStatus("test")
    settings = AgentSettings(backoff_base=2.0, backoff_max=300.0)
    lease = Lease(str(tmp_path / "state.json"), duration=30)
    notifier = Notifier((), frozenset(), redact, log, status.metrics)

    def unused(directory: Path) -> Workspace:
        raise AssertionError("no workspace is needed")

    agent = Agent(
        DirectorySource(tmp_path, tmp_path / "cache"),
        unused,
        settings,
        status,
        lease,
        log,
        notifier,
        redact,
    )
    seen = []
    for n in range(1, 3000):
        agent._finish(CycleRecord(n, "retry", "now", result="failed", error="down"), n - 1)
        seen.append(status.backoff)
    assert seen[:9] == [2, 4, 8, 16, 32, 64, 128, 256, 300]
    assert set(seen[8:]) == {300}
    agent._finish(CycleRecord(3000, "retry", "now", result="synced"), 2999)
    assert (status.failures, status.backoff) == (0, 0)
    assert any("recovered after 2999 failed cycle(s)" in line for line in lines)
    lease.close()
