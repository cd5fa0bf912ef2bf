"""Where the agent's configuration comes from, one immutable revision at a time.

``SOURCE`` is a local directory (a revision is the hash of its files: it changes when any of
them does) or ``git+<url>#<branch>:<path>``, the grammar of the git state backend. Either way
each revision is a copy of its own in the agent's cache directory, as it was, so the last good
revision stays loadable after an invalid edit: a directory's YAML files are copied into
``revisions/dir-<hash>`` as they are read to hash them; a git source is fetched shallow (the
branch's tip only) into a bare repository there, and each commit is unpacked once into
``revisions/<commit>``: the user's clones are never touched. Credentials are git's own
(credential helpers, ``GIT_ASKPASS``), or a token in the variable ``BOTCTL_GIT_TOKEN`` for
https, sent as an HTTP header through git's environment (never on a command line, never
printed); any URL in a message is shown without its user info.

A revision is whoever can push's input (README, "Trust"), so it is unpacked as a stream
(never read whole into memory), only its YAML files (the project file is one), within
``RevisionLimits``; a symbolic link, a submodule, a device or a file past a limit makes the
revision *invalid* (``Revision.problem``, naming the file or the limit): it is reported and
never applied, and the last good revision stays in force. git runs through
``botctl.gitexec`` under ``--fetch-timeout``; ``cancel`` kills a fetch in flight.
"""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import IO

from botctl import gitexec
from botctl.agent.cachedir import Slot, claim_slot
from botctl.defaults import (
    DEFAULT_FETCH_TIMEOUT,
    REVISION_MAX_BYTES,
    REVISION_MAX_FILE_BYTES,
    REVISION_MAX_FILES,
)
from botctl.errors import BotctlError, StateError
from botctl.store.backend import redact
from botctl.store.backends.git import parse_git_url

TOKEN_VARIABLE = "BOTCTL_GIT_TOKEN"
_SKIPPED = {".git", ".botctl", "__pycache__"}
_SUFFIXES = (".yaml", ".yml")  # the configuration's files, and the project file
_SYMLINK, _SUBMODULE = "120000", "160000"


class SourceError(BotctlError):
    """The source could not be read (the cycle fails, the last good revision stays)."""


class RevisionRefused(BotctlError):
    """A revision that is not unpacked: what it holds is not configuration botctl reads."""


@dataclass(frozen=True)
class RevisionLimits:
    """What one revision may hold: its YAML files, each file's bytes, all their bytes."""

    files: int = REVISION_MAX_FILES
    file_bytes: int = REVISION_MAX_FILE_BYTES
    total_bytes: int = REVISION_MAX_BYTES


@dataclass(frozen=True)
class Revision:
    id: str  # the commit, or ``dir:<hash>`` of a directory's files
    directory: Path  # where its files are, as they were at that revision
    problem: str | None = None  # why it is invalid before it is loaded (nothing unpacked)

    @property
    def short(self) -> str:
        return self.id.removeprefix("dir:")[:12]


class Source:
    """A source of revisions: ``fetch`` returns the newest, copied under ``revisions`` (one
    directory per revision, named by ``_name``)."""

    description: str
    revisions: Path
    prefix: str  # how the source writes the path of a file in a revision ("" or "bots/")
    limits: RevisionLimits
    slot: Slot | None = None  # the slot of --cache-dir it copies into, while it lives

    def fetch(self) -> Revision:
        raise NotImplementedError

    def cancel(self) -> None:
        """Stop what ``fetch`` runs (the agent is stopping); nothing is fetched after."""

    @staticmethod
    def _name(revision_id: str) -> str:
        return revision_id.replace(":", "-")

    def display(self, text: str) -> str:
        """``text`` (an error) with a revision's directory written as the source's own
        paths."""
        try:
            directories = list(self.revisions.iterdir()) if self.revisions.is_dir() else []
        except OSError:  # out of file descriptors, say: the text as it is
            return text
        for directory in directories:
            for spelling in {str(directory.resolve()), str(directory), _relative(directory)}:
                text = text.replace(f"{spelling}{os.sep}", self.prefix)
        return text

    def retain(self, keep: set[str]) -> None:
        """Forget the copied revisions other than ``keep``."""
        if not self.revisions.is_dir():
            return
        names = {self._name(k) for k in keep}
        for directory in self.revisions.iterdir():
            if directory.name not in names:
                shutil.rmtree(directory, ignore_errors=True)

    def _refused(self, name: str, why: str) -> RevisionRefused:
        return RevisionRefused(f"{self.prefix}{name}: {why}")


