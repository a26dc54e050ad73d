"""Stage — corrective query expansion (seed 001 §8.6): synonyms and typo repair, tried once.

Why once and only on weak results: when the lexical result is weak, the likely causes are a
typo ("permisão") or the user's word for a thing the documents name differently. The router
adds the curated synonyms (``_synonyms.yml``) and the closest vocabulary term of each unknown term,
runs the lexical stages again once, and keeps the better of the two — it never invents.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from router.analysis.sound import portuguese_sound_key
from router.analysis.text import fold
from router.package.reader import KnowledgePackage

__all__ = ["Expansion", "FuzzyVocabulary", "SurfaceVocabulary", "SynonymIndex", "expand_terms"]

MIN_FUZZY_LENGTH = 5  # shorter stems have too many neighbours at one edit


class FuzzyVocabulary:
    """Single-deletion neighbourhoods (SymSpell, distance 1) of every indexed term."""

    def __init__(self, package: KnowledgePackage) -> None:
        self.term_ids = package.term_ids
        self.document_frequency = {
            term: _document_frequency(package, term_id)
            for term, term_id in package.term_ids.items()
        }
        self.by_deletion: dict[str, list[str]] = {}
        for term in package.term_ids:
            if len(term) >= MIN_FUZZY_LENGTH - 1:
                for variant in _deletions(term):
                    self.by_deletion.setdefault(variant, []).append(term)

    def correct(self, term: str) -> str | None:
        """The most frequent indexed term one edit away (insert, delete, substitute, swap)."""
        if len(term) < MIN_FUZZY_LENGTH or term in self.term_ids or _has_digit(term):
            return None
        candidates: set[str] = set(self.by_deletion.get(term, ()))
        for variant in _deletions(term):
            if variant in self.term_ids:
                candidates.add(variant)
            candidates.update(self.by_deletion.get(variant, ()))
        candidates = {c for c in candidates if c != term and _one_edit(term, c)}
        if not candidates:
            return None
        return max(candidates, key=lambda c: (self.document_frequency.get(c, 0), c))


class SurfaceVocabulary:
    """The corpus's own words (accent-folded), each with its index term, for typos that change
    the stem: "equipamneto" stems to "equipamnet", far from "equip", but is one swap from the
    word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese sound key).

    Built lazily from the section texts the first time a query needs it.
    """

    def __init__(self, package: KnowledgePackage) -> None:
        analyzer = package.analyzer
        self.term_frequency = {
            term: _document_frequency(package, i) for term, i in package.term_ids.items()
        }
        self.stem_of: dict[str, str] = {}
        self.by_sound: dict[str, set[str]] = {}
        sounds = analyzer.config.language == "portuguese"
        texts = (f"{s.heading} {s.text}" for s in package.sections)
        for word in analyzer.vocabulary_words(texts):
            stem = analyzer.word_stem(word)
            if stem is None or stem not in package.term_ids or len(word) < MIN_FUZZY_LENGTH:
                continue
            folded = fold(word)
            self.stem_of.setdefault(folded, stem)
            if sounds:  # the key needs the accents (ç is /s/, c before a is /k/)
                self.by_sound.setdefault(portuguese_sound_key(word), set()).add(folded)
        self.by_deletion: dict[str, list[str]] = {}
        for folded in self.stem_of:
            for variant in _deletions(folded):
                self.by_deletion.setdefault(variant, []).append(folded)

    def correct(self, word: str) -> str | None:
        """Index term of the corpus word that sounds the same or is one edit away."""
        folded = fold(word.casefold())
        if len(folded) < MIN_FUZZY_LENGTH or _has_digit(folded) or folded in self.stem_of:
            return None
        candidates = (
            set(self.by_sound.get(portuguese_sound_key(word), ())) if self.by_sound else set()
        )
        if not candidates:
            candidates = set(self.by_deletion.get(folded, ()))
            for variant in _deletions(folded):
                if variant in self.stem_of:
                    candidates.add(variant)
                candidates.update(self.by_deletion.get(variant, ()))
            candidates = {c for c in candidates if _one_edit(folded, c)}
        stems = {self.stem_of[c] for c in candidates}
        if not stems:
            return None
        return max(stems, key=lambda stem: (self.term_frequency.get(stem, 0), stem))


class SynonymIndex:
    """Each synonym group as analyzed phrases; a phrase in the question brings in the others."""

    def __init__(self, package: KnowledgePackage) -> None:
        analyze = package.analyzer.terms
        self.groups = [
            [tuple(analyze(phrase)) for phrase in group if analyze(phrase)]
            for group in package.synonyms
        ]

    def expand(self, terms: Sequence[str]) -> list[str]:
        present = set(terms)
        added: list[str] = []
        for group in self.groups:
            if any(phrase and set(phrase) <= present for phrase in group):
                for phrase in group:
                    added += [t for t in phrase if t not in present and t not in added]
        return added


@dataclass(frozen=True)
class Expansion:
    terms: list[str]
    corrections: dict[str, str] = field(default_factory=dict)
    synonyms: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return bool(self.corrections or self.synonyms)


def expand_terms(
    terms: Sequence[str],
    fuzzy: FuzzyVocabulary,
    synonyms: SynonymIndex,
    unknown_words: Mapping[str, str] | None = None,
    surface: SurfaceVocabulary | None = None,
) -> Expansion:
    """Unknown terms replaced by their correction, then synonyms of the result appended.

    A term is corrected at the stem level first (one edit); ``unknown_words`` (query word → its
    unknown stem) are then tried against the corpus's surface words, by sound and by one edit.
    """
    corrections = {t: c for t in dict.fromkeys(terms) if (c := fuzzy.correct(t))}
    if surface is not None:
        for word, stem in (unknown_words or {}).items():
            if stem not in corrections and (found := surface.correct(word)):
                corrections[stem] = found
    corrected = [corrections.get(t, t) for t in terms]
    added = synonyms.expand(corrected)
    return Expansion(corrected + added, corrections, added)


def _has_digit(term: str) -> bool:
    """Codes and numbers (NR-22, 2002) are names, not misspellings."""
    return any(ch.isdigit() for ch in term)


def _one_edit(a: str, b: str) -> bool:
    """Damerau distance exactly 1: one insertion, deletion, substitution or adjacent swap."""
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    start = 0
    while start < len(a) and a[start] == b[start]:
        start += 1
    if len(a) == len(b):
        rest = a[start + 1 :] == b[start + 1 :]
        swapped = (
            a[start : start + 2] == b[start : start + 2][::-1] and a[start + 2 :] == b[start + 2 :]
        )
        return rest or swapped
    return a[start:] == b[start + 1 :]


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _document_frequency(package: KnowledgePackage, term_id: int) -> int:
    return max(p.indptr[term_id + 1] - p.indptr[term_id] for p in package.blocks.values())
