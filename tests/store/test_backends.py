"""One suite every state backend passes (a file, a branch of a bare git repository on disk, an
object on moto's S3 server over HTTP): compare-and-swap writes, the lock and its holder,
unlock, lineage and serial rules, and real `botctl apply` processes against the sandbox,
run two at once or killed with SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from botctl.cli import cli
from botctl.errors import LockError, StateError
from botctl.models import State
from botctl.store.backend import LockInfo, LostCompareAndSwap, StateBackend
from botctl.store.backends import open_backend
from botctl.store.lock import StateLock, break_lock, read_lock
from botctl.store.state import StateWriter, load_state, read_state, save_state
from tests import launch
from tests.e2e_support import KEY, bot_yaml
from tests.factories import operation
from tests.store.conftest import MotoServer, StateUnderTest, make_state

LOST = "lost compare-and-swap: the state changed under this run"


def doc(serial: int, lineage: str = "L1", name: str = "A") -> str:
    body = {
        "format_version": 2,
        "lineage": lineage,
        "serial": serial,
        "bots": {"bot-1": {"bot": "support", "settings": {"name": name}}},
    }
    return json.dumps(body) + "\n"


def op(name: str, chatbot_id: str = "bot-1") -> Any:
    from botctl.plan import BotRef

    return operation(
        "update_settings", "settings", {"name": name}, ref=BotRef("support", chatbot_id, "K")
    )


def until(check: Callable[[], Any], what: str, limit: float = 60.0) -> Any:
    """Poll ``check`` until it returns something truthy (a bounded wait, not a timing test)."""
    deadline = time.monotonic() + limit
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what}")
        time.sleep(0.05)


# --- compare-and-swap ---------------------------------------------------------------------


def test_empty_then_written_then_read_back(state: StateUnderTest) -> None:
    with open_backend(state.url) as backend:
        empty = backend.read()
        assert (empty.text, empty.version) == (None, None)
        v1 = backend.write(doc(1), None, "first")
        got = backend.read()
        assert (got.text, got.version) == (doc(1), v1)
        v2 = backend.write(doc(2), v1, "second")
        assert v2 != v1
        assert backend.read().text == doc(2)


def test_a_lost_compare_and_swap_is_reported_and_overwrites_nothing(
    state: StateUnderTest,
) -> None:
    with open_backend(state.url) as mine, open_backend(state.url) as theirs:
        v1 = mine.write(doc(1), None, "first")
        theirs.write(doc(2, name="theirs"), theirs.read().version, "another botctl")
        with pytest.raises(LostCompareAndSwap, match=LOST) as lost:
            mine.write(doc(2, name="mine"), v1, "stale")
        assert "nothing was overwritten" in str(lost.value)
        with pytest.raises(LostCompareAndSwap):
            mine.write(doc(1, name="mine"), None, "as if there were no state")
        assert mine.read().text == doc(2, name="theirs")


def test_writer_compares_every_write_with_its_previous_one(state: StateUnderTest) -> None:
    """Coalesced writes chain their versions; a write made by anything else in between is
    detected at the writer's next write, which changes nothing."""
    with open_backend(state.url) as backend:
        stored = read_state(backend)
        writer = StateWriter(stored.state, backend, interval=3600, version=stored.version)
        writer.record(op("one"))  # the first record writes at once
        writer.record(op("two"))  # coalesced
        writer.flush()
        assert load_state(backend).bots["bot-1"].settings.json_fields == {"name": "two"}
        assert load_state(backend).serial == 2
        with open_backend(state.url) as other:
            intruder = read_state(other)
            save_state(intruder.state, other, version=intruder.version)
        writer.record(op("three"))
        with pytest.raises(LostCompareAndSwap, match=LOST):
            writer.flush()
        after = load_state(backend)
        assert after.serial == 3
        assert after.bots["bot-1"].settings.json_fields == {"name": "two"}


def test_lineage_and_serial_rules(state: StateUnderTest) -> None:
    first = State()
    first.apply_operation(op("A"))
    save_state(first, state.url)
    loaded = load_state(state.url)
    assert loaded.serial == 1
    assert loaded.lineage
    save_state(loaded, state.url)
    again = load_state(state.url)
    assert (again.serial, again.lineage) == (2, loaded.lineage)
    # A state read before that write (serial 1) is not the stored one any more.
    stale = State(lineage=loaded.lineage, serial=1)
    with pytest.raises(LostCompareAndSwap):
        save_state(stale, state.url)
    assert (stale.serial, stale.lineage) == (1, loaded.lineage)  # untouched by the failure
    # Nor is an empty state, nor one of another lineage.
    with pytest.raises(LostCompareAndSwap):
        save_state(State(), state.url)
    with pytest.raises(LostCompareAndSwap):
        save_state(State(lineage="other", serial=2), state.url)
    assert load_state(state.url).serial == 2


