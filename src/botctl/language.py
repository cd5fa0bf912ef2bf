"""Which language a text is written in: the heuristic behind ``expect.answersIn``.

No model and no dictionary download, so it is deterministic and offline, and honest about
what it is (README, "Conversation tests"):

1. **Script.** Letters are counted by writing system. A text whose letters are mostly of one
   script that only one of the recognised languages uses is that language: Greek (``el``),
   Hebrew (``he``), Arabic (``ar``), Thai (``th``), Hangul (``ko``), kana (``ja``; Han
   characters with kana are Japanese too), Han without kana (``zh``), Devanagari (``hi``).
   Cyrillic is ``uk`` when it has Ukrainian-only letters (U+0456, U+0457, U+0454, U+0491),
   else ``ru``.
2. **Function words.** For Latin script, the words of the text are matched against short
   lists of each language's most frequent function words (articles, pronouns,
   prepositions); the language with the most hits wins, if it has at least two and clearly
   more than the runner-up. Otherwise the language is unknown.

A short answer ("OK", a number, a name) has no language: ``detect`` returns None and the
expectation fails saying so.
"""

from __future__ import annotations

import re
import unicodedata


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split(" "))


_FUNCTION_WORDS: dict[str, frozenset[str]] = {
    "en": _words(
        "the a an and or of to in is are was were be been it this that with for on at by "
        "from you your we our they not have has can will would do does please thank"
    ),
    "de": _words(
        "der die das und oder ist sind war ein eine einen nicht mit für auf von zu im ich "
        "sie wir ihr es dem den des bitte danke kann haben wird auch"
    ),
    "fr": _words(
        "le la les et ou est sont un une des de du pas avec pour sur dans je vous nous il "
        "elle ce cette qui que merci peut avez être au aux"
    ),
    "es": _words(
        "el la los las y o es son un una de del no con para por en yo usted nosotros que "
        "gracias puede está están su sus al lo"
    ),
    "it": _words(
        "il lo la gli le e o è sono un una di del non con per su in io lei noi che grazie "
        "può sia della nel alla"
    ),
    "pt": _words(
        "o a os as e ou é são um uma de do da não com para por em eu você nós que obrigado "
        "pode está seu sua no na"
    ),
    "nl": _words(
        "de het een en of is zijn was niet met voor op van te in ik je u wij we dat die "
        "dank kan heeft wordt ook"
    ),
}

# Script -> the language it identifies (by the start of the Unicode character name).
_SCRIPTS = {
    "GREEK": "el",
    "HEBREW": "he",
    "ARABIC": "ar",
    "THAI": "th",
    "HANGUL": "ko",
    "HIRAGANA": "ja",
    "KATAKANA": "ja",
    "CJK": "zh",
    "DEVANAGARI": "hi",
    "CYRILLIC": "ru",
}
LANGUAGES: frozenset[str] = frozenset({*_FUNCTION_WORDS, *_SCRIPTS.values(), "uk"})
_UKRAINIAN = set("\u0456\u0457\u0454\u0491\u0406\u0407\u0404\u0490")
_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)?")


def _script(char: str) -> str:
    name = unicodedata.name(char, "")
    for script in _SCRIPTS:
        if name.startswith(script):
            return script
    return "LATIN" if "LATIN" in name else "OTHER"


def detect(text: str) -> str | None:
    """The language of ``text`` (a code of ``LANGUAGES``), or None when it cannot tell."""
    counts: dict[str, int] = {}
    for char in text:
        if char.isalpha():
            script = _script(char)
            counts[script] = counts.get(script, 0) + 1
    letters = sum(counts.values())
    if not letters:
        return None
    if (
        counts.get("HIRAGANA", 0) + counts.get("KATAKANA", 0) > 0
        and (counts.get("HIRAGANA", 0) + counts.get("KATAKANA", 0) + counts.get("CJK", 0)) * 2
        > letters
    ):
        return "ja"
    top, top_count = max(counts.items(), key=lambda item: item[1])
    if top != "LATIN" and top in _SCRIPTS and top_count * 2 > letters:
        if top == "CYRILLIC" and any(c in _UKRAINIAN for c in text):
            return "uk"
        return _SCRIPTS[top]
    words = [w.lower() for w in _WORD.findall(text)]
    hits = sorted(
        (
            (sum(w in vocabulary for w in words), code)
            for code, vocabulary in _FUNCTION_WORDS.items()
        ),
        reverse=True,
    )
    (best, code), (second, _) = hits[0], hits[1]
    if best >= 2 and best > second * 1.5:
        return code
    return None


def name(code: str) -> str:
    """A language code as people read it in a message."""
    return _NAMES.get(code, code)


_NAMES = {
    "en": "English",
    "de": "German",
    "fr": "French",
    "es": "Spanish",
    "it": "Italian",
    "pt": "Portuguese",
    "nl": "Dutch",
    "el": "Greek",
    "he": "Hebrew",
    "ar": "Arabic",
    "th": "Thai",
    "ko": "Korean",
    "ja": "Japanese",
    "zh": "Chinese",
    "hi": "Hindi",
    "ru": "Russian",
    "uk": "Ukrainian",
}
