"""The configuration as it was at a git revision (``--changed-since REF``), read from git's
objects: nothing is checked out, the working tree is never touched.

The same files are read as in the working tree: the PATHs given, or, when the project file
names them, the ``paths`` of the project file *as it was at the revision* (and its
``allowUnknownModels``). A directory yields its ``*.yaml``/``*.yml`` files, recursively,
project files left out, as ``config.loader`` does on disk. git runs through
``botctl.gitexec`` (a bare repository committed inside the checkout is never taken for the
repository; each process under a deadline).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from botctl import gitexec
from botctl.config.loader import SUFFIXES, load_fleet_from
from botctl.config.project import PROJECT_FILE_NAMES, Project, load_project
from botctl.config.resolve import Fleet
from botctl.config.yamlnodes import MAX_FILE_BYTES
from botctl.errors import BotctlError, ConfigError

_BLOB_MODES = ("100644", "100755")
_HINT = "run without --changed-since for a full plan"


class RevisionError(BotctlError):
    """--changed-since cannot be honoured: no git, no repository, a revision git cannot
    resolve, a configuration outside the repository. Never a silent full plan."""


@dataclass(frozen=True)
class Revision:
    ref: str  # as given: main, origin/main, HEAD~1, a sha
    commit: str  # the full commit id it resolves to
    root: Path  # the repository's top directory

    @property
    def short(self) -> str:
        return self.commit[:12]


@dataclass(frozen=True)
class AtRevision:
    """The configuration at a revision: resolved, or why it does not load there."""

    revision: Revision
    fleet: Fleet | None
    problem: str | None = None  # the first problem, when it does not load


def _runner() -> gitexec.Git:
    if shutil.which("git") is None:
        raise RevisionError(f"--changed-since needs git, and there is none on PATH; {_HINT}")
    env = gitexec.environment(os.environ, extra={"GIT_OPTIONAL_LOCKS": "0"})
    return gitexec.Git(env, gitexec.default_timeout(), "--changed-since")


def _git(root: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return _runner().run(["-C", str(root), *args])
    except gitexec.GitError as exc:
        raise RevisionError(f"--changed-since: {exc}; {_HINT}") from None


def _said(result: subprocess.CompletedProcess[bytes]) -> str:
    text = result.stderr.decode("utf-8", "replace").strip().splitlines()
    return text[0] if text else f"git exited {result.returncode}"


def find_revision(ref: str, paths: Sequence[Path]) -> Revision:
    """``ref`` resolved to a commit of the repository that holds ``paths``."""
    shown = ", ".join(map(str, paths)) or "."
    if not ref or ref.startswith("-") or any(c.isspace() or not c.isprintable() for c in ref):
        raise RevisionError(f"--changed-since {ref!r} is not a git revision; {_HINT}")
    first = paths[0] if paths else Path(".")
    start = first if first.is_dir() else first.parent
    if not start.is_dir():
        start = Path(".")
    top = _git(start, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise RevisionError(
            f"--changed-since {ref}: the configuration ({shown}) is not in a git repository "
            f"({_said(top)}); {_HINT}"
        )
    root = Path(top.stdout.decode("utf-8", "replace").strip())
    found = _git(root, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}")
    if found.returncode != 0:
        raise RevisionError(
            f"--changed-since {ref}: git cannot resolve it to a commit of {root} (is it "
            "fetched? a CI checkout may need its history: fetch-depth 0); " + _HINT
        )
    commit = found.stdout.decode("ascii", "replace").strip()
    for path in paths:
        _relative(root, path)  # inside the repository, or an error now
    return Revision(ref, commit, root)


def _relative(root: Path, path: Path) -> str:
    """``path`` as git names it in the repository at ``root`` (POSIX, no leading ./)."""
    relative = os.path.relpath(os.path.realpath(path), os.path.realpath(root))
    posix = PurePosixPath(*Path(relative).parts) if relative != "." else PurePosixPath(".")
    if posix.parts and posix.parts[0] == "..":
        raise RevisionError(
            f"--changed-since: {path} is outside the git repository {root}; {_HINT}"
        )
    return str(posix)


def _listed(revision: Revision, wanted: Sequence[tuple[Path, str]]) -> list[tuple[str, str]]:
    """(name, blob id) of the configuration files at the revision under each wanted path
    (as given, and as git names it), each named as the working tree's loader names it: the
    path as given, joined with the file's place under it."""
    listing = _git(revision.root, "ls-tree", "-r", "-z", "--full-tree", revision.commit, "--")
    if listing.returncode != 0:
        raise RevisionError(f"--changed-since {revision.ref}: git ls-tree: {_said(listing)}")
    tree: dict[str, str] = {}
    for entry in listing.stdout.split(b"\0"):
        if not entry:
            continue
        meta, _, raw = entry.partition(b"\t")
        mode, kind, oid = meta.decode("ascii").split(" ")
        if kind == "blob" and mode in _BLOB_MODES:
            tree[raw.decode("utf-8", "surrogateescape")] = oid
    found: dict[str, str] = {}
    names = sorted(tree)
    for given, relative in wanted:
        if relative in tree:  # a file named as such: read whatever its suffix, as on disk
            if PurePosixPath(relative).name not in PROJECT_FILE_NAMES:
                found.setdefault(str(given), tree[relative])
            continue
        prefix = "" if relative == "." else relative + "/"
        for name in names:
            pure = PurePosixPath(name)
            if (
                name.startswith(prefix)
                and pure.suffix in SUFFIXES
                and pure.name not in PROJECT_FILE_NAMES
            ):
                found.setdefault(str(given / name.removeprefix(prefix)), tree[name])
    return list(found.items())


