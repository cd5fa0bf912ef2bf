"""Real processes for the agent's end-to-end tests: a bare git repository the test pushes to,
the agent (``python -m botctl agent``), and a webhook receiver."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx

from tests import launch
from tests.e2e_support import KEY, Bench, bot_yaml

GIT_ENV = {
    "GIT_AUTHOR_NAME": "test",
    "GIT_AUTHOR_EMAIL": "test@example.com",
    "GIT_COMMITTER_NAME": "test",
    "GIT_COMMITTER_EMAIL": "test@example.com",
}


class GitRemote:
    """A bare repository (the "remote") and a clone the test commits in and pushes from."""

    def __init__(self, root: Path, branch: str = "main") -> None:
        self.bare = root / "remote.git"
        self.clone = root / "clone"
        self.branch = branch
        self._run("git", "init", "--quiet", "--bare", f"--initial-branch={branch}", str(self.bare))
        self._run("git", "init", "--quiet", f"--initial-branch={branch}", str(self.clone))

    @property
    def url(self) -> str:
        return f"file://{self.bare}"

    def source(self, path: str = "bots") -> str:
        return f"git+{self.url}#{self.branch}:{path}"

    def _run(self, *argv: str, cwd: Path | None = None) -> str:
        env = {**os.environ, **GIT_ENV}
        env.pop("GIT_DIR", None)
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=True)
        return done.stdout

    def push(self, files: dict[str, str | None], message: str = "change") -> str:
        """Write (None: delete) ``files`` in the clone, commit, push; the new commit."""
        for name, text in files.items():
            path = self.clone / name
            if text is None:
                path.unlink(missing_ok=True)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        self._run("git", "add", "-A", cwd=self.clone)
        self._run("git", "commit", "--quiet", "--allow-empty", "-m", message, cwd=self.clone)
        self._run("git", "push", "--quiet", str(self.bare), f"HEAD:{self.branch}", cwd=self.clone)
        return self._run("git", "rev-parse", "HEAD", cwd=self.clone).strip()


class Receiver:
    """A webhook receiver on loopback: records every POST body; the first ``fail_first``
    answers are 500 (to see retries)."""

    def __init__(self, fail_first: int = 0) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.attempts = 0
        self.fail_first = fail_first
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                data = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.attempts += 1
                if receiver.attempts <= receiver.fail_first:
                    self.send_response(500)
                    self.end_headers()
                    return
                receiver.raw.append(data)
                receiver.bodies.append(json.loads(data))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.raw: list[bytes] = []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b["event"]["type"] == kind]

    def wait_for(
        self,
        kind: str,
        where: Callable[[dict[str, Any]], bool] = lambda body: True,
        timeout: float = 20,
    ) -> list[dict[str, Any]]:
        """Every ``kind`` event received, once one ``where`` holds for has arrived: the agent
        sends notifications from a queue of their own, after the status it reports."""
        deadline = time.monotonic() + timeout
        while not any(where(body) for body in self.events(kind)):
            if time.monotonic() > deadline:
                raise AssertionError(f"no {kind} notification arrived: {self.bodies}")
            time.sleep(0.02)
        return self.events(kind)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class AgentProcess:
    """``botctl agent`` as a child process, its listener on a free loopback port."""

    def __init__(
        self,
        argv: list[str],
        env: dict[str, str],
        cwd: Path,
        *,
        token: str | None = None,
        **popen: Any,
    ) -> None:
        """``token``: the control token the status is read with (None: none sent)."""
        self.token = token
        args = ["agent", "--listen", "127.0.0.1:0", "--log-format", "json", *argv]
        self.proc = launch.start(
            *args,
            env=env,
            cwd=cwd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **popen,
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.port = 0
        deadline = time.monotonic() + 30
        while not self.port:
            if self.proc.poll() is not None:
                self._reader.join(5)
                raise AssertionError(f"the agent exited: {self.log_text()}")
            assert time.monotonic() < deadline, self.log_text()
            for line in list(self.lines):
                entry = _json(line)
                if entry.get("event") == "listen":
                    self.port = int(entry["message"].rsplit(":", 1)[1])
            time.sleep(0.02)

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))

    def log_text(self) -> str:
        return "\n".join(self.lines)

    def log(self) -> list[dict[str, Any]]:
        return [_json(line) for line in self.lines]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        if self.token is not None:
            kwargs.setdefault("headers", {"Authorization": f"Bearer {self.token}"})
        return httpx.get(self.url + path, timeout=10, **kwargs)

    def poll(
        self,
        path: str,
        check: Callable[[httpx.Response], bool],
        timeout: float = 30,
        what: str = "",
    ) -> httpx.Response:
        """GET ``path`` until ``check`` holds for the answer; that answer."""
        deadline = time.monotonic() + timeout
        while True:
            answer = self.get(path)
            if check(answer):
                return answer
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"timed out waiting for {what}: {answer.text[:2000]}")
            time.sleep(0.05)

    def status(self) -> dict[str, Any]:
        answer = self.get("/status")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def hook(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        return httpx.post(self.url + "/hooks/git", content=body, headers=headers, timeout=10)

    def wait_for(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 30, what: str = ""
    ) -> dict[str, Any]:
        """Poll /status until ``check`` holds; the status then."""
        deadline = time.monotonic() + timeout
        while True:
            doc = self.status()
            if check(doc):
                return doc
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(
                    f"timed out waiting for {what}: {json.dumps(doc)[:3000]}\n{self.log_text()}"
                )
            time.sleep(0.05)

    def wait_log(
        self, check: Callable[[dict[str, Any]], bool], timeout: float = 30, what: str = ""
    ) -> dict[str, Any]:
        """Until a log entry ``check`` holds for is written; that entry."""
        deadline = time.monotonic() + timeout
        while True:
            found = next((e for e in self.log() if check(e)), None)
            if found is not None:
                return found
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"no log entry for {what}:\n{self.log_text()}")
            time.sleep(0.02)

    def stop(self, sig: int, timeout: float = 60) -> int:
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout)
        self._reader.join(5)
        return code

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)


def _json(line: str) -> dict[str, Any]:
    try:
        found = json.loads(line)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def github_headers(body: bytes, secret: str, event: str = "push") -> dict[str, str]:
    digest = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return {
        "X-Hub-Signature-256": f"sha256={digest}",
        "X-GitHub-Event": event,
        "Content-Type": "application/json",
    }


def push_body(after: str, ref: str = "refs/heads/main") -> bytes:
    """A push event's body (as GitHub and GitLab both spell its ``ref`` and ``after``): two
    pushes differ by the commit they bring, so their signed bodies do too."""
    return json.dumps({"ref": ref, "after": after}).encode()


def gitlab_headers(secret: str, event: str = "Push Hook") -> dict[str, str]:
    return {"X-Gitlab-Token": secret, "X-Gitlab-Event": event}


def agent_env(api_url: str, **extra: str) -> dict[str, str]:
    return {"BOTCTL_API_KEY": KEY, "BOTCTL_API_URL": api_url, **extra}


def one_bot(sandbox_factory: Any, workdir: Path) -> Bench:
    """A sandbox with one chatbot, and a configuration directory that declares it."""
    server = sandbox_factory()
    bench = Bench(url=server.url, api_url=server.api_url, workdir=workdir)
    bench.create_bot("bot-1")
    bench.write("support.yaml", bot_yaml("support", "bot-1", settings="temp: 0.2"))
    return bench


def auto_applying(
    bench: Bench, *argv: str, env: dict[str, str] | None = None, **popen: Any
) -> AgentProcess:
    """An agent applying the bench's configuration directory to its sandbox."""
    args = [str(bench.config_dir), "--state", str(bench.state_path), "--auto-apply", *argv]
    return AgentProcess(args, agent_env(bench.api_url, **(env or {})), bench.workdir, **popen)


def by_id(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {b["chatbotId"]: b for b in doc["chatbots"]}


def newest(doc: dict[str, Any]) -> int:
    """The number of the agent's latest finished cycle (0 before its first)."""
    return int(doc["cycles"][0]["number"]) if doc["cycles"] else 0


def idle(doc: dict[str, Any]) -> bool:
    """No cycle in progress and none asked for: with a long --interval, none will start."""
    return doc["cycleInProgress"] is None and doc["pendingCycle"] is None


def last_cycle(doc: dict[str, Any]) -> str | None:
    """The result of the agent's latest cycle; None before its first (an agent that has just
    become active, a slow machine)."""
    return str(doc["cycles"][0]["result"]) if doc["cycles"] else None
