"""The chat operation's answers (4.2): one JSON ``{"text": ...}``, or data-only server-sent
events ending with ``data: [DONE]``, read here as the WHATWG event-stream format has it: events
are separated by a blank line, an event's ``data:`` lines are joined with a newline, one space
after the colon is not part of the data, comment lines (``:``) and other fields are ignored."""

from __future__ import annotations

from dataclasses import dataclass

DONE = "[DONE]"


@dataclass(frozen=True)
class ChatAnswer:
    text: str
    seconds: float  # from sending the request to the last byte of the answer
    first_event_seconds: float | None  # streamed: to the first byte of the first event
    streamed: bool = False  # the service answered with events (it may ignore stream: true)


def parse_events(body: str) -> str:
    """The text of a data-only event stream; ``ValueError`` when it does not end with
    ``data: [DONE]`` (the answer was cut short)."""
    parts: list[str] = []
    data: list[str] = []
    for line in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line == "":
            if data:
                event = "\n".join(data)
                if event == DONE:
                    return "".join(parts)
                parts.append(event)
            data = []
            continue
        if line.startswith(":"):
            continue
        field, _, value = line.partition(":")
        if field == "data":
            data.append(value[1:] if value.startswith(" ") else value)
    if data and "\n".join(data) == DONE:
        return "".join(parts)
    raise ValueError(f"no data: {DONE} at the end ({len(parts)} event(s) read)")
