"""State files that are not what they should be, end to end (the real CLI against the sandbox
over loopback HTTP): not UTF-8, nested without end, a FIFO, a directory, a symlink, in a
read-only directory, on a full disk. Each is a clear error and exit 1, never a traceback or a
hang, and nothing is sent that the state could not record; a symlink is written through."""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from botctl.store.backends import path as path_backend
from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml

ATTRS = "- {name: plan_tier, type: text, label: Plan tier}\n- {name: seats, type: number}"


@pytest.fixture
def bench(sandbox: Any, tmp_path: Path) -> Bench:
    b = Bench(url=sandbox.url, api_url=sandbox.api_url, workdir=tmp_path)
    b.create_bot("bot-1", settings={"name": "Old name", "model": "gpt-4o-mini"})
    b.write("support.yaml", bot_yaml(attributes=ATTRS))
    return b


DEEP_OBJECT = (
    '{"format_version": 2, "lineage": "x", "serial": 1, "bots": '
    + '{"a": ' * 5000
    + "1"
    + "}" * 5000
    + "}"
)
BAD_CONTENT = {
    "latin-1": ('{"format_version": 2, "caf\xe9": 1}'.encode("latin-1"), "not UTF-8 text"),
    "deep-array": (("[" * 100_000 + "]" * 100_000).encode(), "recursion limit exceeded"),
    "deep-object": (DEEP_OBJECT.encode(), "recursion limit exceeded"),
}


@pytest.mark.parametrize("command", ["plan", "drift", "apply"])
@pytest.mark.parametrize("content", sorted(BAD_CONTENT))
def test_unreadable_state_content_is_a_clear_error(
    bench: Bench, command: str, content: str
) -> None:
    data, message = BAD_CONTENT[content]
    bench.state_path.write_bytes(data)
    args = [command, "--auto-approve"] if command == "apply" else [command]
    result = bench.run(*args, str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert f"state file {bench.state_path}" in result.stderr
    assert message in result.stderr
    assert bench.writes() == []
    assert bench.state_path.read_bytes() == data


def run_cli(bench: Bench, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, so that a hang fails the test (timeout) instead of
    hanging the suite."""
    return launch.run(
        *args, env={"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": bench.api_url}, timeout=60
    )


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_fifo_as_state_file_is_refused_without_blocking(bench: Bench, command: str) -> None:
    os.mkfifo(bench.state_path)
    args = [command, "--state", str(bench.state_path), str(bench.config_dir)]
    if command == "apply":
        args.insert(1, "--auto-approve")
    result = run_cli(bench, *args)
    assert result.returncode == 1, result.stderr
    assert f"cannot read state file {bench.state_path}: a FIFO, not a file" in result.stderr
    assert "Traceback" not in result.stderr
    assert bench.writes() == []


def test_a_fifo_as_lock_file_is_refused_without_blocking(bench: Bench) -> None:
    os.mkfifo(bench.workdir / "state.json.lock")
    result = run_cli(
        bench, "apply", "--auto-approve", "--state", str(bench.state_path), str(bench.config_dir)
    )
    assert result.returncode == 1, result.stderr
    assert f"cannot read the lock {bench.state_path}.lock: a FIFO, not a file" in result.stderr
    assert bench.writes() == []


def test_a_directory_as_state_file_is_refused(bench: Bench) -> None:
    bench.state_path.mkdir()
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert f"cannot read state file {bench.state_path}: a directory, not a file" in result.stderr
    assert bench.writes() == []


def test_a_symlinked_state_file_is_written_through(bench: Bench) -> None:
    kept = bench.workdir / "elsewhere" / "state.json"
    kept.parent.mkdir()
    bench.state_path.symlink_to(kept)  # dangling until the first write
    first = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert first.exit_code == 0, first.output
    assert bench.state_path.is_symlink()
    assert '"plan_tier"' in kept.read_text()
    bench.clear_log()
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    assert bench.state_path.is_symlink()
    assert bench.writes() == []


@contextlib.contextmanager
def tmpfs(where: Path, options: str) -> Iterator[Path]:
    """A small tmpfs at ``where`` (root only; skipped where mounting is not allowed)."""
    where.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(where)],
        capture_output=True,
        check=False,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield where
    finally:
        subprocess.run(["umount", str(where)], check=True)


@contextlib.contextmanager
def read_only_directory(where: Path) -> Iterator[Path]:
    """A directory botctl cannot write to: a read-only tmpfs as root (whom permissions do
    not stop), a directory without write permission otherwise."""
    if os.geteuid() == 0:
        with tmpfs(where, "size=64k,ro") as mounted:
            yield mounted
        return
    where.mkdir()
    where.chmod(0o555)
    try:
        yield where
    finally:
        where.chmod(0o755)


def test_a_read_only_state_directory_is_refused_before_any_write(bench: Bench) -> None:
    with read_only_directory(bench.workdir / "ro") as directory:
        state = directory / "state.json"
        result = bench.run("apply", "--auto-approve", "--state", str(state), str(bench.config_dir))
        assert result.exit_code == 1, result.output
        assert f"cannot create the lock {state}.lock:" in result.stderr
        assert bench.writes() == []


def enospc(*args: Any, **kwargs: Any) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_mid_apply_still_prints_the_summary(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(path_backend, "write_atomically", enospc)
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert "Apply complete: 3 applied, 0 failed, 0 not attempted." in result.stdout
    assert (
        f"error: cannot write state file {bench.state_path}: No space left on device: what "
        "was applied since its last write is not recorded"
    ) in result.stderr
    assert not bench.state_path.exists()
    # The service holds what was sent: once the disk has room, a re-run creates nothing.
    monkeypatch.undo()
    bench.clear_log()
    again = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert again.exit_code == 0, again.output
    assert not [
        w for w in bench.writes() if w["method"] == "POST" and "custom-attributes" in w["path"]
    ]


def test_a_full_disk_before_anything_is_sent_refuses_the_apply(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A value the service already holds as declared is recorded before the apply starts:
    when that write fails, nothing is sent unrecorded."""
    bench.write("support.yaml", bot_yaml(settings="name: Old name\ntemp: 0.2", attributes=ATTRS))
    monkeypatch.setattr(path_backend, "write_atomically", enospc)
    result = bench.run("apply", "--auto-approve", str(bench.config_dir))
    assert result.exit_code == 1, result.output
    assert f"error: cannot write state file {bench.state_path}: No space left" in result.stderr
    assert "Apply complete" not in result.stdout
    assert bench.writes() == []


def test_a_really_full_disk_mid_apply(bench: Bench) -> None:
    """The same on a real file system with room for the lock and none for the state."""
    with tmpfs(bench.workdir / "full", "size=16k") as directory:
        filler = directory / "filler"
        with contextlib.suppress(OSError), filler.open("wb") as handle:
            handle.write(b"\0" * 12 * 1024)  # leaves one page: the lock's
        state = directory / "state.json"
        result = bench.run("apply", "--auto-approve", "--state", str(state), str(bench.config_dir))
        assert result.exit_code == 1, result.output
        assert "Apply complete: 3 applied, 0 failed, 0 not attempted." in result.stdout
        assert f"cannot write state file {state}: No space left on device" in result.stderr
        assert sorted(p.name for p in directory.iterdir()) == ["filler"]
