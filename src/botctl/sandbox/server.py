"""Serving the sandbox over real HTTP: socket binding, uvicorn setup, a background-thread runner."""

from __future__ import annotations

import ipaddress
import logging
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn
from starlette.applications import Starlette

from botctl import contract
from botctl.sandbox.app import create_app
from botctl.sandbox.config import SandboxConfig
from botctl.sandbox.middleware import DroppedConnection
from botctl.sandbox.runtime import Runtime

START_TIMEOUT_S = 10.0


class _HideDroppedConnections(logging.Filter):
    """A dropped connection is a fault the user asked for, not a crash worth a traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, DroppedConnection)


_error_log = logging.getLogger("uvicorn.error")
if not any(isinstance(f, _HideDroppedConnections) for f in _error_log.filters):
    _error_log.addFilter(_HideDroppedConnections())


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind before serving, so port 0 resolves to a known port and "in use" fails early.

    Raises OSError (e.g. address in use) for the caller to report.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on sockets whose proto says TCP,
    # and without it every response (head and body written apart) waits ~40 ms for an ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.bind((host, port))
        # Listen at once: the URL is printed before uvicorn starts, and a client that connects
        # in between must queue, not be refused.
        sock.listen(2048)
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def make_server(app: Starlette, log_level: str = "warning") -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        lifespan="off",  # create_app needs no startup events
        # h11: the reference HTTP/1.1 implementation, whose handling of a drop is known.
        http="h11",
        log_level=log_level,
        access_log=False,
        timeout_graceful_shutdown=2,
    )
    return uvicorn.Server(config)


@dataclass(frozen=True)
class RunningSandbox:
    url: str
    api_url: str
    app: Starlette
    config: SandboxConfig

    @property
    def runtime(self) -> Runtime:
        rt: Runtime = self.app.state.sandbox
        return rt


@contextmanager
def run_in_thread(
    config: SandboxConfig, host: str = "127.0.0.1", port: int = 0
) -> Iterator[RunningSandbox]:
    """Serve `config` on a background thread until the block exits; yields the URLs."""
    app = create_app(config)
    runtime: Runtime = app.state.sandbox
    try:
        sock = bind_socket(host, port)
    except OSError:
        runtime.store.close()
        raise
    server = make_server(app)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the sandbox server did not start")
            time.sleep(0.005)
        url = url_of(sock)
        yield RunningSandbox(url, url + contract.API_PREFIX, app, config)
    finally:
        server.should_exit = True
        thread.join(timeout=START_TIMEOUT_S)
        sock.close()
        runtime.store.close()
