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
from router.package.view import PackageView, ViewPart

__all__ = [
    "Expansion",
    "RepairCandidates",
    "SurfaceLayer",
    "SurfaceVocabulary",
    "SynonymIndex",
    "expand_terms",
    "repair_candidates",
    "surface_layer",
    "surface_vocabulary",
    "term_alphabet",
]


def term_alphabet(package: PackageView) -> str:
    """The letters of the terms in view (the stem-level edits' alphabet), from the partitions'
    vocabulary directories."""
    return _alphabet(part.partition.vocabulary.directory.alphabet for part in package.parts)


def term_candidates(package: PackageView, term: str, alphabet: str) -> set[str]:
    """Spellings one edit away (insert, delete, substitute, swap) from an unknown term that a
    partition in view may hold — its Bloom filter says so; ``knows`` decides once they are read.

    Why candidates are generated at query time (Norvig) instead of a SymSpell deletion index:
    the index cost 73 MiB for SciFact's 30k terms — more than half a Worker isolate — while a
    repair runs only on weak queries; the filters keep the reads to the few that pass.
    """
    if len(term) < MIN_FUZZY_LENGTH or _has_digit(term) or package.knows(term):
        return set()
    return {c for c in _edits(term, alphabet) if package.may_know(c)}


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


class SurfaceVocabulary:
    """The corpus's own words (accent-folded), each with its index term, for typos that change
    the stem: "equipamneto" stems to "equipamnet", far from "equip", but is one swap from the
    word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese sound key).

    The layers are the word/term pairs the build compiled per partition
    (``router.analysis.surface``), read in place.
    """

    def __init__(self, layers: Sequence[SurfaceLayer]) -> None:
        self.layers = layers
        self.alphabet = "".join(sorted({ch for layer in layers for ch in layer.alphabet}))

    def stem_of(self, folded: str) -> str | None:
        for layer in self.layers:
            found = layer.stem_of.get(folded)
            if found is not None:
                return found
        return None

    def stems(self, word: str) -> set[str]:
        """Index terms of the corpus words that sound like ``word`` or are one edit away (none
        when ``word`` is itself a corpus word, a code, or too short to correct safely)."""
        folded = fold(word.casefold())
        if len(folded) < MIN_FUZZY_LENGTH or _has_digit(folded) or self.stem_of(folded):
            return set()
        by_sound = any(len(layer.by_sound) for layer in self.layers)
        key = portuguese_sound_key(word) if by_sound else None
        candidates = {c for layer in self.layers for c in layer.by_sound.values_of(key or "")}
        if not candidates:
            candidates = {c for c in _edits(folded, self.alphabet) if self.stem_of(c)}
        return {stem for c in candidates if (stem := self.stem_of(c)) is not None}


def surface_vocabulary(package: PackageView) -> SurfaceVocabulary:
    """The typo repair's surface words of a view: its partitions' layers."""
    return SurfaceVocabulary(package.layers("surface", surface_layer))


@dataclass(frozen=True)
class RepairCandidates:
    """The corrections a weak query may take, before the vocabulary is read to choose."""

    by_term: dict[str, set[str]]  # unknown term → spellings one edit away (may be terms)
    by_word: dict[str, set[str]]  # unknown query word → index terms of its surface neighbours

    def terms(self) -> set[str]:
        """Every candidate: the terms to read before ``expand_terms`` chooses."""
        found = {c for group in self.by_term.values() for c in group}
        return found | {c for group in self.by_word.values() for c in group}


def repair_candidates(
    package: PackageView,
    terms: Sequence[str],
    unknown_words: Mapping[str, str],
    surface: SurfaceVocabulary | None,
) -> RepairCandidates:
    """The candidates of each query term (stem level) and of each unknown word (surface)."""
    alphabet = term_alphabet(package)
    by_term = {
        t: found for t in dict.fromkeys(terms) if (found := term_candidates(package, t, alphabet))
    }
    by_word = {}
    if surface is not None:
        by_word = {w: found for w in unknown_words if (found := surface.stems(w))}
    return RepairCandidates(by_term, by_word)


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
    package: PackageView,
    terms: Sequence[str],
    candidates: RepairCandidates,
    synonyms: SynonymIndex,
    unknown_words: Mapping[str, str] | None = None,
) -> Expansion:
    """Unknown terms replaced by their correction, then synonyms of the result appended.

    A term is corrected at the stem level first (one edit); ``unknown_words`` (query word → its
    unknown stem) are then tried against the corpus's surface words, by sound and by one edit.
    Of several candidates the commonest term wins; ``package`` must hold every candidate's entry
    (``RepairCandidates.terms``).
    """
    corrections = {
        t: found for t, group in candidates.by_term.items() if (found := _commonest(package, group))
    }
    for word, stem in (unknown_words or {}).items():
        group = candidates.by_word.get(word, set())
        if stem not in corrections and (found := _commonest(package, group)):
            corrections[stem] = found
    corrected = [corrections.get(t, t) for t in terms]
    added = synonyms.expand(corrected)
    return Expansion(corrected + added, corrections, added)


def _commonest(package: PackageView, terms: Iterable[str]) -> str | None:
    """The term of ``terms`` in most sections of the view (None when it knows none)."""
    known = [t for t in terms if package.knows(t)]
    return max(known, key=lambda t: (package.document_frequency(t), t)) if known else None


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
