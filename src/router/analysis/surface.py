"""The corpus's own words and their index terms, for the typo repair of the corrective stage.

Why compiled at build time (docs/adr/0010, step 1): the words come from titles, keywords,
aliases, headings and section texts, and a format-3 reader never holds every text; scanning them
at query time also cost seconds and tens of MiB on SciFact. The package stores the tables the
repair reads (``surface_tables``: word → term, sound → words), searched in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from router.analysis.analyzer import Analyzer
from router.analysis.sound import portuguese_sound_key
from router.analysis.text import fold

__all__ = [
    "MAX_FUZZY_LENGTH",
    "MIN_FUZZY_LENGTH",
    "SURFACE_TEXT_BUDGET",
    "SURFACE_WORD_SEPARATOR",
    "surface_tables",
    "surface_texts",
    "surface_word_stems",
]

SURFACE_WORD_SEPARATOR = "\x1f"
"""Joins the folded words that share a sound key (``surface_tables``)."""

MIN_FUZZY_LENGTH = 5  # shorter stems have too many neighbours at one edit
MAX_FUZZY_LENGTH = 32
"""Longer tokens are not repaired: no word of the languages served is longer (Portuguese's
longest has 29 letters), and a token's one-edit spellings grow with its length — a 2,000-letter
token had 108k of them, 6 s and 227 MiB of one request."""
SURFACE_TEXT_BUDGET = 1_000_000
"""Characters of text whose words the surface vocabulary indexes: every title, heading, keyword
and alias, then section bodies in order until the budget is spent. All of SciFact's 7.5 M
characters took 12 s and 47 MiB to index for a rare repair; the sample knowledge fits whole."""


def surface_texts(
    names: Sequence[str], bodies: Iterable[str], budget: int = SURFACE_TEXT_BUDGET
) -> list[str]:
    """Names of things first (titles, keywords, aliases, headings), then bodies to ``budget``."""
    texts = list(names)
    spent = sum(len(text) for text in texts)
    for body in bodies:
        if spent + len(body) > budget:
            break
        texts.append(body)
        spent += len(body)
    return texts


def surface_word_stems(
    analyzer: Analyzer, texts: Iterable[str], known_terms: set[str] | dict[str, int]
) -> list[tuple[str, str]]:
    """(word, index term) for every word of ``texts`` long enough to repair whose stem is
    indexed, sorted by word."""
    pairs = []
    for word in sorted(analyzer.vocabulary_words(texts)):
        stem = analyzer.word_stem(word)
        if stem is not None and stem in known_terms and len(word) >= MIN_FUZZY_LENGTH:
            pairs.append((word, stem))
    return pairs


def surface_tables(
    pairs: Iterable[tuple[str, str]], by_sound: bool
) -> tuple[dict[str, str], dict[str, str]]:
    """The typo repair's two tables from the (word, term) pairs: folded word → term (the first
    pair wins), and — for Portuguese, ``by_sound`` — sound key → its folded words, sorted and
    joined with ``SURFACE_WORD_SEPARATOR``. The key needs the accents (ç is /s/, c before a
    is /k/), so it is taken from the word as written."""
    stem_of: dict[str, str] = {}
    sounds: dict[str, set[str]] = {}
    for word, stem in pairs:
        folded = fold(word)
        stem_of.setdefault(folded, stem)
        if by_sound:
            sounds.setdefault(portuguese_sound_key(word), set()).add(folded)
    joined = {key: SURFACE_WORD_SEPARATOR.join(sorted(words)) for key, words in sounds.items()}
    return stem_of, joined
