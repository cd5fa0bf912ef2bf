"""How alike two answers are: one measure for ``expect.similarTo``, for how much an answer
changed between a chatbot and its baseline (``botctl test --baseline``), and for the
near-duplicate questions ``botctl conversations pull`` drops.

The measure is the Jaccard index of the two texts' sets of character trigrams, after
normalising them::

    normalise(t) = t in Unicode NFKC, case-folded, every run of characters that are not
                   letters or digits replaced by one space, with one space at each end
    grams(t)     = the set of the 3-character substrings of normalise(t)
                   (a text with no letter or digit has none)
    similarity(a, b) = |grams(a) & grams(b)| / |grams(a) | grams(b)|
                       (intersection over union; 1.0 when both are empty)

So 1.0 means the same words in the same spelling (punctuation, case and spacing aside), 0.0
nothing in common, and in between the share of three-letter pieces the two answers have in
common: a reviewer can count them. Deterministic, symmetric and offline: no model, no
embedding, the same number on every machine. Word order matters only inside a word and
across the space between two words ("refund takes" shares " ta" with "takes").
"""

from __future__ import annotations

import re
import unicodedata

GRAM = 3
_NOT_WORD = re.compile(r"[\W_]+")


def normalise(text: str) -> str:
    """The text the measure compares (see the module's formula)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = _NOT_WORD.sub(" ", folded).strip()
    return f" {words} " if words else ""


def grams(text: str) -> frozenset[str]:
    """The character trigrams of ``normalise(text)``."""
    flat = normalise(text)
    return frozenset(flat[i : i + GRAM] for i in range(len(flat) - GRAM + 1))


def similarity(a: str, b: str) -> float:
    """The Jaccard index of the trigram sets, 0.0 to 1.0 (rounded to 4 places, so that a
    report and a threshold compare the same number)."""
    first, second = grams(a), grams(b)
    if not first and not second:
        return 1.0
    return round(len(first & second) / len(first | second), 4)
