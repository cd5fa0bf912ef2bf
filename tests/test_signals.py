"""SIGINT and SIGTERM sent to a real `botctl apply` process at random instants of a multi-bot
apply against the sandbox over HTTP. For every instant: the exit code says which signal (or
0 when the apply had finished), the summary agrees with the sandbox's request log, every
operation the service applied is recorded in the state (none lost), the state is valid, and
the lock is released. A second signal, or the end of --drain-timeout, abandons the requests in
flight; the state stays valid and a re-run converges without creating anything twice.

uv run pytest -m slow tests/test_signals.py -s        # the slow suite: 50 instants
BOTCTL_SIGNAL_INSTANTS=200 uv run pytest tests/test_signals.py -s   # any number
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from botctl.store.state import load_state
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml
from tests.samples import sample_size

SAMPLE, SLOW_SUITE = 4, 50  # instants in the default run, and in the slow suite (-m slow)
BOTS = 5
ATTRIBUTES = 8
OPERATIONS = BOTS * (1 + ATTRIBUTES)  # one settings update and the creates, per chatbot
SETTINGS = "name: Signal Bot\ntemp: 0.3\nstyles: {theme: dark}"
ATTRS = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(ATTRIBUTES))
SUMMARY = re.compile(
    r"^Apply (?:interrupted by (SIG[A-Z]+)|complete|incomplete): (\d+) applied, (\d+) failed, "
    r"(\d+) not attempted\.$",
    re.MULTILINE,
)
EXIT = {signal.SIGINT: 130, signal.SIGTERM: 143}
PROGRESS = ("applied ", "FAILED ", "skipped ")


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str


def fresh_world(bench: Bench) -> None:
    bench.admin("POST", "/reset")
    for i in range(BOTS):
        bench.create_bot(f"bot-{i}")
    bench.clear_log()


def start_apply(bench: Bench, *extra: str) -> subprocess.Popen[str]:
    args = ["apply", "--auto-approve", "--parallelism", "2"]
    args += [*extra, "--state", str(bench.state_path), str(bench.config_dir)]
    return launch.start(
        *args,
        env={"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def signal_during_apply(
    proc: subprocess.Popen[str], signals: list[signal.Signals], delay: float
) -> Run:
    """Wait for the first operation to complete, then ``delay`` seconds, then send
    ``signals``, each after botctl said it saw the one before (two signals sent at once may
    arrive as one)."""
    assert proc.stdout is not None
    assert proc.stderr is not None
    head, errors = [], []
    for line in proc.stdout:
        head.append(line)
        if line.startswith(PROGRESS):
            break
    time.sleep(delay)
    for i, sig in enumerate(signals):
        if i:
            for line in proc.stderr:
                errors.append(line)
                if "stopping; no operation starts from now on" in line:
                    break
        proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return Run(proc.returncode, "".join(head) + stdout, "".join(errors) + stderr)


def signal_before_apply(
    proc: subprocess.Popen[str], lock: Path, sig: signal.Signals, delay: float
) -> Run:
    """Once the run holds its lock (reading, planning), ``delay`` seconds, then ``sig``."""
    while not lock.exists() and proc.poll() is None:
        time.sleep(0.002)
    time.sleep(delay)
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=120)
    return Run(proc.returncode, stdout, stderr)


def wait_until_answered(bench: Bench) -> None:
    """Until the sandbox has answered every request it received (it finishes the ones a
    client abandoned, as a service would)."""
    deadline = time.monotonic() + 60
    while any(r["status"] is None for r in bench.requests()):
        assert time.monotonic() < deadline, "the sandbox never answered"
        time.sleep(0.05)


def successful_writes(bench: Bench) -> list[dict[str, Any]]:
    return [w for w in bench.writes() if w["status"] is not None and w["status"] < 300]


def assert_recorded(bench: Bench, writes: list[dict[str, Any]]) -> None:
    """Every write the service applied is in the state, and the state holds nothing else."""
    state = load_state(bench.state_path)
    recorded = 0
    for write in writes:
        body = write["body"]
        if write["path"].endswith("/update-chatbot-settings"):
            record = state.bots[body["chatbotId"]]
            sent = {k: v for k, v in body.items() if k != "chatbotId"}
            assert record.settings.json_fields == sent, write
        else:
            chatbot_id = write["path"].split("/")[4]
            assert body["name"] in state.bots[chatbot_id].attributes, write
        recorded += 1
    in_state = sum(
        len(r.attributes) + (1 if r.settings.json_fields else 0) for r in state.bots.values()
    )
    assert in_state == recorded == len(writes)


def check_instant(bench: Bench, run: Run, sig: signal.Signals) -> str:
    """Every property of one interrupted run; returns how it ended."""
    lock = bench.state_path.with_name(bench.state_path.name + ".lock")
    assert not lock.exists(), "the lock was left behind"
    assert run.code in (0, EXIT[sig]), (run.code, run.stderr)
    if f"Interrupted by {sig.name}: nothing was applied." in run.stderr:
        assert run.code == EXIT[sig]
        assert bench.writes() == []
        assert SUMMARY.search(run.stdout) is None
        return "before applying"
    found = SUMMARY.search(run.stdout)
    assert found is not None, (run.stdout, run.stderr)
    interrupted_by, applied, failed, skipped = found.groups()
    writes = successful_writes(bench)
    # The summary agrees with the service: each applied operation is one write it answered
    # 2xx, nothing failed (no faults, and the drain outlasts every request), the rest were
    # never sent.
    assert int(applied) == len(writes) == len(bench.writes()), (run.stdout, bench.writes())
    assert int(failed) == 0, run.stdout
    assert int(applied) + int(skipped) == OPERATIONS
    assert_recorded(bench, writes)  # 0 unrecorded applied operations
    if run.code == 0:
        assert interrupted_by is None
        assert int(applied) == OPERATIONS
        return "finished first"
    assert interrupted_by == sig.name
    assert f"{sig.name}: stopping; no operation starts from now on" in run.stderr
    assert "re-running `botctl apply` does only what is left" in run.stderr
    return "mid-apply"


@pytest.fixture
def bench(sandbox_factory: Any, tmp_path: Path) -> Bench:
    server = sandbox_factory(latency_ms=30)
    b = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    for i in range(BOTS):
        b.write(f"b{i}.yaml", bot_yaml(f"b{i}", f"bot-{i}", SETTINGS, ATTRS))
    return b


def instants(config: pytest.Config) -> int:
    """BOTCTL_SIGNAL_INSTANTS, else 50 in the long run (or the slow suite alone, ``-m slow``),
    else a sample (``tests/samples.py``)."""
    slow = config.option.markexpr.strip() == "slow"
    return sample_size("BOTCTL_SIGNAL_INSTANTS", SAMPLE, SLOW_SUITE, slow_selected=slow)


@pytest.mark.slow
def test_signals_at_random_instants_of_an_apply(
    bench: Bench, capsys: pytest.CaptureFixture[str], request: pytest.FixtureRequest
) -> None:
    rng = random.Random(20240610)
    outcomes: dict[str, int] = {}
    count = instants(request.config)
    for instant in range(count):
        fresh_world(bench)
        bench.state_path.unlink(missing_ok=True)
        sig = (signal.SIGINT, signal.SIGTERM)[instant % 2]
        proc = start_apply(bench)
        if instant % 5 == 3:  # now and then, while it reads and plans
            lock = bench.state_path.with_name(bench.state_path.name + ".lock")
            run = signal_before_apply(proc, lock, sig, rng.uniform(0, 0.05))
        else:
            run = signal_during_apply(proc, [sig], rng.uniform(0, 0.9))
        ended = check_instant(bench, run, sig)
        outcomes[ended] = outcomes.get(ended, 0) + 1
        # What is left is exactly what was not applied: a re-run converges.
        rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
        assert rerun.exit_code == 0, rerun.output
        assert bench.plan_json(str(bench.config_dir))["changes"] == []
    with capsys.disabled():
        print(f"\nsignals: {count} instants: {outcomes}")
    assert sum(outcomes.values()) == count


@pytest.mark.parametrize(
    ("extra", "signals"),
    [
        ((), [signal.SIGTERM, signal.SIGTERM]),
        (("--drain-timeout", "0"), [signal.SIGINT]),
    ],
    ids=["second signal", "drain timeout"],
)
def test_work_in_flight_is_abandoned_and_the_state_stays_valid(
    sandbox_factory: Any, tmp_path: Path, extra: tuple[str, ...], signals: list[signal.Signals]
) -> None:
    server = sandbox_factory(latency_ms=300)  # long enough to be in flight when abandoned
    bench = Bench(url=server.url, api_url=server.api_url, workdir=tmp_path)
    attrs = "\n".join(ATTRS.splitlines()[:2])
    for i in range(3):
        bench.create_bot(f"bot-{i}")
        bench.write(f"b{i}.yaml", bot_yaml(f"b{i}", f"bot-{i}", SETTINGS, attrs))
    bench.clear_log()
    run = signal_during_apply(start_apply(bench, *extra), signals, 0.05)
    # The latency kept work in flight at the signal; new requests (the re-run) need none. What
    # the sandbox is answering keeps its own (it reads its configuration at each request).
    server.runtime.config.latency_ms = 0
    assert run.code == EXIT[signals[0]], run.stderr
    found = SUMMARY.search(run.stdout)
    assert found is not None, run.stdout
    _, applied, failed, skipped = map(str, found.groups())
    assert int(failed) >= 1  # abandoned in flight: each may have been applied
    assert "abandoned in flight when interrupted: the change may have been applied" in run.stdout
    assert "Abandoning the" in run.stderr
    assert int(applied) + int(failed) + int(skipped) == 3 * 3
    assert not bench.state_path.with_name("state.json.lock").exists()
    load_state(bench.state_path)  # valid
    # The service finishes what it had received: the abandoned writes are not recorded, and a
    # re-run sees them (it reads) and creates nothing twice.
    wait_until_answered(bench)
    rerun = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert rerun.exit_code == 0, rerun.output
    creates = [w for w in bench.writes() if w["path"].endswith("/custom-attributes")]
    assert all(w["status"] == 200 for w in creates), "an attribute create was repeated"
    assert bench.plan_json(str(bench.config_dir))["changes"] == []
