"""What keeps botctl's local files out of git: the ``.botctl/`` line of a configuration
repository's ``.gitignore`` (merged into the file it has: appended when missing, never a line
twice, nothing else touched), and whether git ignores a file botctl just made (the state's key
file: ``git add -A`` must never commit it).

git is asked only through ``_git``: no shell, the operands after ``--``, no prompt, no
optional lock, a deadline; a git that is missing, fails or is not in a work tree answers
"cannot tell", never an error of the run.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from botctl import gitexec
from botctl.errors import BotctlError
from botctl.store.files import read_text_if_any, write_atomically

LOCAL_DIR = ".botctl/"  # the default state, its key file, the sandbox's database, caches
COMMENT = "# botctl's local files: the state, its key file, the sandbox's database"
GIT_TIMEOUT = 10.0  # seconds: a git that hangs (a network file system) is "cannot tell"
# A line that already ignores botctl's directory, however it is written.
_SAME = {".botctl", ".botctl/", "/.botctl", "/.botctl/", ".botctl/*", "/.botctl/*"}


@dataclass(frozen=True)
class Merged:
    """What ``ensure_ignored`` did to ``path``: the lines it appended (none: the file had
    them), and whether it created the file."""

    path: Path
    added: tuple[str, ...]
    created: bool


def ensure_ignored(directory: Path) -> Merged:
    """``directory/.gitignore`` holds ``.botctl/`` (or a line that means the same): appended,
    with a comment saying why, when missing; the file created when there is none. Written
    atomically, through a symlink; an existing file keeps every line it has."""
    path = directory / ".gitignore"
    text = read_text_if_any(path, "the ignore file", BotctlError)
    present = {entry.strip() for entry in (text or "").splitlines()}
    if present & _SAME:
        return Merged(path, (), created=False)
    before = text or ""
    if before and not before.endswith("\n"):
        before += "\n"
    block = ([COMMENT] if COMMENT not in present else []) + [LOCAL_DIR]
    try:
        write_atomically(path, before + "\n".join(block) + "\n", shared=True)
    except OSError as exc:
        raise BotctlError(f"cannot write {path}: {exc.strerror}") from None
    return Merged(path, (LOCAL_DIR,), created=text is None)


def _git(directory: Path, *args: str) -> subprocess.CompletedProcess[bytes] | None:
    """git run in ``directory`` with ``args`` (the caller puts ``--`` before operands) the
    one hardened way (``botctl.gitexec``: no shell, no prompt, no hooks), with fsmonitor off
    (a repository's configuration names a program that git would run otherwise) and no
    optional locks; None when it cannot run or hangs past its deadline."""
    if shutil.which("git") is None or not directory.is_dir():
        return None
    env = gitexec.environment(
        os.environ, config=(("core.fsmonitor", "false"),), extra={"GIT_OPTIONAL_LOCKS": "0"}
    )
    try:
        return gitexec.Git(env, GIT_TIMEOUT, "git check-ignore").run(["-C", str(directory), *args])
    except gitexec.GitError:
        return None


def work_tree_top(path: Path) -> Path | None:
    """The top of the git work tree ``path`` (a directory, or its nearest existing parent)
    lies in; None outside one, or when git cannot tell."""
    directory = next((p for p in (path, *path.parents) if p.is_dir()), None)
    if directory is None:
        return None
    done = _git(directory, "rev-parse", "--show-toplevel")
    if done is None or done.returncode != 0:
        return None
    top = done.stdout.decode("utf-8", "replace").strip()
    return Path(top) if top else None


def ignored(file: Path) -> bool | None:
    """Whether git ignores ``file`` (which need not exist; its directory must): True, False
    (in a work tree that would add it), or None (not in a work tree, or git cannot tell). A
    tracked file is not ignored, whatever the rules say."""
    done = _git(file.parent, "check-ignore", "--quiet", "--", file.name)
    if done is None or done.returncode not in (0, 1):
        return None  # 128: not a work tree (or git's own error)
    return done.returncode == 0


def unignored_key_warning(file: Path) -> str | None:
    """For a state key file just made: the warning to give when it lies in a git work tree
    that does not ignore it, naming the line to add and where; None otherwise."""
    if ignored(file) is not False:
        return None
    top = work_tree_top(file.parent)
    if top is None:
        return None
    try:
        relative = Path(os.path.relpath(file.resolve(), top.resolve())).as_posix()
    except ValueError:  # another drive (Windows)
        return None
    local = file.parent.name == LOCAL_DIR.rstrip("/")
    line = LOCAL_DIR if local else f"/{relative}"
    init = f" (`botctl init {top}` adds it)" if local else ""
    return (
        f"the state key file {file} is in the git work tree {top} and git does not ignore "
        f"it: `git add -A` would commit the key. Add the line {line} to "
        f"{top / '.gitignore'}{init}"
    )
