"""The state lock as a lease, on every backend (path, git, S3 on moto's server): one holder;
a lapsed lease is taken over; a holder that lost its lease cannot renew it or write (its
compare-and-swap fails); renewals keep a git branch's history short; a plain apply takes
over a lapsed lease but never a live one."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from botctl.errors import LockError
from botctl.plan import BotRef
from botctl.store import lock as lock_module
from botctl.store.backend import LeaseLost, LockInfo
from botctl.store.backends import open_backend
from botctl.store.lock import Lease, LeasedBackend, StateLock, read_lock
from botctl.store.state import StateWriter, read_state
from tests.store.conftest import StateUnderTest

LEASE = 2.0  # renewed every 0.67 s: a git commit on a loaded machine fits well within it


def lapse(lease: Lease) -> None:
    """The holder stops renewing (as if paused or killed), and its lease runs out."""
    lease._stop.set()
    if lease._thread is not None:
        lease._thread.join()  # a renewal in progress finishes first
    assert lease.info is not None
    assert lease.info.expires is not None
    time.sleep(max(0.0, lease.info.expires - time.time()) + 0.05)


def test_one_holder_takeover_after_lapse_and_the_old_holder_cannot_write(
    state: StateUnderTest,
) -> None:
    first, second = Lease(state.url, duration=LEASE), Lease(state.url, duration=LEASE)
    try:
        assert first.try_acquire()
        assert not second.try_acquire()  # held and renewed
        time.sleep(LEASE * 1.2)
        assert not second.try_acquire()  # the heartbeat kept it
        holder = read_lock(state.url)
        assert holder is not None
        assert holder.same_holder(first.info)
        assert holder.expires is not None

        # The first writes through its lease.
        with open_backend(state.url) as inner:
            backend = LeasedBackend(inner, first)
            snapshot = read_state(backend)
            version = backend.write('{"serial": 1}\n', snapshot.version, "first write")
        lapse(first)
        assert second.try_acquire()  # taken over once lapsed
        # The old holder's renewal finds another lock; its writes are refused, even through
        # a backend that does not know it lapsed.
        assert not first.renew()
        assert first.lost == "another holder took the lease over"
        stale = LockInfo.from_text(holder.to_text())
        with open_backend(state.url) as inner:
            with pytest.raises(LeaseLost):
                inner.write_fenced('{"serial": 2}\n', version, "stale", stale)
            with pytest.raises(LeaseLost):
                LeasedBackend(inner, first).write('{"serial": 2}\n', version, "stale")
            assert inner.read().text == '{"serial": 1}\n'
            # The new holder writes.
            LeasedBackend(inner, second).write('{"serial": 3}\n', inner.read().version, "new")
            assert inner.read().text == '{"serial": 3}\n'
    finally:
        second.close()
        first.close()
    assert read_lock(state.url) is None  # released


def test_the_state_writer_writes_under_a_lease_across_renewals(state: StateUnderTest) -> None:
    # Renewed every 0.5 s, so each pause below holds one renewal; lapsed only if a renewal
    # (a git commit) is late by a whole second, which a loaded CI machine does not reach.
    lease = Lease(state.url, duration=1.5)
    try:
        assert lease.try_acquire()
        with open_backend(state.url) as inner:
            backend = LeasedBackend(inner, lease)
            stored = read_state(backend)
            writer = StateWriter(stored.state, backend, version=stored.version, interval=0)
            bot = BotRef("support", "bot-1", "BOTCTL_API_KEY")
            for temp in (0.2, 0.3):
                if writer.state.record_verified(bot, {"settings": {"temp": temp}}):
                    writer.touched("bot-1", f"temp {temp}")
                writer.flush()
                writer.raise_if_failed()
                time.sleep(0.6)  # renewals meanwhile (a git backend: commits on the branch)
        assert read_state(state.url).state.bots["bot-1"].settings.json_fields["temp"] == 0.3
    finally:
        lease.close()


def test_a_plain_lock_takes_over_a_lapsed_lease_never_a_live_one(state: StateUnderTest) -> None:
    lease = Lease(state.url, duration=LEASE)
    try:
        assert lease.try_acquire()
        with pytest.raises(LockError, match="lease until"):
            StateLock(state.url, command="apply").acquire()
        lapse(lease)
        lock = StateLock(state.url, command="apply")
        lock.acquire()
        assert not lease.renew()
        lock.release()
    finally:
        lease.close()


def test_git_renewals_add_one_commit_between_state_writes(tmp_path: object) -> None:
    from pathlib import Path

    repo = Path(str(tmp_path)) / "state.git"
    subprocess.run(["git", "init", "--quiet", "--bare", str(repo)], check=True)
    url = f"git+file://{repo}#botctl-state:state.json"
    lease = Lease(url, duration=60)
    try:
        assert lease.try_acquire()
        for _ in range(5):
            assert lease.renew()

        def commits() -> int:
            out = subprocess.run(
                ["git", f"--git-dir={repo}", "rev-list", "--count", "botctl-state"],
                capture_output=True,
                text=True,
                check=True,
            )
            return int(out.stdout)

        assert commits() == 2  # the lock taken, and one renewal (amended each time)
    finally:
        lease.close()


class Clocks:
    """The lease's two clocks, moved by hand: its steady clock and the wall clock."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.steady = 1000.0
        self.wall = time.time()
        monkeypatch.setattr(lock_module, "steady_clock", lambda: self.steady)
        # One time module: LockInfo's expiries (store.backend) and the lease's checks alike.
        monkeypatch.setattr(time, "time", lambda: self.wall)

    def advance(self, seconds: float, *, wall: float | None = None) -> None:
        self.steady += seconds
        self.wall += seconds if wall is None else wall


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Clocks:
    return Clocks(monkeypatch)


