"""botctl's own files (state, plans, acknowledgements): written so that no reader, and no kill,
sees half of one; read so that any failure is an error naming the file."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from pydantic import ValidationError

from botctl.errors import BotctlError


def read_text(path: Path, what: str, error: type[BotctlError]) -> str:
    """The file's text; ``what`` names it in the ``error`` raised when it cannot be read."""
    text = read_text_if_any(path, what, error)
    if text is None:
        raise error(f"cannot read {what} {path}: no such file")
    return text


def read_text_if_any(path: Path, what: str, error: type[BotctlError]) -> str | None:
    """The file's text, or None when there is no such file."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise error(f"{what} {path} is not UTF-8 text") from None


def first_problem(exc: ValidationError) -> str:
    """A file's first invalid place, as ``where.it.is: what is wrong``."""
    problem = exc.errors()[0]
    where = ".".join(str(part) for part in problem["loc"])
    return f"{where}: {problem['msg']}" if where else problem["msg"]


def write_atomically(path: Path, text: str) -> None:
    """Replace ``path`` with ``text``: a temporary file beside it, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as tmp:
            tmp.write(text)
            tmp.flush()
            os.fsync(tmp.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise
