"""systemd's service protocol (``sd_notify``), spoken only when systemd asks for it: with
``Type=notify`` the agent says ``READY=1`` once it listens and ``STOPPING=1`` on a signal; with
``WatchdogSec=`` it says ``WATCHDOG=1`` every half of that period *while its loop moves* (the
``status.Watchdog`` that ``/healthz`` answers from). A stalled agent stops saying it, and
systemd restarts it: the supervisor's half of the watchdog, as the kubelet's liveness probe is
in Kubernetes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Mapping

from botctl.agent.status import Watchdog


class SystemdNotifier:
    def __init__(self, environ: Mapping[str, str]) -> None:
        path = environ.get("NOTIFY_SOCKET", "")
        # "@name" is a socket in the abstract namespace.
        self.address = "\0" + path[1:] if path.startswith("@") else path
        usec = environ.get("WATCHDOG_USEC", "")
        pid = environ.get("WATCHDOG_PID", "")
        mine = not pid or pid == str(os.getpid())
        self.watchdog_every = int(usec) / 2e6 if usec.isdigit() and int(usec) and mine else None

    @property
    def enabled(self) -> bool:
        return bool(self.address)

    def send(self, message: str) -> None:
        """One notification; never an error (systemd gone, no socket: nothing to tell) and
        never a wait: a datagram the reader has no room for is dropped (a blocking send to a
        full queue would stop the event loop)."""
        if not self.address:
            return
        with (
            contextlib.suppress(OSError),
            socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock,
        ):
            sock.setblocking(False)
            sock.sendto(message.encode(), self.address)

    async def keep_watch(self, watchdog: Watchdog) -> None:
        """Say ``WATCHDOG=1`` every half period while the loop is not stalled."""
        if self.watchdog_every is None:
            return
        while True:
            if watchdog.stalled_for() is None:
                self.send("WATCHDOG=1")
            await asyncio.sleep(self.watchdog_every)
