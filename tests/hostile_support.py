"""A deliberately broken HTTP service on 127.0.0.1, and botctl run against it as a user runs
it: a child process, measured (exit code, output, peak memory).

The server is a ``socketserver`` thread server writing raw bytes, so it can say what no
well-behaved framework would let it: a 3 GB body, a gzip bomb, a Content-Length it never
honours, one byte every few seconds, a redirect loop. The first path segment chooses the
behaviour and the second which request suffers it; everything else answers as the service
does::

    http://127.0.0.1:PORT/<behaviour>/<target>/api/v1/...    target: list | attributes | writes

It echoes the Authorization header it receives into its error pages, JSON messages and
redirect targets, escaped the way servers and proxies do, so the tests can check that the
key leaves botctl in no form at all.
"""

from __future__ import annotations

import functools
import json
import select
import socket
import socketserver
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.launch import Run, run_measured

# Printable ASCII, so a header can carry it, but escaped differently by JSON, repr and URLs.
KEY = 'sk-hostile/0dd+"key"=\\x%41'
CHATBOT = "bot-1"
DRIP_PAUSE = 2.0  # seconds between the bytes of a dripping answer
GIB = 1 << 30


@functools.cache
def gzip_bomb(decoded: int = 2 * GIB) -> bytes:
    """One valid gzip member of ``decoded`` zero bytes, about 1/1000 of that in size (2 GiB in
    2 MB). Built from one compressed MiB repeated: after a full flush the compressor starts
    afresh, so every further MiB of zeros compresses to the same bytes."""
    block = bytes(1 << 20)
    packer = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    first = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)  # with the gzip header
    repeat = packer.compress(block) + packer.flush(zlib.Z_FULL_FLUSH)
    final = packer.flush(zlib.Z_FINISH)[:-8]  # the last (empty) block, without the trailer
    crc = 0
    for _ in range(decoded >> 20):
        crc = zlib.crc32(block, crc)
    trailer = crc.to_bytes(4, "little") + (decoded & 0xFFFFFFFF).to_bytes(4, "little")
    return first + repeat * ((decoded >> 20) - 1) + final + trailer


class Exchange(socketserver.StreamRequestHandler):
    """One connection, one request, one (mis)behaving answer, then close."""

    server: HostileServer

    def handle(self) -> None:
        request_line = self.rfile.readline(8192).decode("latin-1").strip()
        if not request_line:
            return
        self.method, self.path, _ = request_line.split(" ", 2)
        self.headers: dict[str, str] = {}
        while line := self.rfile.readline(8192).decode("latin-1").strip():
            name, _, value = line.partition(":")
            self.headers[name.strip().lower()] = value.strip()
        length = int(self.headers.get("content-length", "0"))
        self.body = self.rfile.read(length) if length else b""
        behaviour, target, endpoint = self._route()
        self.server.log.append((self.method, self.path))
        try:
            if behaviour is not None and self._targeted(target, endpoint):
                BEHAVIOURS[behaviour](self)
            else:
                self.honest(endpoint)
        except (BrokenPipeError, ConnectionResetError):
            pass  # botctl stopped reading, as it should

    def _route(self) -> tuple[str | None, str, str]:
        parts = self.path.split("/api/v1", 1)
        prefix = [p for p in parts[0].split("/") if p]
        endpoint = parts[1] if len(parts) > 1 else self.path
        if len(prefix) == 2 and prefix[0] in BEHAVIOURS:
            return prefix[0], prefix[1], endpoint
        return None, "", endpoint

    def _targeted(self, target: str, endpoint: str) -> bool:
        if target == "everything":
            return True
        if target == "list":
            return endpoint == "/get-chatbots"
        if target == "attributes":
            return self.method == "GET" and endpoint.endswith("/custom-attributes")
        return target == "writes" and self.method != "GET"

    # -- writing answers --------------------------------------------------------------------

    def head(self, status: str, headers: dict[str, str]) -> None:
        lines = [
            f"HTTP/1.1 {status}",
            "Connection: close",
            *(f"{k}: {v}" for k, v in headers.items()),
        ]
        self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))

    def answer(
        self, status: str, body: bytes, kind: str = "application/json", **extra: str
    ) -> None:
        self.head(status, {"Content-Type": kind, "Content-Length": str(len(body)), **extra})
        self.wfile.write(body)

    def answer_json(self, status: str, value: Any) -> None:
        self.answer(status, json.dumps(value).encode())

    def honest(self, endpoint: str) -> None:
        """What the service answers (API-NOTES), for every request not under attack."""
        if endpoint == "/get-chatbots" and self.server.chatbots is not None:
            self.answer("200 OK", self.server.chatbots)
        elif endpoint == "/get-chatbots":
            self.answer_json("200 OK", {"chatbots": [{"id": CHATBOT, "name": "Support"}]})
        elif self.method == "GET" and endpoint.endswith("/custom-attributes"):
            self.answer_json("200 OK", {"message": "Success", "data": []})
        elif endpoint == "/update-chatbot-settings":
            self.answer_json("202 Accepted", {"message": "Your changes are saved."})
        elif endpoint.startswith("/chatbots/"):
            self.answer_json("200 OK", {"message": "Success", "data": json.loads(self.body)})
        else:
            self.answer_json("404 Not Found", {"message": "Resource not found"})

    @property
    def auth(self) -> str:
        return self.headers.get("authorization", "")

    def wait_for_hangup(self, limit: float = 120.0) -> None:
        """Hold the connection, answering nothing, until the client gives up."""
        end = time.monotonic() + limit
        while time.monotonic() < end:
            readable, _, _ = select.select([self.connection], [], [], 0.2)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                return


class HostileServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Exchange)
        self.log: list[tuple[str, str]] = []
        self.chatbots: bytes | None = None  # another honest chatbot list, when a test sets one

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def api_url(self, behaviour: str, target: str) -> str:
        return f"{self.root}/{behaviour}/{target}/api/v1"


@contextmanager
def hostile_server() -> Iterator[HostileServer]:
    gzip_bomb()  # built before serving: building it takes seconds, longer than a deadline
    server = HostileServer()
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# -- behaviours --------------------------------------------------------------------------------


def huge(ex: Exchange) -> None:
    """3 GB, honestly declared, produced as it is read."""
    size = 3 * GIB
    ex.head("200 OK", {"Content-Type": "application/json", "Content-Length": str(size)})
    _stream(ex, size, chunked=False)


def huge_chunked(ex: Exchange) -> None:
    """3 GB without any length: only counting the bytes can stop it."""
    ex.head("200 OK", {"Content-Type": "application/json", "Transfer-Encoding": "chunked"})
    _stream(ex, 3 * GIB, chunked=True)


def _stream(ex: Exchange, size: int, *, chunked: bool) -> None:
    chunk = b'{"chatbots": [' + b" " * ((1 << 20) - 14)
    sent = 0
    while sent < size:
        data = chunk if sent == 0 else b" " * len(chunk)
        ex.wfile.write(b"%x\r\n%s\r\n" % (len(data), data) if chunked else data)
        sent += len(data)


def bomb(ex: Exchange) -> None:
    """2 MB of gzip that inflate to 2 GiB."""
    ex.answer("200 OK", gzip_bomb(), **{"Content-Encoding": "gzip"})


def drip(ex: Exchange) -> None:
    """A valid answer, one byte every DRIP_PAUSE seconds: no read ever times out."""
    body = json.dumps({"chatbots": [], "data": []}).encode()
    ex.head("200 OK", {"Content-Type": "application/json", "Content-Length": str(len(body))})
    for byte in body:
        ex.wfile.write(bytes([byte]))
        ex.wfile.flush()
        time.sleep(DRIP_PAUSE)


def silent(ex: Exchange) -> None:
    """Takes the request, never answers."""
    ex.wait_for_hangup()


def truncated(ex: Exchange) -> None:
    """Promises 1000 bytes, sends 20, hangs up."""
    ex.head("200 OK", {"Content-Type": "application/json", "Content-Length": "1000"})
    ex.wfile.write(b'{"chatbots": [{"id":')


def shaped(value: Any, status: str = "200 OK") -> Callable[[Exchange], None]:
    def behave(ex: Exchange) -> None:
        ex.answer(status, value if isinstance(value, bytes) else json.dumps(value).encode())

    return behave


