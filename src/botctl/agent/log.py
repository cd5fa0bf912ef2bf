"""The agent's log lines: text (the default) or one JSON object per line, every line passed
through the ``Redactor`` (API keys, ``${secret:}`` values, tokens never appear)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from botctl.agent.status import now_iso
from botctl.values import (
    controls_shown,
    json_controls_escaped,
    mask_secrets_in_text,
    mask_url_credentials,
)

LogFormat = Literal["text", "json"]


class Redactor:
    """Masks every secret the agent knows of in a text: the configuration's secrets (a live
    set, filled as revisions are loaded) and the values of the variables named (API keys,
    the webhook secret, the git token), and the credentials of any URL (its user info, a
    query parameter such as ``access_token``)."""

    def __init__(
        self, environ: Mapping[str, str], variables: Iterable[str], secrets: set[str]
    ) -> None:
        self.environ = environ
        self.variables = set(variables)
        self.secrets = secrets

    def add_variables(self, names: Iterable[str]) -> None:
        self.variables.update(names)

    def values(self) -> list[str]:
        found = {self.environ.get(name, "") for name in self.variables} | set(self.secrets)
        # Longest first, and nothing so short that masking it would garble every line.
        return sorted((v for v in found if len(v) >= 4), key=len, reverse=True)

    def __call__(self, text: str) -> str:
        return mask_url_credentials(mask_secrets_in_text(text, self.values()))


class Log:
    def __init__(self, fmt: LogFormat, write: Callable[[str], None], redact: Redactor) -> None:
        self.fmt = fmt
        self._write = write
        self._redact = redact

    def __call__(self, level: str, event: str, message: str, **fields: Any) -> None:
        if self.fmt == "json":
            line = json.dumps(
                {"time": now_iso(), "level": level, "event": event, "message": message, **fields},
                default=str,
                ensure_ascii=False,
            )
            line = json_controls_escaped(line)
        else:
            extra = " ".join(f"{k}={v}" for k, v in fields.items() if v is not None)
            line = f"{now_iso()} {level:<5} {event}: {message}" + (f" ({extra})" if extra else "")
            line = controls_shown(line)
        self._write(self._redact(line))

    def info(self, event: str, message: str, **fields: Any) -> None:
        self("info", event, message, **fields)

    def warning(self, event: str, message: str, **fields: Any) -> None:
        self("warn", event, message, **fields)

    def error(self, event: str, message: str, **fields: Any) -> None:
        self("error", event, message, **fields)
