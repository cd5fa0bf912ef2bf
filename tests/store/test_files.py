"""botctl's own files (botctl.store.files): read only when a regular UTF-8 file, never blocking
on a FIFO; written atomically through symlinks; export's files created all or none."""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from botctl.errors import StateError
from botctl.store.files import read_text_if_any, write_atomically, write_new_files


def read_text(path: Path) -> str | None:
    return read_text_if_any(path, "state file", StateError)


def test_read_text_of_a_missing_file_is_none(tmp_path: Path) -> None:
    assert read_text(tmp_path / "none.json") is None
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    assert read_text(tmp_path / "dangling") is None


def test_read_text_follows_symlinks(tmp_path: Path) -> None:
    (tmp_path / "real.json").write_text("{}")
    (tmp_path / "link.json").symlink_to("real.json")
    assert read_text(tmp_path / "link.json") == "{}"


@pytest.mark.parametrize(
    ("make", "reason"),
    [
        (lambda p: p.mkdir(), "a directory, not a file"),
        (lambda p: os.mkfifo(p), "a FIFO, not a file"),
        (lambda p: p.write_bytes(b'{"a": "caf\xe9"}'), "not UTF-8 text (byte 10)"),
    ],
    ids=["directory", "fifo", "latin-1"],
)
def test_read_text_refuses_what_is_not_a_text_file(
    tmp_path: Path, make: Callable[[Path], object], reason: str
) -> None:
    path = tmp_path / "state.json"
    make(path)
    result: list[object] = []
    # In a thread: before the fix, reading a FIFO blocked until a writer came.
    reader = threading.Thread(target=lambda: result.append(_attempt(path)), daemon=True)
    reader.start()
    reader.join(timeout=30)
    assert result, "read_text blocked"
    assert isinstance(result[0], StateError)
    assert str(result[0]) in (
        f"cannot read state file {path}: {reason}",
        f"state file {path} is {reason}",
    )


def _attempt(path: Path) -> object:
    try:
        return read_text(path)
    except StateError as exc:
        return exc


def test_write_atomically_writes_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    target = tmp_path / "elsewhere" / "state.json"
    target.write_text("old")
    link = tmp_path / "state.json"
    link.symlink_to(target)
    write_atomically(link, "new")
    assert link.is_symlink()
    assert target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "elsewhere").iterdir()) == ["state.json"]


def test_write_atomically_through_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "state.json"
    link.symlink_to(tmp_path / "kept" / "state.json")
    write_atomically(link, "new")
    assert link.is_symlink()
    assert (tmp_path / "kept" / "state.json").read_text() == "new"


def test_write_atomically_refuses_a_directory(tmp_path: Path) -> None:
    (tmp_path / "state.json").mkdir()
    with pytest.raises(IsADirectoryError):
        write_atomically(tmp_path / "state.json", "x")
    assert list((tmp_path / "state.json").iterdir()) == []


def test_a_failed_write_leaves_the_old_file_and_no_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "state.json"
    path.write_text("old")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("botctl.store.files.os.fsync", full)
    with pytest.raises(OSError, match="No space left on device"):
        write_atomically(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_write_new_files_creates_all(tmp_path: Path) -> None:
    write_new_files([(tmp_path / "a.yaml", "a"), (tmp_path / "sub" / "b.yaml", "b")])
    assert (tmp_path / "a.yaml").read_text() == "a"
    assert (tmp_path / "sub" / "b.yaml").read_text() == "b"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.yaml", "sub"]


def test_write_new_files_never_overwrites_and_writes_none(tmp_path: Path) -> None:
    (tmp_path / "b.yaml").write_text("mine")
    with pytest.raises(FileExistsError):
        write_new_files([(tmp_path / "a.yaml", "a"), (tmp_path / "b.yaml", "b")])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["b.yaml"]
    assert (tmp_path / "b.yaml").read_text() == "mine"


def test_write_new_files_removes_what_it_created_when_one_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_link = os.link
    calls: list[str] = []

    def link_then_fail(src: str, dst: str) -> None:
        calls.append(dst)
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_link(src, dst)

    monkeypatch.setattr("botctl.store.files.os.link", link_then_fail)
    with pytest.raises(OSError, match="No space left"):
        write_new_files([(tmp_path / "a.yaml", "a"), (tmp_path / "b.yaml", "b")])
    assert list(tmp_path.iterdir()) == []
