"""Every git process botctl starts, started one way: with an environment a repository cannot
turn into a command, with its operands apart from its options, under a deadline, in a process
group of its own that is killed whole.

A repository's files name repositories (a ``git+`` state in ``botctl.yaml``, an agent's
source), so none of what they name may reach git as anything but an operand:

- ``check_repository`` refuses a repository that starts with ``-`` (git would read
  ``--upload-pack=<command>`` as an option) or names a transport other than file, https, ssh
  and git (``ext::<command>`` runs a command); callers put ``--end-of-options`` before their
  operands as well;
- ``environment``: ``GIT_ALLOW_PROTOCOL`` (those four transports, for every URL git meets,
  submodules and redirects included), ``GIT_PROTOCOL_FROM_USER=0``, no prompt, ssh in batch
  mode with connect and keep-alive timeouts, http's low-speed limit, no hooks, no file-system
  monitor, and ``safe.bareRepository=explicit`` (a bare repository committed inside a
  checkout is never taken for the repository git works in);
- ``Git.run``: one deadline per git process; on expiry, or on ``cancel`` (the agent stopping),
  the whole process group is killed (a fetch's ``git-remote-https`` and ``ssh`` included).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO

from botctl.defaults import DEFAULT_GIT_TIMEOUT, GIT_TIMEOUT_ENV
from botctl.errors import BotctlError

ALLOWED_PROTOCOLS = ("file", "https", "ssh", "git")
# The user's repository, if botctl runs inside one, must never be what git works on.
REPOSITORY_VARIABLES = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY")
# Below 1 KB/s for 30 s, an https transfer is abandoned; ssh gives up connecting after 20 s
# and a silent server after four keep-alives 15 s apart.
SSH_COMMAND = (
    "ssh -o BatchMode=yes -o ConnectTimeout=20 -o ServerAliveInterval=15 -o ServerAliveCountMax=4"
)
_CONFIG = (
    ("http.lowSpeedLimit", "1000"),
    ("http.lowSpeedTime", "30"),
    ("safe.bareRepository", "explicit"),
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("protocol.allow", "never"),
    *((f"protocol.{name}.allow", "always") for name in ALLOWED_PROTOCOLS),
)
_SCHEME = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://")
_TRANSPORT = re.compile(r"^(?P<transport>[A-Za-z][A-Za-z0-9+.-]*)::")  # ext::..., fd::...


class GitError(BotctlError):
    """git could not be run, or was stopped: past its deadline, or cancelled."""


class GitTimeout(GitError):
    pass


class GitCancelled(GitError):
    pass


def check_repository(repo: str) -> str | None:
    """Why ``repo`` may not be handed to git (None: it may): an option in disguise, a control
    character, or a transport other than file, https, ssh and git."""
    if not repo:
        return "no repository given"
    if repo.startswith("-"):
        return "a repository may not start with '-' (git would take it for an option)"
    if any(not c.isprintable() for c in repo):
        return "a repository may not hold control characters"
    transport = _TRANSPORT.match(repo)
    if transport:
        return _not_allowed(transport["transport"])
    scheme = _SCHEME.match(repo)
    if scheme and scheme["scheme"].lower() not in ALLOWED_PROTOCOLS:
        return _not_allowed(scheme["scheme"].lower())
    return None  # an allowed URL, ssh's user@host:path, or a local path (file)


def _not_allowed(name: str) -> str:
    return (
        f"transport {name!r} is not allowed: botctl's git uses only {', '.join(ALLOWED_PROTOCOLS)}"
    )


def default_timeout(environ: Mapping[str, str] | None = None) -> float:
    """Seconds one git process may take: ``BOTCTL_GIT_TIMEOUT``, else the default."""
    text = (os.environ if environ is None else environ).get(GIT_TIMEOUT_ENV, "")
    try:
        value = float(text) if text else DEFAULT_GIT_TIMEOUT
    except ValueError:
        value = DEFAULT_GIT_TIMEOUT
    return value if 0 < value < float("inf") else DEFAULT_GIT_TIMEOUT


def environment(
    base: Mapping[str, str],
    *,
    config: Sequence[tuple[str, str]] = (),
    extra: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """git's environment: ``base`` without the variables that would point git at another
    repository, hardened (see the module), with ``config`` entries after the operator's own
    ``GIT_CONFIG_COUNT`` ones, and ``extra``."""
    env = {k: v for k, v in base.items() if k not in REPOSITORY_VARIABLES}
    env.update(
        {
            "LC_ALL": "C",
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ALLOW_PROTOCOL": ":".join(ALLOWED_PROTOCOLS),
            "GIT_PROTOCOL_FROM_USER": "0",
        }
    )
    if not base.get("GIT_SSH_COMMAND") and not base.get("GIT_SSH"):
        env["GIT_SSH_COMMAND"] = SSH_COMMAND
    try:
        count = int(base.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    for key, value in (*_CONFIG, *config):
        env[f"GIT_CONFIG_KEY_{count}"] = key
        env[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    env["GIT_CONFIG_COUNT"] = str(count)
    env.update(extra or {})
    return env


# Every git process group alive in this process: what a last-resort exit kills.
_LIVE: set[int] = set()
_LIVE_LOCK = threading.Lock()


def kill_all() -> None:
    """Kill every git process group botctl started and that is still running."""
    with _LIVE_LOCK:
        groups = list(_LIVE)
    for group in groups:
        _kill_group(group)


def _kill_group(group: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


@dataclass
class Git:
    """Runs git for one user (a source, a state backend, a revision reader): its environment,
    its deadline per process (``timeout`` seconds), and ``what`` to call it in a message.
    ``cancel`` kills what runs and refuses what would start."""

    env: dict[str, str]
    timeout: float
    what: str = "git"
    _running: set[subprocess.Popen[bytes]] = field(default_factory=set, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _cancelled: bool = False

    def run(
        self,
        args: Sequence[str],
        *,
        input: bytes | None = None,
        timeout: float | None = None,
    ) -> subprocess.CompletedProcess[bytes]:
        """``git ARGS`` to the end, output captured; raises ``GitTimeout`` past the deadline
        (the process group killed), ``GitCancelled``, or ``GitError`` when git cannot run."""
        with self.popen(args, stdin=input is not None, timeout=timeout) as proc:
            out, err = proc.communicate(input)
        return subprocess.CompletedProcess(list(args), proc.returncode, out, err)

    @contextlib.contextmanager
    def popen(
        self, args: Sequence[str], *, stdin: bool = False, timeout: float | None = None
    ) -> Iterator[subprocess.Popen[bytes]]:
        """``git ARGS`` running, its output to read as it comes (a stream never held
        whole); the same deadline and cancellation as ``run``, checked when it ends."""
        limit = self.timeout if timeout is None else timeout
        proc = self._start(args, stdin)
        expired = threading.Event()

        def expire() -> None:
            expired.set()
            _kill_group(proc.pid)

        timer = threading.Timer(limit, expire)
        timer.daemon = True
        timer.start()
        try:
            yield proc
            proc.wait()
        except BaseException:
            if expired.is_set():  # the caller read a stream cut short by the deadline
                raise GitTimeout(_late(args, limit)) from None
            if self._cancelled:
                raise GitCancelled(_stopped(args, self.what)) from None
            raise
        finally:
            timer.cancel()
            if proc.poll() is None:  # the caller stopped early (an error, a signal)
                _kill_group(proc.pid)
                proc.wait()
            self._forget(proc)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                _close(stream)
        if expired.is_set():
            raise GitTimeout(_late(args, limit))
        if self._cancelled:
            raise GitCancelled(_stopped(args, self.what))

    def _start(self, args: Sequence[str], stdin: bool) -> subprocess.Popen[bytes]:
        with self._lock:
            if self._cancelled:
                raise GitCancelled(f"git {_verb(args)} not started: {self.what} is shutting down")
            try:
                proc = subprocess.Popen(
                    ["git", *args],
                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=self.env,
                    start_new_session=True,  # its own process group, killed whole
                )
            except OSError as exc:
                raise GitError(f"cannot run git: {exc.strerror}") from None
            self._running.add(proc)
        with _LIVE_LOCK:
            _LIVE.add(proc.pid)
        return proc

    def _forget(self, proc: subprocess.Popen[bytes]) -> None:
        with self._lock:
            self._running.discard(proc)
        with _LIVE_LOCK:
            _LIVE.discard(proc.pid)

    def cancel(self) -> None:
        """Kill every git process group running for this user; start no other."""
        with self._lock:
            self._cancelled = True
            running = list(self._running)
        for proc in running:
            _kill_group(proc.pid)


def _stopped(args: Sequence[str], what: str) -> str:
    return f"git {_verb(args)} was stopped: {what} is shutting down"


def _late(args: Sequence[str], limit: float) -> str:
    return f"git {_verb(args)} did not finish within {limit:g} s and was stopped"


def _verb(args: Sequence[str]) -> str:
    """The git command of ``args`` (``fetch``), past the global options."""
    for i, arg in enumerate(args):
        if arg == "-C":
            continue
        if i > 0 and args[i - 1] == "-C":
            continue
        if not arg.startswith("-"):
            return arg
    return "command"


def _close(stream: IO[bytes] | None) -> None:
    if stream is not None:
        with contextlib.suppress(OSError):
            stream.close()


def said(result: subprocess.CompletedProcess[bytes]) -> str:
    """What git said on failing: its error output, else its exit code."""
    text = result.stderr.decode("utf-8", "replace").strip()
    return text or f"exit {result.returncode}"


@dataclass(frozen=True)
class Blob:
    oid: str
    size: int  # its whole size
    head: bytes  # its first ``limit`` bytes (all of it when it is no larger)


def read_blobs(git: Git, args: Sequence[str], oids: Sequence[str], limit: int) -> Iterator[Blob]:
    """The blobs ``oids``, in order, read through one ``git ARGS cat-file --batch`` as a
    stream: only the first ``limit`` bytes of each are kept (the rest is read past, never
    held), so memory stays bounded whatever the repository holds."""
    if not oids:
        return
    with git.popen([*args, "cat-file", "--batch"], stdin=True) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        feeder = threading.Thread(target=_feed, args=(proc.stdin, oids), daemon=True)
        feeder.start()
        out = proc.stdout
        for oid in oids:
            header = out.readline().decode("ascii", "replace").split()
            if len(header) != 3 or not header[2].isdigit():
                raise GitError(f"git cat-file: no blob {oid} ({' '.join(header) or 'no answer'})")
            size = int(header[2])
            head = out.read(min(size, limit))
            left = size - len(head)
            while left > 0:
                chunk = out.read(min(left, 1 << 16))
                if not chunk:
                    break
                left -= len(chunk)
            out.read(1)  # the newline after each blob
            yield Blob(oid, size, head)
        feeder.join()


def _feed(stdin: IO[bytes], oids: Sequence[str]) -> None:
    """Writes the requests from a thread of its own: git answers as it reads them, and a
    pipe full both ways would block both."""
    with contextlib.suppress(OSError):
        for oid in oids:
            stdin.write(f"{oid}\n".encode("ascii"))
        stdin.close()
