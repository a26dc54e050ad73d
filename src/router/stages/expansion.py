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
from router.package.string_map import StringMap
from router.package.term_index import TermIndex
from router.package.view import PackageView, ViewPart

__all__ = [
    "Expansion",
    "FuzzyVocabulary",
    "SurfaceLayer",
    "SurfaceVocabulary",
    "SynonymIndex",
    "TermLayer",
    "expand_terms",
    "fuzzy_vocabulary",
    "surface_layer",
    "surface_vocabulary",
    "term_layer",
]


@dataclass(frozen=True)
class TermLayer:
    """One partition's terms with their document frequency, and the letters they use."""

    terms: TermIndex
    df: Sequence[int]  # the directory's: no shard is read for typo repair
    alphabet: str

    def frequency(self, term: str) -> int:
        found = self.terms.get(term)
        return 0 if found is None else self.df[found]


def term_layer(package: PackageView, part: ViewPart) -> TermLayer:
    """A partition's terms and document frequencies (the largest over its posting blocks)."""
    partition = part.partition
    terms = partition.term_ids
    return TermLayer(terms, partition.postings.directory.df, _alphabet(terms.key_characters()))


@dataclass(frozen=True)
class SurfaceLayer:
    """One partition's surface words: folded word → index term, and words by sound."""

    stem_of: StringMap
    by_sound: StringMap  # sound key → its folded words (``StringMap.values_of``)
    alphabet: str


def surface_layer(package: PackageView, part: ViewPart) -> SurfaceLayer:
    """The tables the build compiled for a partition (``router.analysis.surface``), read in
    place; only the alphabet is derived, from the words' characters."""
    partition = part.partition
    alphabet = _alphabet(partition.surface.key_characters())
    return SurfaceLayer(partition.surface, partition.sounds, alphabet)


class FuzzyVocabulary:
    """Indexed terms one edit away from an unknown term (Damerau distance 1).

    Why candidates are generated at query time (Norvig) instead of a SymSpell deletion index:
    the index cost 73 MiB for SciFact's 30k terms — more than half a Worker isolate — while a
    repair runs only on weak queries and checks ~50 × length candidates against the term dict.
    The terms are those of the partitions in view only (one ``TermLayer`` each).
    """

    def __init__(self, layers: Sequence[TermLayer]) -> None:
        self.layers = layers
        self.alphabet = "".join(sorted({ch for layer in layers for ch in layer.alphabet}))

    def document_frequency(self, term: str) -> int:
        return sum(layer.frequency(term) for layer in self.layers)

    def known(self, term: str) -> bool:
        return any(term in layer.terms for layer in self.layers)

    def correct(self, term: str) -> str | None:
        """The most frequent indexed term one edit away (insert, delete, substitute, swap)."""
        if len(term) < MIN_FUZZY_LENGTH or self.known(term) or _has_digit(term):
            return None
        candidates = {c for c in _edits(term, self.alphabet) if self.known(c)}
        if not candidates:
            return None
        return max(candidates, key=lambda c: (self.document_frequency(c), c))


class SurfaceVocabulary:
    """The corpus's own words (accent-folded), each with its index term, for typos that change
    the stem: "equipamneto" stems to "equipamnet", far from "equip", but is one swap from the
    word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese sound key).

    Built lazily the first time a query needs it, per partition (``SurfaceLayer``), from the
    word/term pairs the build compiled (``router.analysis.surface``).
    """

    def __init__(self, layers: Sequence[SurfaceLayer], terms: FuzzyVocabulary) -> None:
        self.layers = layers
        self.terms = terms
        self.alphabet = "".join(sorted({ch for layer in layers for ch in layer.alphabet}))

    def stem_of(self, folded: str) -> str | None:
        for layer in self.layers:
            found = layer.stem_of.get(folded)
            if found is not None:
                return found
        return None

    def correct(self, word: str) -> str | None:
        """Index term of the corpus word that sounds the same or is one edit away."""
        folded = fold(word.casefold())
        if len(folded) < MIN_FUZZY_LENGTH or _has_digit(folded) or self.stem_of(folded):
            return None
        by_sound = any(len(layer.by_sound) for layer in self.layers)
        key = portuguese_sound_key(word) if by_sound else None
        candidates = {c for layer in self.layers for c in layer.by_sound.values_of(key or "")}
        if not candidates:
            candidates = {c for c in _edits(folded, self.alphabet) if self.stem_of(c)}
        stems = {stem for c in candidates if (stem := self.stem_of(c)) is not None}
        if not stems:
            return None
        return max(stems, key=lambda stem: (self.terms.document_frequency(stem), stem))


def fuzzy_vocabulary(package: PackageView) -> FuzzyVocabulary:
    """The typo repair's terms of a view: its partitions' layers."""
    return FuzzyVocabulary(package.layers("terms", term_layer))


def surface_vocabulary(package: PackageView) -> SurfaceVocabulary:
    """The typo repair's surface words of a view: its partitions' layers."""
    return SurfaceVocabulary(package.layers("surface", surface_layer), fuzzy_vocabulary(package))


class SynonymIndex:
    """Each synonym group as analyzed phrases; a phrase in the question brings in the others."""

    def __init__(self, package: PackageView) -> None:
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
