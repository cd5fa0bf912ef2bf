"""The agent's sources and redaction, on real directories and git repositories."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from botctl.agent.log import Log, Redactor
from botctl.agent.source import (
    DirectorySource,
    GitSource,
    RevisionLimits,
    Source,
    SourceError,
    open_source,
)
from tests.agent.support import GitRemote


def test_a_directory_revision_changes_with_its_yaml_files_only(tmp_path: Path) -> None:
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "a.yaml").write_text("a: 1\n")
    source = open_source(str(tmp_path), tmp_path / "cache")
    assert isinstance(source, DirectorySource)
    first = source.fetch()
    assert (first.directory / "bots" / "a.yaml").read_text() == "a: 1\n"  # a copy of its own
    (tmp_path / "notes.txt").write_text("not configuration")
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "x.yaml").write_text("ignored: true\n")
    assert source.fetch() == first
    (tmp_path / "bots" / "a.yaml").write_text("a: 2\n")
    second = source.fetch()
    assert second.id != first.id
    # The earlier revision is still as it was, until it is no longer kept.
    assert (first.directory / "bots" / "a.yaml").read_text() == "a: 1\n"
    assert (second.directory / "bots" / "a.yaml").read_text() == "a: 2\n"
    source.retain({second.id})
    assert not first.directory.exists()
    assert second.directory.is_dir()
    error = f"{second.directory}/bots/a.yaml:1:1: wrong"
    assert source.display(error) == f"{os.path.relpath(tmp_path)}/bots/a.yaml:1:1: wrong"


def test_a_source_that_is_neither_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SourceError, match="not a directory"):
        open_source(str(tmp_path / "nowhere"), tmp_path / "cache")
    # A git URL without its path is named as the agent's source, not as a state.
    with pytest.raises(SourceError) as caught:
        open_source("git+https://github.com/acme/bots.git#main", tmp_path / "cache")
    assert str(caught.value).startswith("source 'git+https://github.com/acme/bots.git#main'")
    assert "(:. for the root)" in str(caught.value)
    assert "state" not in str(caught.value)


def test_a_git_source_is_fetched_shallow_into_its_own_cache(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    remote.push({"bots/a.yaml": "a: 1\n", "other/b.yaml": "b: 1\n"}, "one")
    second = remote.push({"bots/a.yaml": "a: 2\n"}, "two")
    source = open_source(remote.source("bots"), tmp_path / "cache")
    assert isinstance(source, GitSource)
    revision = source.fetch()
    assert revision.id == second
    assert (revision.directory / "a.yaml").read_text() == "a: 2\n"
    assert not (revision.directory / "other").exists()  # only the path
    assert revision.directory.is_relative_to(tmp_path / "cache")
    shallow = source.git_dir / "shallow"
    assert shallow.read_text().strip() == second  # the tip only
    # An error naming a file of the revision names it as the source does.
    text = f"{revision.directory}/a.yaml:1:4: wrong"
    assert source.display(text) == "bots/a.yaml:1:4: wrong"


def test_git_errors_never_show_credentials(tmp_path: Path) -> None:
    url = "git+https://robot:hunter2-secret@127.0.0.1:9/acme/bots.git#main:bots"
    source = GitSource(url, tmp_path / "cache")
    assert "hunter2" not in source.description
    with pytest.raises(SourceError) as caught:
        source.fetch()
    assert "hunter2" not in str(caught.value)
    assert "git fetch failed" in str(caught.value)


def test_the_redactor_masks_keys_secrets_and_their_spellings() -> None:
    secrets: set[str] = {'quote"secret'}
    redact = Redactor({"BOTCTL_API_KEY": "sk-live-123456"}, ["BOTCTL_API_KEY", "UNSET"], secrets)
    lines: list[str] = []
    log = Log("json", lines.append, redact)
    log.info("x", 'key sk-live-123456 and secret quote"secret', detail='quote"secret')
    assert "sk-live-123456" not in lines[0]
    assert "quote" not in lines[0]


def test_an_https_token_is_sent_as_a_header_and_never_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TLS server on loopback (a throwaway self-signed certificate, which git is told not
    to verify) records what git sends; the fetch fails, and its error holds no token."""
    import base64
    import shutil
    import ssl
    import subprocess
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed (it makes the test's certificate)")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    request = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    subprocess.run(
        ["openssl", *request, "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"],
        check=True,
        capture_output=True,
    )
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization", ""))
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = "ghp_tokenvalue_5f1e2d"
    monkeypatch.setenv("BOTCTL_GIT_TOKEN", token)
    monkeypatch.setenv("GIT_SSL_NO_VERIFY", "1")
    try:
        port = server.server_address[1]
        source = GitSource(f"git+https://127.0.0.1:{port}/acme/bots.git#main:bots", tmp_path)
        with pytest.raises(SourceError) as caught:
            source.fetch()
    finally:
        server.shutdown()
        server.server_close()
    expected = "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()
    assert expected in seen
    assert token not in str(caught.value)
    assert expected.split()[1] not in str(caught.value)


# --- #23: a revision is untrusted input ----------------------------------------------------


