"""Which ``Host`` the listener answers: its defence against DNS rebinding, where a web page
on ``attacker.example`` has its name re-pointed at ``127.0.0.1`` and the browser, believing
it talks to the page's own site, reads the agent's ``/status``. The browser still sends
``Host: attacker.example``: refusing names the agent was not told of ends the attack.

An IP address is always accepted (rebinding needs a name: the probes of Kubernetes and
Prometheus's scrapes ask by the pod's address), so is ``localhost``; any other name only when
given with ``--allowed-host`` (``*.example.com`` for its subdomains, ``*`` for any name).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class AllowedHosts:
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, names: Iterable[str]) -> AllowedHosts:
        return cls(frozenset(n.strip().lower().rstrip(".") for n in names if n.strip()))

    @property
    def any(self) -> bool:
        return "*" in self.names

    def allows(self, header: str | None) -> bool:
        """``header`` is a ``Host`` header's value (with or without a port)."""
        if self.any:
            return True
        name = _name(header)
        if name is None:
            return False
        if name == "localhost" or _is_address(name):
            return True
        return name in self.names or any(
            pattern.startswith("*.") and name.endswith(pattern[1:]) for pattern in self.names
        )


def _name(header: str | None) -> str | None:
    """The host of a ``Host`` value: ``[::1]:9464`` -> ``::1``, ``Example.COM.:80`` ->
    ``example.com``; None when there is none."""
    if not header:
        return None
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        return value[1:end] if end > 0 else None
    name = value.rsplit(":", 1)[0] if value.count(":") == 1 else value
    return name.rstrip(".") or None


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True
