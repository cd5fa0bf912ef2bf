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
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from botctl.errors import BotctlError, StateError
from botctl.store.backend import redact
from botctl.store.backends.git import REPOSITORY_VARIABLES, parse_git_url

TOKEN_VARIABLE = "BOTCTL_GIT_TOKEN"
_SKIPPED = {".git", ".botctl", "__pycache__"}


class SourceError(BotctlError):
    """The source could not be read (the cycle fails, the last good revision stays)."""


@dataclass(frozen=True)
class Revision:
    id: str  # the commit, or ``dir:<hash>`` of a directory's files
    directory: Path  # where its files are, as they were at that revision

    @property
    def short(self) -> str:
        return self.id.removeprefix("dir:")[:12]


class Source:
    """A source of revisions: ``fetch`` returns the newest, copied under ``revisions`` (one
    directory per revision, named by ``_name``)."""

    description: str
    revisions: Path
    prefix: str  # how the source writes the path of a file in a revision ("" or "bots/")

    def fetch(self) -> Revision:
        raise NotImplementedError

    @staticmethod
    def _name(revision_id: str) -> str:
        return revision_id.replace(":", "-")

    def display(self, text: str) -> str:
        """``text`` (an error) with a revision's directory written as the source's own
        paths."""
        if not self.revisions.is_dir():
            return text
        for directory in self.revisions.iterdir():
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


def open_source(text: str, cache: Path) -> Source:
    if text.startswith("git+"):
        return GitSource(text, cache)
    path = Path(text[len("file://") :] if text.startswith("file://") else text)
    if not path.is_dir():
        raise SourceError(
            f"source {text!r}: not a directory; give a directory or "
            "git+<repository URL>#<branch>:<path>"
        )
    return DirectorySource(path, cache)


class DirectorySource(Source):
    """A local directory (for trying the agent out), each revision a copy of its files."""

    def __init__(self, path: Path, cache: Path) -> None:
        self.path = path
        self.description = str(path)
        self.prefix = "" if _relative(path) == "." else _relative(path).rstrip(os.sep) + os.sep
        key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
        self.revisions = cache / f"dir-{key}" / "revisions"
        self._cache = cache.resolve()  # never read as configuration, if it lies inside

    def fetch(self) -> Revision:
        digest = hashlib.sha256()
        files: dict[Path, bytes] = {}
        try:
            for file in sorted(self._files()):
                relative = file.relative_to(self.path)
                files[relative] = file.read_bytes()
                digest.update(str(relative).encode() + b"\0")
                digest.update(hashlib.sha256(files[relative]).digest())
        except OSError as exc:
            raise SourceError(
                f"source {self.path}: cannot read {exc.filename}: {exc.strerror}"
            ) from None
        revision = "dir:" + digest.hexdigest()
        target = self.revisions / self._name(revision)
        if not target.is_dir():
            _unpacked(target, lambda into: _write_all(into, files))
        return Revision(revision, target)

    def _files(self) -> list[Path]:
        found = []
        for root, dirs, files in os.walk(self.path):
            dirs[:] = [
                d for d in dirs if d not in _SKIPPED and Path(root, d).resolve() != self._cache
            ]
            found += [Path(root, f) for f in files if f.endswith((".yaml", ".yml"))]
        return found


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
    fill(partial)
    partial.rename(target)


def _relative(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:
        return str(path)


class GitSource(Source):
    def __init__(self, url: str, cache: Path) -> None:
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
        self._env: dict[str, str] = {}

    def _git(self, *args: str) -> subprocess.CompletedProcess[bytes]:
        if not self._env:
            env = {k: v for k, v in os.environ.items() if k not in REPOSITORY_VARIABLES}
            env.update({"LC_ALL": "C", "GIT_TERMINAL_PROMPT": "0"})
            token = os.environ.get(TOKEN_VARIABLE)
            if token and self.repo.startswith("https://"):
                basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
                env.update(
                    {
                        "GIT_CONFIG_COUNT": "1",
                        "GIT_CONFIG_KEY_0": "http.extraHeader",
                        "GIT_CONFIG_VALUE_0": f"Authorization: Basic {basic}",
                    }
                )
            self._env = env
        try:
            proc = subprocess.run(
                ["git", f"--git-dir={self.git_dir}", *args],
                capture_output=True,
                env=self._env,
                stdin=subprocess.DEVNULL,
                check=False,
            )
        except OSError as exc:
            raise SourceError(
                f"source {self.description}: cannot run git: {exc.strerror}"
            ) from None
        if proc.returncode != 0:
            said = proc.stderr.decode("utf-8", "replace").strip() or f"exit {proc.returncode}"
            raise SourceError(f"source {self.description}: git {args[0]} failed: {redact(said)}")
        return proc

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
            self.repo,
            f"+refs/heads/{self.branch}:refs/botctl/source",
        )
        commit = self._git("rev-parse", "refs/botctl/source").stdout.decode().strip()
        target = self.revisions / commit
        if not target.is_dir():
            self._unpack(commit, target)
        return Revision(commit, target)

    def _unpack(self, commit: str, target: Path) -> None:
        tree = commit if self.path in (".", "") else f"{commit}:{self.path}"
        archive = self._git("archive", "--format=tar", tree).stdout

        def extract(into: Path) -> None:
            with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
                tar.extractall(into, filter="data")

        _unpacked(target, extract)
