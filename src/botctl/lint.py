"""Warning codes: every warning botctl prints has one, so it can be silenced where it is known
to be harmless (``spec.lint.disable`` in a document, ``lint.disable`` in botctl.yaml,
``--disable-warning`` for one run) and turned into an error (``validate --strict``).

A code is written as its number (``BC101``) or its name (``attribute-name-style``); both are
accepted wherever codes are. The README's "Warning codes" table lists the same entries.

A bottom layer (plain data, no imports of botctl) so that every layer that warns can name its
code: the configuration (BC1xx, BC2xx), the plan's resources and the apply (BC3xx). A warning
travels as text that carries its code (``warning[BC302]: ...``), which is what
``without_disabled`` silences by.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class WarningCode:
    code: str
    name: str
    summary: str


ATTRIBUTE_NAME_STYLE = WarningCode(
    "BC101",
    "attribute-name-style",
    "an attribute name the API accepts but a stricter guide of the service does not "
    "(lowercase letters, digits and '_')",
)
UNKNOWN_MODEL = WarningCode(
    "BC102",
    "unknown-model",
    "a settings model missing from botctl's list, accepted with --allow-unknown-models",
)
SHORT_SECRET = WarningCode(
    "BC103",
    "short-secret",
    "a ${secret:VAR} value shorter than 8 characters: guessable from any fingerprint of it, "
    "and too short to mask in free text without mangling other text",
)
OVERRIDES_SET = WarningCode(
    "BC201",
    "overrides-set",
    "a chatbot declares an attribute that an attribute set it includes also declares: the "
    "chatbot's declaration is used",
)
UNUSED_SET = WarningCode(
    "BC202", "unused-attribute-set", "an AttributeSet that no chatbot includes"
)
UNMATCHED_DEFAULTS = WarningCode(
    "BC203", "defaults-match-nothing", "a Defaults document whose selector matches no chatbot"
)
UNMATCHED_TEST = WarningCode(
    "BC204",
    "test-matches-nothing",
    "a ConversationTest whose selector matches no chatbot",
)
READ_BACK = WarningCode(
    "BC301",
    "read-back",
    "after apply, the service reads a value back differently from what was sent, or the "
    "read-back failed",
)

SENT_WHOLE = WarningCode(
    "BC302",
    "sent-whole",
    "a nested object (styles, collectCustomerInformation) is sent whole while the values of "
    "sub-fields the configuration does not declare cannot be read: the service may reset them",
)

READ_REFUSED = WarningCode(
    "BC303",
    "read-refused",
    "the service refused a read (HTTP 405 or 501): what it would have shown is compared with "
    "what botctl last applied instead",
)

UNMANAGEABLE_DECLARED = WarningCode(
    "BC304",
    "unmanageable-attribute",
    "the configuration declares an attribute the service holds outside the contract's rules "
    "(a name or type the contract does not have): botctl does not write it",
)
SALT_ONLY_STATE = WarningCode(
    "BC305",
    "salt-only-state",
    "the state keeps fingerprints keyed with a salt stored in it (format 3): whoever can read "
    "it can check guesses at its secrets, until `botctl state rekey`",
)

RENAME_SOURCE_MISSING = WarningCode(
    "BC306",
    "rename-source-missing",
    "an attribute is renamedFrom a name the service does not hold: it is planned as a new "
    "attribute, with no contact value to move",
)

CONTACTS_NOT_COUNTED = WarningCode(
    "BC307",
    "contacts-not-counted",
    "the plan archives or renames an attribute and could not count the contacts carrying a "
    "value for it (--no-contact-reads, the --max-contact-reads cap, a service without the "
    "contact read)",
)
CODES: tuple[WarningCode, ...] = (
    ATTRIBUTE_NAME_STYLE,
    UNKNOWN_MODEL,
    SHORT_SECRET,
    OVERRIDES_SET,
    UNUSED_SET,
    UNMATCHED_DEFAULTS,
    UNMATCHED_TEST,
    READ_BACK,
    SENT_WHOLE,
    READ_REFUSED,
    UNMANAGEABLE_DECLARED,
    SALT_ONLY_STATE,
    RENAME_SOURCE_MISSING,
    CONTACTS_NOT_COUNTED,
)
_BY_WORD = {word: c for c in CODES for word in (c.code, c.name)}


def lookup(word: str) -> WarningCode | None:
    return _BY_WORD.get(word.strip()) or _BY_WORD.get(word.strip().upper())


def unknown_code(word: str) -> str:
    """The message for a word that names no warning code."""
    close = difflib.get_close_matches(word, list(_BY_WORD), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"{word!r} is not a warning code{hint}; known: " + ", ".join(
        f"{c.code} {c.name}" for c in CODES
    )


def codes_of(words: Iterable[str]) -> tuple[frozenset[str], list[str]]:
    """The codes named by ``words`` (numbers or names), and the words that name none."""
    codes: set[str] = set()
    unknown: list[str] = []
    for word in words:
        found = lookup(word)
        if found is None:
            unknown.append(word)
        else:
            codes.add(found.code)
    return frozenset(codes), unknown


def coded(code: WarningCode, message: str) -> str:
    """A warning that is not about a place in the configuration, as every output shows it."""
    return f"warning[{code.code}]: {message}"


_CODE_IN_TEXT = re.compile(r"(?:^|: )(?:warning|error)\[(BC\d{3})\]: ")


def code_of(text: str) -> str | None:
    """The code a formatted warning carries, if any."""
    match = _CODE_IN_TEXT.search(text)
    return match[1] if match else None


def without_disabled(warnings: Iterable[str], disabled: frozenset[str]) -> tuple[str, ...]:
    """The formatted warnings whose code is not silenced."""
    return tuple(w for w in warnings if code_of(w) not in disabled)
