"""``tests.launch.run_measured`` measures the child's own peak memory, whatever the test
process that starts it once held (Linux keeps ``ru_maxrss`` across ``execve``: a child
forked straight from a fat test worker would report the worker's peak)."""

from __future__ import annotations

import signal
from pathlib import Path

from tests.launch import GIB, run_measured

FAT = 400  # MiB this test process holds while it starts the child


def test_the_peak_is_the_childs_own_not_the_test_process_that_started_it(tmp_path: Path) -> None:
    ballast = bytearray(FAT << 20)
    for page in range(0, len(ballast), 4096):  # touched: resident, not just reserved
        ballast[page] = 1
    try:
        run = run_measured(["--version"], env={}, cwd=tmp_path)
    finally:
        del ballast
    assert run.code == 0, run.output
    assert 10 < run.max_rss_mb < FAT / 2, run.max_rss_mb  # the interpreter and botctl's CLI


def test_an_exit_code_and_the_address_space_limit_come_through(tmp_path: Path) -> None:
    bad = run_measured(["validate", str(tmp_path / "absent")], env={}, cwd=tmp_path)
    assert bad.code != 0
    assert "absent" in bad.output
    starved = run_measured(["--version"], env={}, cwd=tmp_path, address_space=GIB // 64)
    assert starved.code != 0  # 16 MiB of address space: the interpreter cannot start


def test_a_child_killed_by_a_signal_is_reported_as_killed(tmp_path: Path) -> None:
    (tmp_path / "killed.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    run = run_measured([], env={}, cwd=tmp_path, module="killed")  # python -m killed, in cwd
    assert run.code == -signal.SIGKILL, run.output