def html_error(ex: Exchange) -> None:
    """A proxy's error page, quoting the request's headers back (key included)."""
    page = (
        "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>"
        f"<h1>Bad Gateway</h1><pre>Authorization: {ex.auth}</pre></body></html>"
    )
    ex.answer("502 Bad Gateway", page.encode(), "text/html; charset=utf-8")


def html_ok(ex: Exchange) -> None:
    """A login page where JSON was expected, with the key in a hidden field."""
    page = f"<html><head><title>Sign in</title></head><input value='{ex.auth}'></html>"
    ex.answer("200 OK", page.encode(), "text/html")


def echo_json(ex: Exchange) -> None:
    """A JSON error quoting the key JSON-escaped."""
    ex.answer_json("400 Bad Request", {"message": f"Invalid request: {json.dumps(ex.auth)}"})


def empty(ex: Exchange) -> None:
    ex.answer("200 OK", b"")


def redirect_away(ex: Exchange) -> None:
    """To another host and port, the key percent-encoded in the target."""
    target = f"http://127.0.0.2:9/api/v1{ex.path}?token={quote(ex.auth, safe='')}"
    ex.answer("302 Found", b"", "text/plain", Location=target)


def redirect_loop(ex: Exchange) -> None:
    ex.answer("301 Moved Permanently", b"", "text/plain", Location=ex.path)


def not_found(ex: Exchange) -> None:
    """What every path of a wrong base URL answers."""
    ex.answer("404 Not Found", b"<html><title>404 Not Found</title></html>", "text/html")


def _nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


BEHAVIOURS: dict[str, Callable[[Exchange], None]] = {
    "huge": huge,
    "huge-chunked": huge_chunked,
    "bomb": bomb,
    "drip": drip,
    "silent": silent,
    "truncated": truncated,
    "invalid-json": shaped(b'{"chatbots": [{"id": "bot-1",'),
    "nan": shaped(b'{"chatbots": [{"id": "bot-1", "temp": NaN}], "data": [{"x": NaN}]}'),
    "list-for-object": shaped([[CHATBOT], ["tier"]]),
    "string-for-list": shaped({"chatbots": "all of them", "data": "none"}),
    "strings-for-records": shaped({"chatbots": [CHATBOT], "data": ["tier"]}),
    "deep-json": shaped(_nested(100_000)),
    "deep-record": shaped(
        {
            "chatbots": [{"id": CHATBOT, "name": json.loads(_nested(50))}],
            "data": [{"name": "tier", "type": "text", "label": json.loads(_nested(50))}],
        }
    ),
    # Off the contract but readable: fields of the wrong type, unknown and missing fields.
    "odd-records": shaped(
        {
            "chatbots": [
                {"id": 7, "name": None},
                {
                    "id": CHATBOT,
                    "name": 5,
                    "styles": "dark",
                    "temp": "hot",
                    "initial_messages": "hi",
                    "collect_customer_information": {"email": [1]},
                    "created_at": {"nested": [1]},
                },
            ],
            "message": "Success",
            "data": [
                {"name": "tier", "type": "text", "label": "Tier", "extra": {"x": [1]}},
                {"name": "score", "type": "select", "archived": 0},
                {"label": "no name"},
            ],
        }
    ),
    "html-error": html_error,
    "html-ok": html_ok,
    "echo-json": echo_json,
    "empty": empty,
    "redirect-away": redirect_away,
    "redirect-loop": redirect_loop,
    "not-found": not_found,
    "no-such-read": shaped({"message": "Method Not Allowed"}, "405 Method Not Allowed"),
}


# -- running botctl: tests.launch.run_measured, under this address-space limit -------------------

# A regression must fail the test, not take the machine: the child may not map more.
ADDRESS_SPACE_LIMIT = 4 * GIB


def run_botctl(args: list[str], *, env: dict[str, str], cwd: Path, timeout: float = 180.0) -> Run:
    """``python -m botctl ARGS`` in a child process (``tests.launch``), measured."""
    return run_measured(args, env=env, cwd=cwd, timeout=timeout, address_space=ADDRESS_SPACE_LIMIT)


def written_files(root: Path) -> str:
    """Everything botctl wrote under ``root`` (state, lock, exported YAML), as text."""
    return "\n".join(p.read_text(errors="replace") for p in sorted(root.rglob("*")) if p.is_file())
