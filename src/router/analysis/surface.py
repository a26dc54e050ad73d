"""The corpus's own words and their index terms, for the typo repair of the corrective stage.

Why compiled at build time (docs/adr/0010, step 1): the words come from titles, keywords,
aliases, headings and section texts, and a format-3 reader never holds every text; scanning them
at query time also cost seconds and tens of MiB on SciFact. The package stores the pairs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from router.analysis.analyzer import Analyzer

__all__ = ["MIN_FUZZY_LENGTH", "SURFACE_TEXT_BUDGET", "surface_texts", "surface_word_stems"]

MIN_FUZZY_LENGTH = 5  # shorter stems have too many neighbours at one edit
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
