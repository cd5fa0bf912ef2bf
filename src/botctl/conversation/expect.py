"""One answer against its expectations: each failing expectation as a sentence that says which
one failed and quotes the answer (shortened, on one line, inert, secrets masked)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable

from botctl import language
from botctl.config.document import Expect
from botctl.conversation.similarity import similarity
from botctl.defaults import DEFAULT_MIN_SIMILARITY
from botctl.service.sse import ChatAnswer
from botctl.values import controls_shown, mask_secrets_in_text

QUOTE_LIMIT = 160


def clip(text: str, secrets: Iterable[str] = (), limit: int = QUOTE_LIMIT) -> str:
    """``text`` fit for a report: secrets masked first (a cut never leaves half of one),
    whitespace runs as one space, control characters as ``\\xNN``, at most ``limit``
    characters (the cut marked with ``...``)."""
    flat = " ".join(mask_secrets_in_text(text, secrets).split())
    flat = controls_shown(flat)
    if len(flat) > limit:
        flat = flat[: limit - 3] + "..."
    return flat


def quote(text: str, secrets: Iterable[str] = (), limit: int = QUOTE_LIMIT) -> str:
    """``clip``, in double quotes (as JSON writes a string)."""
    return json.dumps(clip(text, secrets, limit), ensure_ascii=False)


def _phrases(value: str | tuple[str, ...]) -> tuple[str, ...]:
    return (value,) if isinstance(value, str) else value


def check(expect: Expect | None, answer: ChatAnswer, secrets: Iterable[str] = ()) -> list[str]:
    """What ``answer`` fails of ``expect``; empty when it passes."""
    if expect is None:
        return []
    secrets = tuple(secrets)
    text = answer.text
    said = quote(text, secrets)
    failures = []

    def fold(value: str) -> str:
        return value.casefold() if expect.ignoreCase else value

    how = " (ignoring case)" if expect.ignoreCase else ""
    for phrase in _phrases(expect.contains):
        if fold(phrase) not in fold(text):
            failures.append(f"contains {quote(phrase, secrets)}{how}: not in the answer {said}")
    for phrase in _phrases(expect.notContains):
        if fold(phrase) in fold(text):
            failures.append(f"notContains {quote(phrase, secrets)}{how}: in the answer {said}")
    if expect.matches is not None and not re.search(expect.matches, text):
        failures.append(f"matches {quote(expect.matches, secrets)}: no match in the answer {said}")
    if expect.maxSeconds is not None and answer.seconds > expect.maxSeconds:
        failures.append(f"maxSeconds {expect.maxSeconds:g}: the answer took {answer.seconds:.2f} s")
    if expect.maxSecondsToFirstEvent is not None:
        first = answer.first_event_seconds
        if first is None:
            failures.append(
                f"maxSecondsToFirstEvent {expect.maxSecondsToFirstEvent:g}: the service did not "
                "stream the answer (no events)"
            )
        elif first > expect.maxSecondsToFirstEvent:
            failures.append(
                f"maxSecondsToFirstEvent {expect.maxSecondsToFirstEvent:g}: the first event "
                f"came after {first:.2f} s"
            )
    if expect.json_ is not None:
        failures += _json(expect.json_, text, said)
    if expect.similarTo is not None:
        least = DEFAULT_MIN_SIMILARITY if expect.minSimilarity is None else expect.minSimilarity
        alike = similarity(expect.similarTo, text)
        if alike < least:
            failures.append(
                f"similarTo {quote(expect.similarTo, secrets)}: similarity {alike:.2f}, needs "
                f"{least:g}: the answer {said}"
            )
    if expect.answersIn is not None:
        found = language.detect(text)
        if found != expect.answersIn:
            seen = "no language botctl recognises" if found is None else language.name(found)
            failures.append(
                f"answersIn {expect.answersIn} ({language.name(expect.answersIn)}): the answer "
                f"reads as {seen}: {said}"
            )
    return failures


def _json(schema: dict[str, object], text: str, said: str) -> list[str]:
    from jsonschema.validators import validator_for

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        return [f"json: the answer is not JSON ({exc.msg}): {said}"]
    validator = validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(value), key=lambda e: list(e.absolute_path))
    if not errors:
        return []
    first = errors[0]
    where = "/".join(str(p) for p in first.absolute_path) or "(the whole answer)"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    # The validator's own words quote the value: not shown, the answer is quoted instead.
    return [f"json: at {where}: fails the schema's {first.validator!r}{more}: {said}"]
