"""The registry of resource kinds: every kind a run handles, in operation order.

A kind is registered once, by the module that defines it being listed here (``settings``,
``attributes``); a kind defined elsewhere (a test's) is registered with ``register``. See
``resources.kind`` for the interface.
"""

from __future__ import annotations

from collections.abc import Iterator

from botctl import plan as plan_module
from botctl.resources import attributes, settings
from botctl.resources.kind import ResourceKind

_KINDS: dict[str, ResourceKind] = {}
_ORDERED: list[tuple[ResourceKind, ...]] = [()]  # kept sorted as kinds come and go


def register(kind: ResourceKind) -> None:
    """Make ``kind`` part of every run (its name and operation kinds must be new)."""
    if kind.name in _KINDS and _KINDS[kind.name] is not kind:
        raise ValueError(f"a resource kind named {kind.name!r} is already registered")
    plan_module.register_resource(kind.name, kind.order, kind.operation_kinds)
    _KINDS[kind.name] = kind
    _sort()


def unregister(name: str) -> None:
    """Take a kind out of the registry (tests that define their own)."""
    kind = _KINDS.pop(name)
    plan_module.unregister_resource(kind.name, kind.operation_kinds)
    _sort()


def _sort() -> None:
    _ORDERED[0] = tuple(sorted(_KINDS.values(), key=lambda kind: kind.order))


def kinds() -> tuple[ResourceKind, ...]:
    """Every registered kind, in operation order."""
    return _ORDERED[0]


def kind_of(resource: str) -> ResourceKind:
    """The kind of a change's, an operation's or a dependency's ``resource``."""
    try:
        return _KINDS[resource]
    except KeyError:
        raise ValueError(f"unknown resource kind {resource!r}") from None


def state_keys() -> Iterator[str]:
    """Every key of a state record that a kind keeps."""
    return (key for kind in kinds() for key in kind.state_keys)


register(settings.KIND)
register(attributes.KIND)