def open_source(
    text: str,
    cache: Path,
    *,
    timeout: float = DEFAULT_FETCH_TIMEOUT,
    limits: RevisionLimits | None = None,
) -> Source:
    """The source ``text`` names, its copies in a slot of ``cache`` this process alone uses
    (``agent.cachedir``: another agent started from the same directory takes another)."""
    limits = limits or RevisionLimits()
    path = Path(text[len("file://") :] if text.startswith("file://") else text)
    if not text.startswith("git+") and not path.is_dir():
        raise SourceError(
            f"source {text!r}: not a directory; give a directory or "
            "git+<repository URL>#<branch>:<path>"
        )
    slot = claim_slot(cache)
    source: Source
    if text.startswith("git+"):
        source = GitSource(text, slot.path, timeout=timeout, limits=limits)
    else:
        source = DirectorySource(path, slot.path, limits=limits, skip=cache)
    source.slot = slot
    return source


class _Budget:
    """The limits of one revision, counted as its files are listed."""

    def __init__(self, source: Source) -> None:
        self.source = source
        self.limits = source.limits
        self.files = 0
        self.bytes = 0

    def take(self, name: str, size: int) -> None:
        limits = self.limits
        self.files += 1
        self.bytes += size
        if size > limits.file_bytes:
            raise self.source._refused(
                name, f"{size:,} bytes, over the limit of {limits.file_bytes:,} bytes per file"
            )
        if self.files > limits.files:
            raise RevisionRefused(
                f"more than {limits.files:,} YAML files: over the limit of files in a revision "
                "(--max-revision-files)"
            )
        if self.bytes > limits.total_bytes:
            raise RevisionRefused(
                f"more than {limits.total_bytes:,} bytes of YAML: over the limit of bytes in a "
                "revision (--max-revision-bytes)"
            )


class DirectorySource(Source):
    """A local directory (for trying the agent out), each revision a copy of its files."""

    def __init__(
        self,
        path: Path,
        cache: Path,
        *,
        limits: RevisionLimits | None = None,
        skip: Path | None = None,
    ) -> None:
        self.path = path
        self.description = str(path)
        self.prefix = "" if _relative(path) == "." else _relative(path).rstrip(os.sep) + os.sep
        key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
        self.revisions = cache / f"dir-{key}" / "revisions"
        self.limits = limits or RevisionLimits()
        # Never read as configuration, if it lies inside (every agent's slot of it).
        self._cache = (skip or cache).resolve()

    def fetch(self) -> Revision:
        digest = hashlib.sha256()
        files: dict[Path, bytes] = {}
        try:
            for relative, data in self._read():
                files[relative] = data
                digest.update(str(relative).encode() + b"\0")
                digest.update(hashlib.sha256(data).digest())
        except RevisionRefused as exc:
            digest.update(str(exc).encode())
            revision = "dir:" + digest.hexdigest()
            return Revision(revision, self.revisions / self._name(revision), str(exc))
        except OSError as exc:
            raise SourceError(
                f"source {self.path}: cannot read {exc.filename}: {exc.strerror}"
            ) from None
        revision = "dir:" + digest.hexdigest()
        target = self.revisions / self._name(revision)
        if not target.is_dir():
            _unpacked(target, lambda into: _write_all(into, files))
        return Revision(revision, target)

    def _read(self) -> Iterator[tuple[Path, bytes]]:
        """Each YAML file's path and content, in order, within the limits; a symbolic link
        or anything but a regular file where configuration would be read is refused."""
        budget = _Budget(self)
        for file in sorted(self._files()):
            relative = file.relative_to(self.path)
            info = file.lstat()
            if stat.S_ISLNK(info.st_mode):
                raise self._refused(str(relative), _LINK)
            if not stat.S_ISREG(info.st_mode):
                raise self._refused(str(relative), "not a regular file (a device or a FIFO)")
            with file.open("rb") as handle:
                data = handle.read(self.limits.file_bytes + 1)
            budget.take(str(relative), max(len(data), info.st_size))
            yield relative, data

    def _files(self) -> list[Path]:
        found = []
        for root, dirs, files in os.walk(self.path):
            for d in dirs:
                if d not in _SKIPPED and Path(root, d).is_symlink():
                    relative = Path(root, d).relative_to(self.path)
                    raise self._refused(str(relative), _LINK)
            dirs[:] = [
                d for d in dirs if d not in _SKIPPED and Path(root, d).resolve() != self._cache
            ]
            found += [Path(root, f) for f in files if f.endswith(_SUFFIXES)]
        return found