def test_a_directory_revision_with_a_symlink_or_a_fifo_is_invalid_naming_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "bots").mkdir()
    (tmp_path / "bots" / "a.yaml").write_text("a: 1\n")
    source = open_source(str(tmp_path / "bots"), tmp_path / "cache")
    assert source.fetch().problem is None
    (tmp_path / "bots" / "passwd.yaml").symlink_to("/etc/passwd")
    refused = source.fetch()
    assert refused.problem is not None
    assert "bots/passwd.yaml: a symbolic link" in refused.problem
    assert not refused.directory.exists()  # nothing copied
    (tmp_path / "bots" / "passwd.yaml").unlink()
    os.mkfifo(tmp_path / "bots" / "pipe.yaml")  # never opened: a FIFO would block the read
    fifo = source.fetch()
    assert fifo.problem is not None
    assert "pipe.yaml: not a regular file" in fifo.problem
    (tmp_path / "bots" / "pipe.yaml").unlink()
    (tmp_path / "bots" / "linked").symlink_to(tmp_path)
    assert "linked: a symbolic link" in (source.fetch().problem or "")


def test_a_git_revision_past_a_limit_is_invalid_naming_the_limit(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    many = {f"bots/b{i}.yaml": f"n: {i}\n" for i in range(6)}
    first = remote.push({**many, "bots/notes.bin": "x" * 5000}, "six files")
    limits = RevisionLimits(files=5, file_bytes=64, total_bytes=100)
    source = GitSource(remote.source("bots"), tmp_path / "cache", limits=limits)
    refused = source.fetch()
    assert refused.id == first
    assert refused.problem == (
        "more than 5 YAML files: over the limit of files in a revision (--max-revision-files)"
    )
    assert source.fetch() == refused  # refused once, not listed again
    remote.push({f"bots/b{i}.yaml": None for i in range(2, 6)}, "two files")
    assert source.fetch().problem is None  # the large file that is not YAML is not read
    remote.push({"bots/big.yaml": "y" * 65}, "one large file")
    problem = source.fetch().problem or ""
    assert problem == "bots/big.yaml: 65 bytes, over the limit of 64 bytes per file"
    remote.push({"bots/big.yaml": "y" * 60, "bots/c.yaml": "z" * 60}, "too much in all")
    assert "over the limit of bytes in a revision (--max-revision-bytes)" in (
        source.fetch().problem or ""
    )


def test_a_git_revision_without_the_sources_path_is_invalid(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    remote.push({"other/a.yaml": "a: 1\n"}, "no bots")
    source = GitSource(remote.source("bots"), tmp_path / "cache")
    problem = source.fetch().problem or ""
    assert problem.startswith("bots/: not in this revision")


def test_only_yaml_is_unpacked_and_memory_stays_bounded_whatever_the_commit_holds(
    tmp_path: Path,
) -> None:
    """A 64 MiB file of zeros beside the YAML (it packs to a few KiB): never read whole, never
    written to the cache; measured in a process of its own (its own peak, VmHWM: ru_maxrss
    would count the test process it was forked from)."""
    remote = GitRemote(tmp_path / "git")
    remote.push({"bots/a.yaml": "a: 1\n"}, "yaml")
    with (remote.clone / "bots" / "zeros.bin").open("wb") as out:
        for _ in range(64):
            out.write(bytes(1 << 20))
    commit = remote.push({}, "zeros")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from botctl.agent.source import GitSource\n"
        f"r = GitSource({remote.source('bots')!r}, Path({str(tmp_path / 'cache')!r})).fetch()\n"
        "names = sorted(p.name for p in r.directory.iterdir())\n"
        "status = Path('/proc/self/status').read_text().splitlines()\n"
        "peak = next(int(l.split()[1]) for l in status if l.startswith('VmHWM:')) // 1024\n"
        "print(json.dumps([r.id, names, peak]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", "import json\n" + script], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    revision, names, peak = json.loads(done.stdout)
    assert revision == commit
    assert names == ["a.yaml"]
    assert peak < 100, peak  # MiB: the interpreter and botctl (about 55), not the file


def test_agents_sharing_a_cache_dir_take_slots_of_their_own_and_keep_their_revisions(
    tmp_path: Path,
) -> None:
    """Two agents started from one directory share the default --cache-dir: each takes a
    slot, so one's new revision never deletes the revision the other runs (a cycle of the
    other failed with "no such file")."""
    config, cache = tmp_path / "bots", tmp_path / "cache"
    config.mkdir()
    (config / "a.yaml").write_text("one: 1\n")
    first = open_source(str(config), cache)
    running = first.fetch()
    (config / "a.yaml").write_text("one: 2\n")
    second = open_source(str(config), cache)
    newer = second.fetch()
    second.retain({newer.id})
    assert newer.id != running.id
    assert (running.directory / "a.yaml").read_text() == "one: 1\n"
    assert first.slot is not None
    assert second.slot is not None
    assert (first.slot.path.name, second.slot.path.name) == ("slot-0", "slot-1")
    # The first agent gone, its slot is free again: a restarted agent finds its copies.
    first.slot.release()
    again = open_source(str(config), cache)
    assert again.slot is not None
    assert again.slot.path.name == "slot-0"
    assert again.fetch().id == newer.id


def test_a_killed_agent_frees_its_slot(tmp_path: Path) -> None:
    """The slot's lock is the kernel's: a process killed outright releases it."""
    cache = tmp_path / "cache"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; "
            "from botctl.agent.cachedir import claim_slot; "
            f"claim_slot(Path({str(cache)!r})); print('held', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        assert slot_of(open_source(str(tmp_path), cache)) == "slot-1"
    finally:
        holder.kill()
        holder.wait(10)
    assert slot_of(open_source(str(tmp_path), cache)) == "slot-0"


def slot_of(source: Source) -> str:
    assert source.slot is not None
    return source.slot.path.name