def held_lease(tmp_path: Path, duration: float = 30.0) -> Lease:
    lease = Lease(str(tmp_path / "state.json"), duration=duration)
    lease._stop.set()  # no heartbeat: the test moves time itself
    assert lease.try_acquire()
    return lease


def test_the_fence_refuses_once_less_than_its_margin_is_left(
    tmp_path: Path, clocks: Clocks
) -> None:
    lease = held_lease(tmp_path)
    try:
        assert lease.margin == 10.0  # a third of the lease
        lease.fence()
        clocks.advance(19.9)  # 10.1 s left
        lease.fence()
        clocks.advance(0.2)  # 9.9 s left: a request might reach the service past the lease
        with pytest.raises(LeaseLost, match=r"has 9\.9 s left, and a request needs 10 s"):
            lease.fence()
        assert lease.renew()  # renewed: a whole lease again
        lease.fence()
        clocks.advance(45)  # paused past it
        with pytest.raises(LeaseLost, match=r"lapsed 15\.0 s ago"):
            lease.fence()
    finally:
        lease.close()


def test_the_fence_trusts_neither_clock_alone(tmp_path: Path, clocks: Clocks) -> None:
    lease = held_lease(tmp_path)
    try:
        # The wall clock stepped back 60 s (NTP, a person): the steady clock still ends it.
        clocks.advance(25, wall=-60)
        with pytest.raises(LeaseLost, match=r"has 5\.0 s left"):
            lease.fence()
        assert lease.renew()
        # The wall clock stepped forward: standbys judge by wall clocks, so it ends early.
        clocks.advance(1, wall=26)
        with pytest.raises(LeaseLost, match=r"has 4\.0 s left"):
            lease.fence()
    finally:
        lease.close()


def test_the_fence_of_a_lease_taken_over_names_why(tmp_path: Path, clocks: Clocks) -> None:
    lease = held_lease(tmp_path, duration=3)
    other = Lease(str(tmp_path / "state.json"), duration=3)
    try:
        clocks.advance(4)
        assert other.try_acquire()
        assert other.took_over is not None
        assert "its lease lapsed" in other.took_over
        assert not lease.renew()
        with pytest.raises(LeaseLost, match="another holder took the lease over"):
            lease.fence()
        other.fence()
    finally:
        other.close()
        lease.close()
