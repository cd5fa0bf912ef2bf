"""botctl's own files (state, plans, acknowledgements, locks, exported documents): written so
that no reader, and no kill, sees half of one; read so that any failure is an error naming the
file, and so that nothing but a regular file is read at all: a FIFO would block the run
forever, a device feed it without end.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from botctl.errors import BotctlError

_KINDS = {
    stat.S_IFDIR: "a directory",
    stat.S_IFIFO: "a FIFO",
    stat.S_IFSOCK: "a socket",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
}


class UnreadableFile(OSError):
    """A file that exists but is not a regular file botctl can read; ``strerror`` says why."""


def read_text(path: Path, what: str, error: type[BotctlError]) -> str:
    """The file's text; ``what`` names it in the ``error`` raised when it cannot be read."""
    text = read_text_if_any(path, what, error)
    if text is None:
        raise error(f"cannot read {what} {path}: no such file")
    return text


def read_text_if_any(path: Path, what: str, error: type[BotctlError]) -> str | None:
    """The file's text, or None when there is no such file."""
    try:
        data = read_bytes_if_any(path)
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{what} {path} is not UTF-8 text (byte {exc.start})") from None


def read_bytes_if_any(path: Path) -> bytes | None:
    """The content of the regular file at ``path`` (through symlinks), or None when there is
    none. Anything else raises ``UnreadableFile`` before a byte is read: it is opened without
    blocking (a FIFO's open waits for a writer otherwise) and its type checked."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
            raise UnreadableFile(errno.EINVAL, f"{kind}, not a file", str(path))
        with os.fdopen(fd, "rb", closefd=False) as handle:
            return handle.read()
    finally:
        os.close(fd)


def first_problem(exc: ValidationError) -> str:
    """A file's first invalid place, as ``where.it.is: what is wrong``."""
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else problem["msg"]


def write_atomically(path: Path, text: str, *, shared: bool = False) -> None:
    """Replace the file at ``path`` with ``text``: a temporary file beside it, fsync, rename.
    A symlink is written through (its target replaced, the link kept), not replaced.
    Readable by its owner only, or, ``shared`` (a file of the user's repository), as the
    umask allows."""
    target = Path(os.path.realpath(path))
    if target.is_dir():
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _written_beside(target, text, shared=shared)
    try:
        os.replace(tmp, target)
    except BaseException:
        _remove(tmp)
        raise


def create_file(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` (owner only), or return False when the name is taken.
    Written in full beside it first (fsync), then linked to its name: a reader sees no file
    or the whole of it, never an empty or half-written one (a lock taken at that instant)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _written_beside(path, text)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        _remove(tmp)
    return True


def write_new_file(path: Path, text: str) -> bool:
    """Create ``path`` holding ``text`` as ``write_new_files`` does; False, and nothing
    written, when the name is taken."""
    try:
        write_new_files([(path, text)])
    except FileExistsError:
        return False
    return True


def write_new_files(files: Sequence[tuple[Path, str]]) -> None:
    """Create every file of ``files`` (path, text), or none, with the permissions of any file
    the user creates (0666 less the umask). Each is written in full to a
    temporary file first (fsync), then linked to its name, which fails if the name exists: an
    existing file is never overwritten, even one created meanwhile. On any failure the files
    this call created are removed again, and the error (``FileExistsError`` for a name that
    is taken) raised."""
    staged: list[tuple[Path, Path]] = []
    created: list[Path] = []
    try:
        _stage(files, staged)
        for tmp, path in staged:
            os.link(tmp, path)
            created.append(path)
    except BaseException:
        for path in created:
            _remove(path)
        raise
    finally:
        for tmp, _ in staged:
            _remove(tmp)


def replace_files(files: Sequence[tuple[Path, str]]) -> None:
    """Write every file of ``files`` (path, text), replacing any that exists: all are written
    in full beside their names first (fsync), so that a failure to write any leaves every
    file as it was; then each is renamed over its name (a rename does not fail for want of
    room). Permissions as ``write_new_files``'s."""
    staged: list[tuple[Path, Path]] = []
    try:
        _stage(files, staged)
        for tmp, path in staged:
            os.replace(tmp, path)
    finally:
        for tmp, _ in staged:
            _remove(tmp)


def _stage(files: Sequence[tuple[Path, str]], staged: list[tuple[Path, Path]]) -> None:
    """Each file's text written in full beside its name; ``staged`` gets (temporary, name)
    as each is written, for the caller to remove whatever happens."""
    for path, text in files:
        path.parent.mkdir(parents=True, exist_ok=True)
        staged.append((_written_beside(path, text, shared=True), path))


def _written_beside(path: Path, text: str, *, shared: bool = False) -> Path:
    """A temporary file in ``path``'s directory holding ``text``, on disk (fsync); readable
    by its owner only (botctl's own files may hold what it sent), or, ``shared``, as the
    umask allows."""
    fd, name = tempfile.mkstemp(prefix=f".{path.name[:100]}.", suffix=".tmp", dir=path.parent)
    try:
        # Owner only is mkstemp's mode today; set it anyway, so that it is a promise.
        os.fchmod(fd, 0o666 & ~_umask() if shared else 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
    except BaseException:
        _remove(Path(name))
        raise
    return Path(name)


def _umask() -> int:
    mask = os.umask(0o022)  # the only way to read it is to set it
    os.umask(mask)
    return mask


def _remove(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)
