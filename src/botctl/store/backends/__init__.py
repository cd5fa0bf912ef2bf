"""The state backends, chosen from the ``--state`` value:

- a path (``.botctl/state.json``, ``/srv/botctl/state.json``, ``file:///...``): ``path.py``;
- ``git+<repo-url>#<branch>:<path>``: a branch of a git repository, ``git.py``;
- ``s3://<bucket>/<key>``: an S3 object, ``s3.py`` (needs ``botctl[s3]``).

Each module is imported only when its kind of state is used.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator
from pathlib import Path

from botctl.errors import StateError
from botctl.store.backend import StateBackend, redact

StateLocation = str | os.PathLike[str]

_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
SCHEMES = "a path, file:///path, git+<repo-url>#<branch>:<path>, or s3://<bucket>/<key>"


def open_backend(where: StateLocation) -> StateBackend:
    """The backend of a ``--state`` value."""
    text = os.fspath(where)
    if not text:
        raise StateError(f"--state is empty: give {SCHEMES}")
    if text.startswith("git+"):
        from botctl.store.backends.git import GitBackend

        return GitBackend(text)
    if text.startswith("s3://"):
        from botctl.store.backends.s3 import S3Backend

        return S3Backend(text)
    from botctl.store.backends.path import PathBackend

    if text.startswith("file://"):
        return PathBackend(Path(text[len("file://") :]))
    if _URL.match(text):
        scheme = text.split("://", 1)[0]
        raise StateError(
            f"--state {describe(text)}: no state backend for {scheme}://; give {SCHEMES}"
        )
    return PathBackend(Path(text))


def describe(where: StateLocation) -> str:
    """A ``--state`` value as messages show it: without credentials, and without opening
    anything (no clone, no connection)."""
    return redact(os.fspath(where))


@contextlib.contextmanager
def using_backend(where: StateLocation | StateBackend) -> Iterator[StateBackend]:
    """``where``'s backend: the one given (left open), or one opened for the block."""
    if isinstance(where, StateBackend):
        yield where
        return
    with open_backend(where) as backend:
        yield backend