_LINK = (
    "a symbolic link: a revision's configuration is read from its own regular files only "
    "(commit the file itself)"
)


def _write_all(into: Path, files: dict[Path, bytes]) -> None:
    for relative, data in files.items():
        (into / relative).parent.mkdir(parents=True, exist_ok=True)
        (into / relative).write_bytes(data)


def _unpacked(target: Path, fill: Callable[[Path], None]) -> None:
    """``target`` made whole or not at all: filled under another name, then renamed (a
    revision directory that exists is complete)."""
    partial = target.with_name(target.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True, mode=0o700)
    try:
        fill(partial)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    partial.rename(target)


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


@dataclass(frozen=True)
class _Entry:
    name: str  # its path in the revision (under the source's path)
    oid: str
    size: int


class GitSource(Source):
    def __init__(
        self,
        url: str,
        cache: Path,
        *,
        timeout: float = DEFAULT_FETCH_TIMEOUT,
        limits: RevisionLimits | None = None,
    ) -> None:
        try:
            self.repo, self.branch, self.path = parse_git_url(
                url, "source", "git+https://github.com/acme/bots.git#main:bots (:. for the root)"
            )
        except StateError as exc:
            raise SourceError(str(exc)) from None
        self.description = redact(url)
        key = hashlib.sha256(url.encode()).hexdigest()[:16]
        self.cache = cache / key
        self.git_dir = self.cache / "repo.git"
        self.revisions = self.cache / "revisions"
        self.prefix = "" if self.path in (".", "") else self.path.rstrip("/") + "/"
        self.limits = limits or RevisionLimits()
        self.timeout = timeout
        self._runner = gitexec.Git(self._environment(), timeout, "the agent")
        self._refusals: dict[str, str] = {}  # the last commit refused, and why

    def _environment(self) -> dict[str, str]:
        config = []
        token = os.environ.get(TOKEN_VARIABLE)
        if token and self.repo.startswith("https://"):
            basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
            config.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        return gitexec.environment(os.environ, config=config)

    def cancel(self) -> None:
        self._runner.cancel()

    def _git(self, *args: str) -> bytes:
        try:
            proc = self._runner.run([f"--git-dir={self.git_dir}", *args])
        except gitexec.GitTimeout as exc:
            raise SourceError(
                f"source {self.description}: {exc} (--fetch-timeout {self.timeout:g}s)"
            ) from None
        except gitexec.GitError as exc:
            raise SourceError(f"source {self.description}: {exc}") from None
        if proc.returncode != 0:
            said = redact(gitexec.said(proc))
            raise SourceError(f"source {self.description}: git {args[0]} failed: {said}")
        return proc.stdout

    def fetch(self) -> Revision:
        if shutil.which("git") is None:
            raise SourceError(f"source {self.description} needs the git executable on PATH")
        if not self.git_dir.exists():
            self.cache.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._git("init", "--quiet", "--bare")
        self._git(
            "fetch",
            "--quiet",
            "--depth=1",
            "--no-tags",
            "--no-recurse-submodules",
            "--end-of-options",
            self.repo,
            f"+refs/heads/{self.branch}:refs/botctl/source",
        )
        commit = self._git("rev-parse", "--verify", "refs/botctl/source^{commit}")
        revision = commit.decode().strip()
        target = self.revisions / revision
        if revision in self._refusals:
            return Revision(revision, target, self._refusals[revision])
        if not target.is_dir():
            try:
                self._unpack(revision, target)
            except RevisionRefused as exc:
                self._refusals = {revision: str(exc)}
                return Revision(revision, target, str(exc))
        return Revision(revision, target)

    def _unpack(self, commit: str, target: Path) -> None:
        tree = commit if self.path in (".", "") else f"{commit}:{self.path}"
        entries = self._listed(tree)

        def extract(into: Path) -> None:
            blobs = gitexec.read_blobs(
                self._runner,
                [f"--git-dir={self.git_dir}"],
                [e.oid for e in entries],
                self.limits.file_bytes,
            )
            try:
                for entry, blob in zip(entries, blobs, strict=True):
                    file = into.joinpath(*PurePosixPath(entry.name).parts)
                    file.parent.mkdir(parents=True, exist_ok=True)
                    file.write_bytes(blob.head)
            except gitexec.GitError as exc:
                raise SourceError(f"source {self.description}: {exc}") from None

        _unpacked(target, extract)

    def _listed(self, tree: str) -> list[_Entry]:
        """The YAML files of ``tree``, listed as a stream within the limits; a symbolic link
        or a submodule anywhere in it refuses the revision."""
        budget = _Budget(self)
        wanted: list[_Entry] = []
        args = [f"--git-dir={self.git_dir}", "ls-tree", "-r", "-z", "-l", "--end-of-options"]
        try:
            with self._runner.popen([*args, tree]) as proc:
                assert proc.stdout is not None
                for meta, name in _records(proc.stdout):
                    entry = self._entry(meta, name, budget)
                    if entry is not None:
                        wanted.append(entry)
                failed = proc.stderr.read() if proc.stderr is not None else b""
        except gitexec.GitError as exc:
            raise SourceError(f"source {self.description}: {exc}") from None
        if proc.returncode != 0:
            said = failed.decode("utf-8", "replace").strip()
            raise RevisionRefused(
                f"{self.prefix or './'}: not in this revision ({said or 'git ls-tree failed'})"
            )
        return wanted

    def _entry(self, meta: str, name: str, budget: _Budget) -> _Entry | None:
        mode, kind, oid, size = meta.split()
        if mode == _SYMLINK:
            raise self._refused(name, _LINK)
        if mode == _SUBMODULE or kind == "commit":
            raise self._refused(name, "a submodule: a revision's configuration is its own files")
        parts = PurePosixPath(name).parts
        if kind != "blob" or not name.endswith(_SUFFIXES):
            return None
        if not parts or any(p in ("", ".", "..") for p in parts) or name.startswith("/"):
            raise self._refused(name, "not a plain path inside the revision")
        budget.take(name, int(size))
        return _Entry(name, oid, int(size))


def _records(stream: IO[bytes]) -> Iterator[tuple[str, str]]:
    """(``<mode> <type> <oid> <size>``, path) of each NUL-terminated ``ls-tree -z -l``
    record, read in pieces."""
    pending = b""
    while True:
        chunk = stream.read(1 << 16)
        if not chunk:
            break
        pending += chunk
        *records, pending = pending.split(b"\0")
        for record in records:
            meta, _, raw = record.partition(b"\t")
            yield meta.decode("ascii", "replace"), raw.decode("utf-8", "surrogateescape")
