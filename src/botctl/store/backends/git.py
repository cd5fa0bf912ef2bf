"""State on a branch of a git repository: ``git+<repo-url>#<branch>:<path>``.

Every state write is one commit on the branch (its message lists the operations applied), so
the branch's history is the state's audit log. The lock is a file ``<path>.lock`` added in a
commit and removed in a later one. The version of the state is the branch's tip commit, and
a write is a push of a commit whose parent is that tip, with ``--force-with-lease`` naming
it: git's receive-pack updates the branch only if it still points there (and the new commit
descends from it, so the push fast-forwards). A push that loses is a lost compare-and-swap.

botctl runs the ``git`` executable in a private bare repository in a temporary directory
(0700), removed when done: the user's working tree, index and refs are never touched. git
runs through ``botctl.gitexec`` (transports limited, operands after ``--end-of-options``,
each process under a deadline: ``BOTCTL_GIT_TIMEOUT``, default 60 s). Credentials are git's
own (credential helpers, SSH agent, a URL's user info); any URL in botctl's messages or in
git's errors is shown without its user info.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import weakref
from pathlib import Path

from botctl import gitexec
from botctl.errors import StateError
from botctl.store.backend import (
    LockInfo,
    LostCompareAndSwap,
    Snapshot,
    StateBackend,
    Version,
    redact,
)

SCHEME = "git+"
# Pushes lost to another writer before a lock is taken or removed (each a fresh look).
_LOCK_ATTEMPTS = 10
_NO_OBJECT = "0" * 40
_RENEWAL = "Lease-Renewal: "  # the trailer of a lease renewal commit, with its holder
_PUSH_LOST = ("[rejected]", "cannot lock ref", "but expected", "stale info", "fetch first")


def parse_git_url(
    url: str,
    what: str = "state URL",
    example: str = "git+file:///srv/bots.git#botctl-state:state.json",
) -> tuple[str, str, str]:
    """``git+<repo>#<branch>:<path>`` -> (repo, branch, path); ``what`` names the URL in an
    error (a state, an agent's source), with ``example``."""
    rest = url[len(SCHEME) :]
    repo, sep, fragment = rest.rpartition("#")
    branch, colon, path = fragment.partition(":")
    if not sep or not repo or not colon or not branch or not path.strip("/"):
        raise StateError(
            f"{what} {redact(url)!r}: expected git+<repository URL>#<branch>:<path in the "
            f"branch>, e.g. {example}"
        )
    problem = gitexec.check_repository(repo)
    if problem:
        raise StateError(f"{what} {redact(url)!r}: {problem} (e.g. {example})")
    if (
        branch.startswith("-")
        or ".." in branch
        or branch.endswith((".lock", "/"))
        or any(c.isspace() or not c.isprintable() or c in "~^:?*[\\" for c in branch)
    ):
        raise StateError(
            f"{what} {redact(url)!r}: {branch!r} is not a usable branch name (e.g. {example})"
        )
    path = path.strip("/")
    if path.startswith("-") or any(not c.isprintable() for c in path):
        raise StateError(f"{what} {redact(url)!r}: {path!r} is not a usable path (e.g. {example})")
    return repo, branch, path


class GitBackend(StateBackend):
    poll_interval = 0.5

    def __init__(self, url: str) -> None:
        self.repo, self.branch, self.path = parse_git_url(url)
        self.lock_path = self.path + ".lock"
        self.ref = f"refs/heads/{self.branch}"
        self.where = redact(url)
        self._dir: Path | None = None
        self._runner = gitexec.Git({}, gitexec.default_timeout(), f"state {self.where}")
        self._env = self._runner.env

    # --- the private repository -------------------------------------------------------

    def _git_dir(self) -> Path:
        if self._dir is None:
            if shutil.which("git") is None:
                raise StateError(f"state {self.where} needs the git executable on PATH")
            self._dir = Path(tempfile.mkdtemp(prefix="botctl-state-"))
            weakref.finalize(self, shutil.rmtree, self._dir, ignore_errors=True)
            self._env.update(gitexec.environment(os.environ))
            self._git("init", "--quiet", "--bare", "--end-of-options", str(self._dir))
            self._env["GIT_DIR"] = str(self._dir)
            self._env.update(self._identity())
        return self._dir

    def close(self) -> None:
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def _git(
        self, *args: str, input: str | None = None, ok: tuple[int, ...] = (0,)
    ) -> subprocess.CompletedProcess[str]:
        try:
            done = self._runner.run(args, input=None if input is None else input.encode())
        except gitexec.GitError as exc:
            raise StateError(f"state {self.where}: {exc}") from None
        proc = subprocess.CompletedProcess(
            done.args,
            done.returncode,
            done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"),
        )
        if proc.returncode not in ok:
            detail = redact((proc.stderr or proc.stdout).strip()) or f"exit {proc.returncode}"
            raise StateError(f"state {self.where}: git {args[0]} failed: {detail}")
        return proc

    def _identity(self) -> dict[str, str]:
        """Commits need an author: the user's git identity when configured (the environment,
        then git's configuration), else botctl on this host."""
        name = self._git("config", "--get", "user.name", ok=(0, 1)).stdout.strip()
        email = self._git("config", "--get", "user.email", ok=(0, 1)).stdout.strip()
        name = name or "botctl"
        email = email or f"botctl@{socket.gethostname()}"
        found = {}
        for role in ("AUTHOR", "COMMITTER"):
            found[f"GIT_{role}_NAME"] = os.environ.get(f"GIT_{role}_NAME", name)
            found[f"GIT_{role}_EMAIL"] = os.environ.get(f"GIT_{role}_EMAIL", email)
        return found

    # --- reading ------------------------------------------------------------------------

    def _fetch_tip(self) -> str | None:
        """The branch's tip on the remote, fetched into the private repository."""
        self._git_dir()
        listed = self._git(
            "ls-remote", "--exit-code", "--end-of-options", self.repo, self.ref, ok=(0, 2)
        )
        if listed.returncode == 2:
            return None
        sha = listed.stdout.split()[0]
        if self._git("cat-file", "-e", f"{sha}^{{commit}}", ok=(0, 1, 128)).returncode != 0:
            fetched = self._git(
                "fetch",
                "--quiet",
                "--no-tags",
                "--end-of-options",
                self.repo,
                f"+{self.ref}:refs/botctl/tip",
                ok=(0, 1, 128),
            )
            if fetched.returncode != 0:
                if "couldn't find remote ref" in fetched.stderr:
                    return None  # deleted since it was listed
                raise StateError(f"state {self.where}: git fetch failed: {redact(fetched.stderr)}")
            sha = self._git("rev-parse", "refs/botctl/tip").stdout.strip()
        return sha

    def _file_at(self, commit: str, path: str) -> str | None:
        found = self._git("rev-parse", "--verify", "--quiet", f"{commit}:{path}", ok=(0, 1))
        if found.returncode != 0:
            return None
        return self._git("cat-file", "blob", found.stdout.strip()).stdout

    def read(self) -> Snapshot:
        tip = self._fetch_tip()
        if tip is None:
            return Snapshot(None, None)
        return Snapshot(self._file_at(tip, self.path), tip)

    def read_lock(self) -> LockInfo | None:
        tip = self._fetch_tip()
        text = None if tip is None else self._file_at(tip, self.lock_path)
        return None if text is None else LockInfo.from_text(text)

    # --- writing ------------------------------------------------------------------------

    def _commit(self, parent: str | None, files: dict[str, str | None], message: str) -> str:
        """A commit of ``parent``'s tree with ``files`` set (None: removed), made in a
        temporary index of the private repository."""
        git_dir = self._git_dir()
        index = git_dir / "botctl-index"
        self._env["GIT_INDEX_FILE"] = str(index)
        try:
            self._git("read-tree", *([parent] if parent else ["--empty"]))
            entries = []
            for path, text in files.items():
                if text is None:
                    entries.append(f"0 {_NO_OBJECT}\t{path}\n")  # mode 0: remove the path
                    continue
                blob = self._git("hash-object", "-w", "--stdin", input=text).stdout.strip()
                entries.append(f"100644 {blob}\t{path}\n")
            # --index-info, not --add/--force-remove: those want a work tree, and there is none.
            self._git("update-index", "--index-info", input="".join(entries))
            tree = self._git("write-tree").stdout.strip()
        finally:
            self._env.pop("GIT_INDEX_FILE", None)
            index.unlink(missing_ok=True)
        parents = ["-p", parent] if parent else []
        return self._git("commit-tree", tree, *parents, input=message).stdout.strip()

    def _push(self, commit: str, expected: str | None) -> bool:
        """Move the branch from ``expected`` (None: absent) to ``commit``; False when it no
        longer points at ``expected`` (another writer was first)."""
        pushed = self._git(
            "push",
            "--quiet",
            "--porcelain",
            "--no-verify",
            f"--force-with-lease={self.ref}:{expected or ''}",
            "--end-of-options",
            self.repo,
            f"{commit}:{self.ref}",
            ok=(0, 1, 128),
        )
        if pushed.returncode == 0:
            return True
        output = pushed.stdout + pushed.stderr
        if any(sign in output for sign in _PUSH_LOST):
            return False
        raise StateError(f"state {self.where}: git push failed: {redact(output.strip())}")

    def write(self, text: str, expected: Version, message: str) -> Version:
        commit = self._commit(expected, {self.path: text}, message)
        if not self._push(commit, expected):
            raise LostCompareAndSwap(self.where)
        return commit

    def write_fenced(self, text: str, expected: Version, message: str, lease: LockInfo) -> Version:
        """One push checks both: the commit is made on the tip where the lock is ``lease``
        and the state is as read at ``expected`` (lease renewals move the tip without
        touching the state), pushed only if the branch still points at that tip."""
        for _ in range(_LOCK_ATTEMPTS):
            tip = self._fetch_tip()
            self.check_lease(None if tip is None else self._lock_at(tip), lease)
            assert tip is not None  # a held lease is a commit on the branch
            same = tip == expected or (
                expected is not None
                and self._file_at(tip, self.path) == self._file_at(expected, self.path)
            )
            if not same:
                raise LostCompareAndSwap(self.where)
            commit = self._commit(tip, {self.path: text}, message)
            if self._push(commit, tip):
                return commit
        raise LostCompareAndSwap(self.where)

    def _lock_at(self, commit: str) -> LockInfo | None:
        text = self._file_at(commit, self.lock_path)
        return None if text is None else LockInfo.from_text(text)

    def replace_lock(self, expected: LockInfo, new: LockInfo, message: str) -> bool:
        """A renewal amends the previous renewal of the same holder (the commit on top, when
        it is one), so a lease adds at most one commit to the state's history between two
        state writes."""
        for _ in range(_LOCK_ATTEMPTS):
            tip = self._fetch_tip()
            if tip is None or self._lock_at(tip) != expected:
                return False
            base = tip
            if expected.same_holder(new) and self._is_renewal(tip, expected):
                base = self._git("rev-parse", f"{tip}^").stdout.strip()
            text = f"{message}\n\n{_RENEWAL}{new.holder}\n"
            if self._push(self._commit(base, {self.lock_path: new.to_text()}, text), tip):
                return True
        return False

    def _is_renewal(self, commit: str, lease: LockInfo) -> bool:
        body = self._git("log", "-1", "--format=%B", commit).stdout
        parents = self._git("log", "-1", "--format=%P", commit).stdout.split()
        return len(parents) == 1 and f"{_RENEWAL}{lease.holder}" in body

    def create_lock(self, info: LockInfo) -> bool:
        for _ in range(_LOCK_ATTEMPTS):
            tip = self._fetch_tip()
            if tip is not None and self._file_at(tip, self.lock_path) is not None:
                return False
            message = f"{info.command}: lock taken\n\nLocked by {info.describe()}.\n"
            if self._push(self._commit(tip, {self.lock_path: info.to_text()}, message), tip):
                return True
        return False  # the branch kept moving: taken as held, and looked at again

    def remove_lock(self, expected: LockInfo | None, message: str) -> LockInfo | None:
        for _ in range(_LOCK_ATTEMPTS):
            tip = self._fetch_tip()
            text = None if tip is None else self._file_at(tip, self.lock_path)
            if text is None:
                return None
            current = LockInfo.from_text(text)
            if expected is not None and current != expected:
                return None
            if self._push(self._commit(tip, {self.lock_path: None}, message + "\n"), tip):
                return current
        raise StateError(
            f"state {self.where}: could not remove the lock: the branch kept moving under "
            f"{_LOCK_ATTEMPTS} attempts"
        )