def _blobs(revision: Revision, oids: Sequence[str]) -> list[bytes]:
    """The contents of ``oids`` (in order), each cut after the loader's size limit (read as
    a stream: a blob past the limit is never held whole)."""
    root = ["-C", str(revision.root)]
    try:
        return [b.head for b in gitexec.read_blobs(_runner(), root, oids, MAX_FILE_BYTES + 1)]
    except gitexec.GitError as exc:
        raise RevisionError(f"--changed-since {revision.ref}: {exc}") from None


def _project_text(revision: Revision, project_file: Path) -> str | None:
    """The project file's text at the revision; None when it did not exist there."""
    relative = _relative(revision.root, project_file)
    shown = _git(
        revision.root, "cat-file", "blob", "--end-of-options", f"{revision.commit}:{relative}"
    )
    if shown.returncode != 0:
        return None
    return shown.stdout.decode("utf-8", "replace")


def load_at_revision(
    revision: Revision,
    paths: Sequence[Path],
    *,
    environ: Mapping[str, str],
    allow_unknown_models: bool,
    project_file: Path | None = None,
) -> AtRevision:
    """The configuration at ``revision``: of ``paths``, or, given the ``project_file`` the
    paths came from, of that file's paths as it was at the revision (when it existed)."""
    given = list(paths)
    if project_file is not None:
        text = _project_text(revision, project_file)
        if text is not None:
            shown = Path(f"{revision.ref}:{_relative(revision.root, project_file)}")
            try:
                then = load_project(shown, environ, text=text)
            except ConfigError as exc:
                return AtRevision(revision, None, _first_error(exc))
            if then.settings.paths:  # relative to the project file, as they were then
                now = Project(project_file, then.settings, then.disabled_warnings)
                given = list(now.paths)
            # A flag or the project file now may allow them; so may the file as it was then.
            allow_unknown_models = allow_unknown_models or bool(then.settings.allowUnknownModels)
    wanted = [(p, _relative(revision.root, p)) for p in given]
    entries = _listed(revision, wanted)
    contents = _blobs(revision, [oid for _, oid in entries])
    # Named as in the working tree: a file unchanged since the revision is parsed once.
    files = [(name, data) for (name, _), data in zip(entries, contents, strict=True)]
    try:
        fleet = load_fleet_from(files, environ=environ, allow_unknown_models=allow_unknown_models)
    except ConfigError as exc:
        return AtRevision(revision, None, _first_error(exc))
    return AtRevision(revision, fleet)


def _first_error(exc: ConfigError) -> str:
    errors = [p for p in exc.problems if p.severity == "error"] or exc.problems
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{errors[0]}{more}" if errors else str(exc)
