"""Stage — corrective query expansion (seed 001 §8.6): synonyms and typo repair, tried once.

Why once and only on weak results: when the lexical result is weak, the likely causes are a
typo ("permisão") or the user's word for a thing the documents name differently. The router
adds the curated synonyms (``_synonyms.yml``) and the closest vocabulary term of each unknown term,
runs the lexical stages again once, and keeps the better of the two — it never invents.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from router.analysis.sound import portuguese_sound_key
from router.analysis.surface import MIN_FUZZY_LENGTH
from router.analysis.text import fold
from router.package.reader import KnowledgePackage

__all__ = ["Expansion", "FuzzyVocabulary", "SurfaceVocabulary", "SynonymIndex", "expand_terms"]


class FuzzyVocabulary:
    """Indexed terms one edit away from an unknown term (Damerau distance 1).

    Why candidates are generated at query time (Norvig) instead of a SymSpell deletion index:
    the index cost 73 MiB for SciFact's 30k terms — more than half a Worker isolate — while a
    repair runs only on weak queries and checks ~50 × length candidates against the term dict.
    """

    def __init__(self, package: KnowledgePackage) -> None:
        self.term_ids = package.term_ids
        self.document_frequency = {
            term: _document_frequency(package, term_id)
            for term, term_id in package.term_ids.items()
        }
        self.alphabet = _alphabet(package.term_ids)

    def correct(self, term: str) -> str | None:
        """The most frequent indexed term one edit away (insert, delete, substitute, swap)."""
        if len(term) < MIN_FUZZY_LENGTH or term in self.term_ids or _has_digit(term):
            return None
        candidates = {c for c in _edits(term, self.alphabet) if c in self.term_ids}
        if not candidates:
            return None
        return max(candidates, key=lambda c: (self.document_frequency.get(c, 0), c))


class SurfaceVocabulary:
    """The corpus's own words (accent-folded), each with its index term, for typos that change
    the stem: "equipamneto" stems to "equipamnet", far from "equip", but is one swap from the
    word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese sound key).

    Built lazily the first time a query needs it, from the word/term pairs the build compiled
    (``router.analysis.surface``).
    """

    def __init__(self, package: KnowledgePackage) -> None:
        self.term_frequency = {
            term: _document_frequency(package, i) for term, i in package.term_ids.items()
        }
        self.stem_of: dict[str, str] = {}
        self.by_sound: dict[str, set[str]] = {}
        sounds = package.analyzer.config.language == "portuguese"
        for word, stem in package.surface_words:
            folded = fold(word)
            self.stem_of.setdefault(folded, stem)
            if sounds:  # the key needs the accents (ç is /s/, c before a is /k/)
                self.by_sound.setdefault(portuguese_sound_key(word), set()).add(folded)
        self.alphabet = _alphabet(self.stem_of)

    def correct(self, word: str) -> str | None:
        """Index term of the corpus word that sounds the same or is one edit away."""
        folded = fold(word.casefold())
        if len(folded) < MIN_FUZZY_LENGTH or _has_digit(folded) or folded in self.stem_of:
            return None
        candidates = (
            set(self.by_sound.get(portuguese_sound_key(word), ())) if self.by_sound else set()
        )
        if not candidates:
            candidates = {c for c in _edits(folded, self.alphabet) if c in self.stem_of}
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


def _alphabet(words: Iterable[str]) -> str:
    """Letters of the vocabulary (no digits: codes are never corrected)."""
    return "".join(sorted({ch for word in words for ch in word if ch.isalpha()}))


def _edits(word: str, alphabet: str) -> set[str]:
    """Every string one deletion, adjacent swap, substitution or insertion away from ``word``."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = {a + b[1:] for a, b in splits if b}
    swaps = {a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1}
    replaces = {a + ch + b[1:] for a, b in splits if b for ch in alphabet}
    inserts = {a + ch + b for a, b in splits for ch in alphabet}
    return (deletes | swaps | replaces | inserts) - {word}


def _document_frequency(package: KnowledgePackage, term_id: int) -> int:
    return max(p.indptr[term_id + 1] - p.indptr[term_id] for p in package.blocks.values())
