"""Personal data out of conversations drawn from real traffic (``botctl conversations pull``),
before anything is written to a file a person commits.

First the run's API keys and ``${secret:...}`` values, in every spelling, are masked as
``(secret)`` (an answer may have echoed one). Then each finding is replaced by its label in
brackets, in this order (an earlier rule's replacement is never matched by a later one):

1. the values the service holds for the chatbot's contacts (4.5), exactly: e-mail
   addresses, telephone numbers, payment ids and payment e-mails, external ids of six
   characters or more -> ``[email]``, ``[phone]``, ``[payment-id]``, ``[contact-id]``;
2. the patterns the project adds (``--redact LABEL=REGEX``, botctl.yaml ``redact``) ->
   ``[LABEL]``;
3. e-mail addresses -> ``[email]``;
4. payment ids: IBANs, card numbers (13 to 19 digits, spaces or dashes between; a mistyped
   card number fails the Luhn check and is still one), and the ids payment providers give
   (``cus_``, ``pm_``, ``pi_``, ``ch_``, ``card_``, ``acct_``, ``sub_``, ``in_``, ``src_``,
   ``tok_``, ``ba_``, ``py_``, ``re_``, ``seti_``, ``txn_``, ``po_``, ``tr_`` and 8 or more
   letters and digits) -> ``[payment-id]``;
5. telephone numbers: 7 to 15 digits, optionally after ``+`` or in parentheses, with
   spaces, dots, dashes, slashes or parentheses between (a date such as 2025-05-02 is not
   one; any other number that long is taken for one: a redaction too many is the safe side)
   -> ``[phone]``;
6. the contacts' names: the whole name in any letter case, and each of its words of two
   letters or more as the contact record spells it or capitalised -> ``[name]``.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from botctl.config.project import REDACT_LABEL
from botctl.values import mask_secrets_in_text

EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\w-])\d(?:[ -]?\d){12,18}(?![\w-])")
_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b")
_PROVIDER = (
    "cus|pm|pi|ch|card|acct|sub|in|src|tok|ba|py|re|seti|txn|po|tr"  # payment providers' ids
)
_PROVIDER_ID = re.compile(rf"\b(?:{_PROVIDER})_[A-Za-z0-9]{{8,}}\b")
# A number ends where no separator and digit follow: a longer one is never cut into a phone.
_PHONE = re.compile(r"(?<![\w+(])(?:\+|\()?\d(?:[\s./()-]{0,3}\d){6,14}(?!\w|[\s./()-]{1,3}\d)")
_DATE = re.compile(r"\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[./-]\d{1,2}[./-]\d{2,4}")
MIN_CONTACT_ID = 6  # shorter external ids ("17") would redact plain numbers


@dataclass(frozen=True)
class Rule:
    """A project's own pattern: what it finds becomes ``[label]``."""

    label: str
    pattern: re.Pattern[str]


def parse_rule(text: str) -> Rule:
    """``LABEL=REGEX`` (``--redact``); ``ValueError`` saying what is wrong."""
    label, sep, pattern = text.partition("=")
    label = label.strip()
    if not sep or not REDACT_LABEL.fullmatch(label) or not pattern:
        raise ValueError(f"{text!r}: give LABEL=REGEX, e.g. order-id=A-\\d+")
    try:
        return Rule(label, re.compile(pattern))
    except re.error as exc:
        raise ValueError(f"{text!r}: not a regular expression ({exc})") from None


@dataclass(frozen=True)
class Contacts:
    """What the service holds about a chatbot's contacts, to find in the text as it is."""

    names: frozenset[str] = frozenset()
    exact: Mapping[str, str] = field(default_factory=dict)  # value -> label

    @classmethod
    def from_records(cls, records: Iterable[Mapping[str, Any]]) -> Contacts:
        """From contact records (2.7) as read; fields of the wrong type are left out."""
        names: set[str] = set()
        exact: dict[str, str] = {}

        def keep(value: Any, label: str, least: int = 3) -> None:
            if isinstance(value, str) and len(value.strip()) >= least:
                exact.setdefault(value.strip(), label)

        for record in records:
            name = record.get("name")
            if isinstance(name, str) and name.strip():
                names.add(" ".join(name.split()))
            keep(record.get("email"), "email")
            keep(record.get("phonenumber"), "phone", 5)
            keep(record.get("external_id"), "contact-id", MIN_CONTACT_ID)
            accounts = record.get("payments_accounts")
            for account in accounts if isinstance(accounts, list) else ():
                if isinstance(account, Mapping):
                    keep(account.get("payments_id"), "payment-id", 4)
                    keep(account.get("payments_email"), "email")
        return cls(frozenset(names), exact)


def _alternation(values: Iterable[str], flags: int = 0) -> re.Pattern[str] | None:
    ordered = sorted(set(values), key=lambda v: (-len(v), v))  # the longest first
    if not ordered:
        return None
    # Not inside a word, nor inside a replacement made already ("[name]").
    alternatives = "|".join(map(re.escape, ordered))
    return re.compile(rf"(?<![\w\[])(?:{alternatives})(?![\w\]])", flags)


@dataclass
class Redactor:
    """Redacts text by the rules above, counting what it replaced by label."""

    contacts: Contacts = field(default_factory=Contacts)
    rules: Sequence[Rule] = ()
    # The run's API keys and ${secret:...} values: masked before anything else, every
    # spelling (values.mask_secrets_in_text), should an answer have echoed one.
    secrets: Iterable[str] = ()
    found: Counter[str] = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._secrets = tuple(self.secrets)
        self._exact = _alternation(self.contacts.exact)
        self._whole_names = _alternation(self.contacts.names, re.IGNORECASE)
        parts = {
            spelled
            for name in self.contacts.names
            for word in name.split()
            if len(word) >= 2
            for spelled in (word, word[:1].upper() + word[1:])
        }
        self._name_parts = _alternation(parts)

    def _sub(self, pattern: re.Pattern[str] | None, label: str, text: str) -> str:
        if pattern is None:
            return text

        def replace(match: re.Match[str]) -> str:
            self.found[label] += 1
            return f"[{label}]"

        return pattern.sub(replace, text)

    def _checked(self, pattern: re.Pattern[str], label: str, text: str, ok: Any) -> str:
        def replace(match: re.Match[str]) -> str:
            if not ok(match.group()):
                return match.group()
            self.found[label] += 1
            return f"[{label}]"

        return pattern.sub(replace, text)

    def __call__(self, text: str) -> str:
        masked = mask_secrets_in_text(text, self._secrets)
        if masked != text:
            self.found["secret"] += 1
            text = masked
        if self._exact is not None:
            exact = self.contacts.exact

            def replace(match: re.Match[str]) -> str:
                label = exact[match.group()]
                self.found[label] += 1
                return f"[{label}]"

            text = self._exact.sub(replace, text)
        for rule in self.rules:
            text = self._sub(rule.pattern, rule.label, text)
        text = self._sub(EMAIL, "email", text)
        text = self._sub(_IBAN, "payment-id", text)
        text = self._sub(_CARD, "payment-id", text)
        text = self._sub(_PROVIDER_ID, "payment-id", text)
        text = self._checked(_PHONE, "phone", text, _is_phone)
        text = self._sub(self._whole_names, "name", text)
        return self._sub(self._name_parts, "name", text)


def _is_phone(found: str) -> bool:
    digits = sum(c.isdigit() for c in found)
    return 7 <= digits <= 15 and not _DATE.fullmatch(found.strip())
