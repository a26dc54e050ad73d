"""A Portuguese sound key: spellings that sound alike share one key ("calibrassão", "calibração").

Why: the most frequent Portuguese misspellings swap letters that spell the same sound (ç/ss/c/sc,
s/z, x/ch, qu/c, doubled letters, a dropped h). They change the stem, so neither the stemmer nor a
one-edit correction of stems reaches the right term; comparing sound keys of surface words does.
The key is only a matching aid for typo repair, never an index term.
"""

from __future__ import annotations

import re

from router.analysis.text import fold

__all__ = ["portuguese_sound_key"]

# Order matters: digraphs before single letters, soft c/g before hard ones.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), replacement)
    for pattern, replacement in (
        (r"ç", "s"),
        (r"[sx]?c(?=[eiéêí])", "s"),
        (r"ss", "s"),
        (r"z", "s"),
        (r"ch", "x"),
        (r"qu(?=[eiéêí])", "k"),
        (r"q", "k"),
        (r"c", "k"),
        (r"g(?=[eiéêí])", "j"),
        (r"lh", "li"),
        (r"nh", "ni"),
        (r"ph", "f"),
        (r"y", "i"),
        (r"w", "v"),
        (r"h", ""),
        (r"(.)\1+", r"\1"),
    )
)


def portuguese_sound_key(word: str) -> str:
    """Sound key of one lower-case word (accents folded at the end)."""
    key = word.casefold()
    for pattern, replacement in _RULES:
        key = pattern.sub(replacement, key)
    return fold(key)