def test_a_malformed_state_is_a_located_error(state: StateUnderTest) -> None:
    with open_backend(state.url) as backend:
        backend.write('{"format_version": 2, "lineage": "x", "serial": "7", "bots": {}}', None, "")
    with pytest.raises(StateError, match="serial: Input should be a valid integer"):
        load_state(state.url)


# --- the lock -----------------------------------------------------------------------------


def test_second_lock_fails_fast_naming_the_holder(state: StateUnderTest) -> None:
    with StateLock(state.url, command="apply") as held:
        assert held.info is not None
        with pytest.raises(LockError) as refused:
            StateLock(state.url).acquire()
        message = str(refused.value)
        for part in (f"pid {os.getpid()}", socket.gethostname(), "botctl apply", held.info.holder):
            assert part in message
        holder = read_lock(state.url)
        assert holder == held.info
        assert holder.since
    assert read_lock(state.url) is None


def test_a_waiting_lock_gets_it_once_released(
    state: StateUnderTest, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first lock is released only once the second has been refused (it is waiting),
    and ``releasing`` is set before the release begins: the second can get the lock only
    after that, whatever the scheduling."""
    first = StateLock(state.url)
    first.acquire()
    refused = threading.Event()
    releasing = threading.Event()

    def release_once_waited_on() -> None:
        refused.wait(60)  # a bound, not a timing: the assertion below says if it ran out
        releasing.set()
        first.release()

    with open_backend(state.url) as backend:
        create_lock = backend.create_lock

        def create_noting_refusals(info: LockInfo) -> bool:
            created = create_lock(info)
            if not created:
                refused.set()
            return created

        monkeypatch.setattr(backend, "create_lock", create_noting_refusals)
        releaser = threading.Thread(target=release_once_waited_on, daemon=True)
        releaser.start()
        with StateLock(backend, timeout=120) as second:
            assert refused.is_set(), "the second lock never waited"
            assert releasing.is_set()
            assert read_lock(state.url) == second.info
        releaser.join(60)
    assert read_lock(state.url) is None


def test_release_leaves_a_lock_taken_after_a_forced_unlock(state: StateUnderTest) -> None:
    first = StateLock(state.url)
    first.acquire()
    assert break_lock(state.url, force=True).holder == first.info
    with StateLock(state.url) as second:
        first.release()
        assert read_lock(state.url) == second.info


HOLD_THE_LOCK = """
import sys, time
from botctl.store.lock import StateLock
StateLock(sys.argv[1], command="apply").acquire()
print("held", flush=True)
time.sleep(600)
"""


def test_unlock_refuses_while_the_holder_runs_on_this_host(state: StateUnderTest) -> None:
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_THE_LOCK, state.url],
        env={**os.environ, **state.env},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held\n"
        refused = run(state, "unlock")
        assert refused.exit_code == 1
        assert "is still running on this host" in refused.stderr
        assert f"pid {holder.pid} on {socket.gethostname()}" in refused.stderr
        assert read_lock(state.url) is not None
        forced = run(state, "unlock", "--force")
        assert forced.exit_code == 0, forced.output
        assert f"Removed the lock of pid {holder.pid}" in forced.stdout
        assert read_lock(state.url) is None
    finally:
        holder.kill()
        holder.wait()


def test_unlock_of_another_hosts_lock_needs_force(state: StateUnderTest) -> None:
    info = LockInfo(
        pid=4242,
        host="ci-runner-7",
        since="2026-01-01T00:00:00+00:00",
        command="botctl apply",
        holder="h-1",
    )
    with open_backend(state.url) as backend:
        assert backend.create_lock(info)
    refused = run(state, "unlock")
    assert refused.exit_code == 1
    assert "without --force" in refused.stderr
    assert "pid 4242 on ci-runner-7" in refused.stderr
    assert read_lock(state.url) == info
    forced = run(state, "unlock", "--force")
    assert forced.exit_code == 0
    assert read_lock(state.url) is None
    assert "is not locked" in run(state, "unlock").stdout


def dead_process_lock(state: StateUnderTest) -> LockInfo:
    """The lock of a run of this host that was killed: its pid no longer runs."""
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    info = LockInfo(
        pid=gone.pid, host=socket.gethostname(), since="then", command="botctl apply", holder="x"
    )
    with open_backend(state.url) as backend:
        assert backend.create_lock(info)
    return info


def test_a_lock_whose_holder_no_longer_runs_on_this_host_is_taken_over(
    state: StateUnderTest,
) -> None:
    dead = dead_process_lock(state)
    lock = StateLock(state.url)
    lock.acquire()
    try:
        assert read_lock(state.url) == lock.info
        assert lock.took_over is not None
        assert "its holder no longer runs" in lock.took_over
        assert f"pid {dead.pid} on {socket.gethostname()}" in lock.took_over
    finally:
        lock.release()
    assert read_lock(state.url) is None


def test_unlock_removes_the_lock_of_a_dead_process(state: StateUnderTest) -> None:
    dead_process_lock(state)
    done = run(state, "unlock")
    assert done.exit_code == 0
    assert "that process no longer exists" in done.stdout
    assert read_lock(state.url) is None


# --- the CLI: state show | pull | push | migrate ------------------------------------------


def run(state: StateUnderTest, *args: str, env: dict[str, str] | None = None) -> Result:
    """botctl in-process with ``--state`` of ``state`` (after the subcommand's name)."""
    argv = list(args)
    at = 2 if argv[0] == "state" else 1
    argv[at:at] = ["--state", state.url]
    full = {"BOTCTL_API_KEY": KEY, "NO_COLOR": "1", **state.env, **(env or {})}
    return CliRunner().invoke(cli, argv, env=full, catch_exceptions=False)


def test_state_show_pull_push(state: StateUnderTest, tmp_path: Path) -> None:
    shown = run(state, "state", "show")
    assert shown.exit_code == 0
    assert "no state yet" in shown.stdout
    assert run(state, "state", "pull").exit_code == 1

    upload = tmp_path / "up.json"
    upload.write_text(doc(5))
    pushed = run(state, "state", "push", str(upload))
    assert pushed.exit_code == 0, pushed.output
    summary = json.loads(run(state, "state", "show", "--format", "json").stdout)
    assert (summary["lineage"], summary["serial"], summary["lock"]) == ("L1", 5, None)
    assert summary["chatbots"] == [{"chatbotId": "bot-1", "bot": "support"}]
    text = run(state, "state", "show").stdout
    assert "serial:   5" in text
    assert "support (bot-1)" in text
    assert "lock:     none" in text
    assert json.loads(run(state, "state", "pull").stdout)["serial"] == 5

    for content, why in [
        (doc(9, lineage="L2"), "another history"),
        (doc(4), "older one"),
        (doc(5, name="B"), "same serial"),
    ]:
        upload.write_text(content)
        refused = run(state, "state", "push", str(upload))
        assert refused.exit_code == 1
        assert why in refused.stderr
        assert load_state(state.url).serial == 5
    upload.write_text(doc(4, name="forced"))
    forced = run(state, "state", "push", str(upload), "--force")
    assert forced.exit_code == 0, forced.output
    after = load_state(state.url)
    # Forced, an older state is written with the next serial: it never goes backwards.
    assert (after.serial, after.bots["bot-1"].settings.json_fields) == (6, {"name": "forced"})


def test_state_push_waits_for_or_refuses_the_lock(state: StateUnderTest, tmp_path: Path) -> None:
    upload = tmp_path / "up.json"
    upload.write_text(doc(1))
    with StateLock(state.url):
        refused = run(state, "state", "push", str(upload))
        assert refused.exit_code == 1
        assert "is locked by" in refused.stderr
    assert load_state(state.url).lineage is None


@pytest.mark.parametrize("target_kind", ["path", "git", "s3"])
def test_state_migrate_to_every_backend(
    state: StateUnderTest,
    target_kind: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    moto: MotoServer | None = (
        request.getfixturevalue("moto_server") if target_kind == "s3" else None
    )
    target = make_state(target_kind, tmp_path, moto, name="target")
    for key, value in target.env.items():
        monkeypatch.setenv(key, value)
    with open_backend(state.url) as backend:
        backend.write(doc(3), None, "seed")
    env = {**target.env}
    moved = run(state, "state", "migrate", "--to", target.url, env=env)
    assert moved.exit_code == 0, moved.output
    assert f"--state '{target.url}'" in moved.stdout
    copied = load_state(target.url)
    assert (copied.lineage, copied.serial) == ("L1", 3)
    assert load_state(state.url).serial == 3  # the original is left as it was
    assert read_lock(state.url) is None
    again = run(state, "state", "migrate", "--to", target.url, env=env)
    assert "already holds this state" in again.stdout
    with open_backend(target.url) as other:
        other.write(doc(1, lineage="L9"), other.read().version, "another history")
    refused = run(state, "state", "migrate", "--to", target.url, env=env)
    assert refused.exit_code == 1
    assert "another history" in refused.stderr


# --- real applies against the sandbox -----------------------------------------------------

ATTRS = "\n".join(f"- {{name: a{i}, type: text, label: A{i}}}" for i in range(4))


def sandbox_config(bench_dir: Path, server: Any, bots: int = 3) -> Path:
    import httpx

    config = bench_dir / "config"
    config.mkdir(parents=True, exist_ok=True)
    for i in range(bots):
        body = {"id": f"bot-{i}", "account": KEY}
        httpx.post(f"{server.url}/_sandbox/chatbots", json=body, timeout=10).raise_for_status()
        (config / f"b{i}.yaml").write_text(bot_yaml(f"b{i}", f"bot-{i}", attributes=ATTRS))
    return config


def spawn_apply(state: StateUnderTest, server: Any, config: Path, *extra: str) -> Any:
    env = {
        **state.env,
        "BOTCTL_API_KEY": KEY,
        "BOTCTL_API_URL": server.api_url,
        "BOTCTL_STATE": state.url,
    }
    return launch.start(
        *["apply", "--auto-approve", "--parallelism", "1", *extra, str(config)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def answered_all(server: Any) -> bool:
    """Whether the sandbox has answered every request it received (it finishes the ones a
    client abandoned, as a service would)."""
    import httpx

    log = httpx.get(f"{server.url}/_sandbox/requests", timeout=10).json()["requests"]
    return all(r["status"] is not None for r in log)


def quick(server: Any) -> None:
    """No more added latency: the sandbox reads its configuration at each request."""
    server.runtime.config.latency_ms = 0


def polling_for_lock(pid: int) -> bool:
    """Whether process ``pid`` sleeps between two tries of the state lock: botctl's only
    blocking sleep (``store.lock``), which Linux names in ``wchan``."""
    try:
        return "nanosleep" in Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return False


def held_by(backend: StateBackend, pid: int) -> LockInfo | None:
    holder = backend.read_lock()
    return holder if holder is not None and holder.pid == pid else None


def test_two_concurrent_applies_one_is_refused_one_waits(
    state: StateUnderTest, sandbox_factory: Any, tmp_path: Path
) -> None:
    server = sandbox_factory(latency_ms=150)
    config = sandbox_config(tmp_path, server)
    first = spawn_apply(state, server, config)
    with open_backend(state.url) as backend:
        until(lambda: held_by(backend, first.pid), "the first apply's lock")
        refused = run(
            state, "apply", "--auto-approve", str(config), env={"BOTCTL_API_URL": server.api_url}
        )
        waiting = spawn_apply(state, server, config, "--lock-timeout", "300")
        # The latency keeps the first in its lock until the second waits for it; then the
        # first may finish at once.
        until(
            lambda: first.poll() is not None or polling_for_lock(waiting.pid),
            "the second apply waiting for the lock",
        )
        quick(server)
        _, errors = first.communicate(timeout=300)
        assert first.returncode == 0, errors
        assert "no state at" in errors  # it started without any state
        waited_out, waited_err = waiting.communicate(timeout=300)
    assert refused.exit_code == 1
    assert f"is locked by pid {first.pid}" in refused.stderr
    assert waiting.returncode == 0, waited_err
    # It waited for the first to finish, then found everything done.
    assert "No changes. The service matches the configuration." in waited_out
    final = load_state(state.url)
    assert final.lineage is not None
    assert all(len(final.bots[f"bot-{i}"].attributes) == 4 for i in range(3))
    assert read_lock(state.url) is None


def test_a_killed_apply_leaves_valid_state_and_its_lock_which_the_next_run_takes_over(
    state: StateUnderTest, sandbox_factory: Any, tmp_path: Path
) -> None:
    server = sandbox_factory(latency_ms=150)
    config = sandbox_config(tmp_path, server)
    victim = spawn_apply(state, server, config)
    with open_backend(state.url) as backend:
        until(lambda: held_by(backend, victim.pid), "the apply's lock")
        until(lambda: backend.read().text, "the apply's first state write")
    victim.send_signal(signal.SIGKILL)
    victim.wait(timeout=30)
    # The latency kept the victim mid-apply until the kill. A request it sent may still be on
    # its way through the sandbox: once the sandbox has answered it, none is needed.
    until(lambda: answered_all(server), "the sandbox answering the dead apply's requests")
    quick(server)

    left = load_state(state.url)  # valid: never half-written
    assert left.lineage is not None
    holder = read_lock(state.url)
    assert holder is not None
    assert (holder.pid, holder.command) == (victim.pid, "botctl apply")
    env = {"BOTCTL_API_URL": server.api_url}
    # The next run takes the dead run's lock over (its holder no longer runs on this host),
    # and says so.
    rerun = run(state, "apply", "--auto-approve", str(config), env=env)
    assert rerun.exit_code == 0, rerun.output
    assert f"its holder no longer runs (pid {victim.pid} on" in rerun.output
    final = load_state(state.url)
    assert (final.lineage, final.serial > left.serial) == (left.lineage, True)
    settled = run(state, "plan", "--detailed-exitcode", str(config), env=env)
    assert settled.exit_code == 0, settled.output  # converged: nothing left to do
    assert read_lock(state.url) is None


def test_plan_and_apply_say_when_they_start_fresh(
    state: StateUnderTest, sandbox_factory: Any, tmp_path: Path
) -> None:
    server = sandbox_factory()
    config = sandbox_config(tmp_path, server, bots=1)
    env = {"BOTCTL_API_URL": server.api_url}
    planned = run(state, "plan", str(config), env=env)
    assert planned.exit_code == 0, planned.output
    assert f"no state at {state.url}: starting fresh" in planned.stderr
    applied = run(state, "apply", "--auto-approve", str(config), env=env)
    assert applied.exit_code == 0, applied.output
    assert "starting fresh" in applied.stderr
    again = run(state, "plan", str(config), env=env)
    assert "starting fresh" not in again.stderr


def test_an_apply_whose_lock_was_broken_loses_its_next_write(
    state: StateUnderTest, sandbox_factory: Any, tmp_path: Path
) -> None:
    """The failure this issue saw: `unlock` of a live apply, then another writer. The apply's
    next write loses the compare-and-swap, says so, stops, and overwrites nothing."""
    server = sandbox_factory(latency_ms=200)
    config = sandbox_config(tmp_path, server)
    victim = spawn_apply(state, server, config)
    with open_backend(state.url) as backend:
        until(lambda: held_by(backend, victim.pid), "the apply's lock")
        until(lambda: backend.read().text, "the apply's first state write")
    assert run(state, "unlock", "--force").exit_code == 0
    upload = tmp_path / "intruder.json"
    upload.write_text(doc(1, lineage="intruder"))
    pushed = run(state, "state", "push", "--force", str(upload))
    assert pushed.exit_code == 0, pushed.output
    quick(server)  # the intruder is in: the victim may reach its next write at once
    _, errors = victim.communicate(timeout=300)
    assert victim.returncode == 1
    assert LOST in errors
    assert "nothing was overwritten" in errors
    assert "Traceback" not in errors
    after = load_state(state.url)
    assert (after.lineage, after.serial) == ("intruder", 1)
    assert read_lock(state.url) is None  # the victim removed no lock but its own


def test_a_writer_stopped_while_it_holds_the_directory_lock_holds_no_one_forever(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A botctl process stopped (SIGSTOP) inside a compare-and-swap write keeps the state
    directory's flock: another writer (a standby's takeover, a renewal) fails after a bounded
    wait, writing nothing, where it waited for ever; once the holder goes, writes go on."""
    from botctl.store.backends import path as path_backend

    state_path = tmp_path / "state.json"
    backend = open_backend(state_path)
    version = backend.write(doc(1), None, "first")
    holder = subprocess.Popen(
        [
            sys.executable, "-c",
            "import fcntl, os, signal, sys\n"
            "fd = os.open(sys.argv[1], os.O_RDONLY)\n"
            "fcntl.flock(fd, fcntl.LOCK_EX)\n"
            "os.kill(os.getpid(), signal.SIGSTOP)\n",
            str(tmp_path),
        ]
    )  # fmt: skip
    try:
        until(lambda: _stopped(holder.pid), "the holder to stop holding the flock")
        monkeypatch.setattr(path_backend, "FLOCK_WAIT", 0.3, raising=False)
        outcome: list[BaseException | Any] = []
        writer = threading.Thread(
            target=lambda: outcome.append(_attempt(lambda: backend.write(doc(2), version, "m")))
        )
        writer.start()
        writer.join(timeout=30)
        assert not writer.is_alive(), "the write still waits on the stopped holder's flock"
        [error] = outcome
        assert isinstance(error, StateError)
        assert "held its directory's lock" in str(error)
        assert json.loads(state_path.read_text())["serial"] == 1
    finally:
        holder.kill()
        holder.wait()
    assert backend.write(doc(2), version, "m")


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] == "T"


def _attempt(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except BaseException as exc:  # the outcome is the test's to judge
        return exc
