"""``${VAR}`` interpolation in string values, from the environment.

Forms: ``${VAR}``; ``${VAR:-default}`` (the default when VAR is unset or empty, as in a
shell); ``${secret:VAR}`` / ``${secret:VAR:-default}`` (the same, and the value is masked
wherever a plan is shown and never written to a file: see ``botctl.sealing``); ``$${`` is a
literal ``${``. An unset variable without a default, or a malformed reference, is an error
naming it; so is a variable the operator does not expose to the configuration
(``botctl.trust``), default or not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from botctl.sealing import Secret
from botctl.trust import Exposure, exposure_of

_REFERENCE = re.compile(
    r"^(?P<secret>secret:)?(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?$", re.DOTALL
)


class InterpolationError(ValueError):
    pass


@dataclass
class Interpolator:
    environ: Mapping[str, str]
    secrets: set[Secret] = field(default_factory=set)  # resolved values marked secret
    # The secrets the last call resolved: where a secret may be used is the loader's rule.
    last_secrets: list[Secret] = field(default_factory=list)
    # Every whole string that resolved a secret (masked where it stands when the secret is
    # too short for the substring net: see ``values.MIN_MASKED_LENGTH``).
    texts: set[str] = field(default_factory=set)
    exposure: Exposure | None = None  # None: the operator's, as ``environ`` says

    def __post_init__(self) -> None:
        if self.exposure is None:
            self.exposure = exposure_of(self.environ)

    def __call__(self, text: str) -> str:
        self.last_secrets = []
        if "$" not in text:
            return text
        resolved = self._interpolate(text)
        if self.last_secrets:
            self.texts.add(resolved)
        return resolved

    def _interpolate(self, text: str) -> str:
        out: list[str] = []
        i = 0
        while i < len(text):
            if text.startswith("$${", i):
                out.append("${")
                i += 3
            elif text.startswith("${", i):
                end = text.find("}", i + 2)
                if end < 0:
                    raise InterpolationError(
                        f"unclosed '${{' in {text!r} (write $${{ for a literal)"
                    )
                out.append(self._resolve(text[i + 2 : end]))
                i = end + 1
            else:
                out.append(text[i])
                i += 1
        return "".join(out)

    def _resolve(self, reference: str) -> str:
        match = _REFERENCE.match(reference)
        if match is None:
            raise InterpolationError(
                f"malformed reference '${{{reference}}}': expected ${{NAME}}, ${{NAME:-default}} "
                "or ${secret:NAME}"
            )
        name, default = match["name"], match["default"]
        assert self.exposure is not None
        refusal = self.exposure.refusal(name, "secret" if match["secret"] else "text")
        if refusal is not None:
            raise InterpolationError(refusal)
        value = self.environ.get(name)
        if not value and default is not None:
            value = default
        if value is None:
            raise InterpolationError(
                f"environment variable {name} is not set (set it, or give a default: "
                f"${{{name}:-...}})"
            )
        if match["secret"] and value:
            secret = Secret(value, name, defaulted=not self.environ.get(name))
            self.secrets.add(secret)
            self.last_secrets.append(secret)
        return value


def interpolate_tree(
    value: Any,
    interpolate: Interpolator,
    on_error: Callable[[tuple[str | int, ...], str], None],
    path: tuple[str | int, ...] = (),
    on_secret: Callable[[tuple[str | int, ...]], None] | None = None,
) -> Any:
    """Every string of a parsed YAML value interpolated; lists become tuples (the models hold
    immutable sequences). A string whose reference fails keeps its raw text and is reported
    with ``on_error(path, message)``; ``on_secret(path)`` hears of each string that resolved a
    ``${secret:...}``."""
    if isinstance(value, str):
        try:
            resolved = interpolate(value)
        except InterpolationError as exc:
            on_error(path, str(exc))
            return value
        if on_secret is not None and interpolate.last_secrets:
            on_secret(path)
        return resolved
    if isinstance(value, dict):
        return {
            k: interpolate_tree(v, interpolate, on_error, (*path, k), on_secret)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return tuple(
            interpolate_tree(v, interpolate, on_error, (*path, i), on_secret)
            for i, v in enumerate(value)
        )
    return value
