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
from router.analysis.surface import MAX_FUZZY_LENGTH, MIN_FUZZY_LENGTH
from router.analysis.text import fold
from router.package.string_map import VALUE_SEPARATOR
from router.package.view import PackageView
from router.package.word_chunks import SOUND_PREFIX, WORD_PREFIX

__all__ = [
    "Expansion",
    "RepairCandidates",
    "SynonymIndex",
    "expand_terms",
    "repair_candidates",
    "surface_stems",
    "term_alphabet",
]


def term_alphabet(package: PackageView) -> str:
    """The letters of the terms in view (the stem-level edits' alphabet), from the partitions'
    vocabulary directories."""
    return _alphabet(part.partition.vocabulary.directory.keys.alphabet for part in package.parts)


def term_candidates(package: PackageView, term: str, alphabet: str) -> set[str]:
    """Spellings one edit away (insert, delete, substitute, swap) from an unknown term that a
    partition in view may hold — its Bloom filter says so; ``knows`` decides once they are read.

    Why candidates are generated at query time (Norvig) instead of a SymSpell deletion index:
    the index cost 73 MiB for SciFact's 30k terms — more than half a Worker isolate — while a
    repair runs only on weak queries; the filters keep the reads to the few that pass.
    """
    if not _repairable(term) or package.knows(term):
        return set()
    return {c for c in _edits(term, alphabet) if package.may_know(c)}


async def surface_stems(package: PackageView, words: Iterable[str]) -> dict[str, set[str]]:
    """Index terms of the corpus words that sound like each query word or are one edit away —
    for typos that change the stem: "equipamneto" stems to "equipamnet", far from "equip", but
    is one swap from the word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese
    sound key). None for a word that is itself a corpus word, a code, or too short.

    Two reads of the partitions' word chunks (``router.package.word_chunks``): the words and
    their sound keys, then the candidate words (the sound's words, else the one-edit spellings
    the Bloom filters let through); the first partition holding a word gives its term.
    """
    eligible = {}
    for word in words:
        folded = fold(word.casefold())
        if _repairable(folded):
            eligible[word] = folded
    if not eligible:
        return {}
    keys = {WORD_PREFIX + folded for folded in eligible.values()}
    keys |= {SOUND_PREFIX + portuguese_sound_key(word) for word in eligible}
    first, _ = await package.look_up_words(keys)
    alphabet = _alphabet(part.partition.words.directory.alphabet for part in package.parts)
    candidates: dict[str, set[str]] = {}
    for word, folded in eligible.items():
        if any(first[WORD_PREFIX + folded]):
            continue  # a corpus word is not a typo
        sounds = first[SOUND_PREFIX + portuguese_sound_key(word)]
        found = {w for joined in sounds if joined for w in joined.split(VALUE_SEPARATOR)}
        if not found:
            found = {c for c in _edits(folded, alphabet) if package.may_hold_word(WORD_PREFIX + c)}
        candidates[word] = found
    wanted = {WORD_PREFIX + c for group in candidates.values() for c in group}
    second, _ = await package.look_up_words(wanted)
    stems: dict[str, set[str]] = {}
    for word, group in candidates.items():
        terms = {_first(second[WORD_PREFIX + c]) for c in group}
        if terms - {None}:
            stems[word] = {t for t in terms if t is not None}
    return stems


def _first(values: Sequence[str | None]) -> str | None:
    """The value of the first partition holding a key (the shared one first)."""
    return next((v for v in values if v is not None), None)


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
    package: PackageView, terms: Sequence[str], by_word: Mapping[str, set[str]]
) -> RepairCandidates:
    """The candidates of each query term (stem level), with those of the unknown words
    (``by_word``, from ``surface_stems``)."""
    alphabet = term_alphabet(package)
    by_term = {
        t: found for t in dict.fromkeys(terms) if (found := term_candidates(package, t, alphabet))
    }
    return RepairCandidates(by_term, dict(by_word))


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


def _repairable(word: str) -> bool:
    """Long enough to correct safely, short enough to bound the candidates, not a code."""
    return MIN_FUZZY_LENGTH <= len(word) <= MAX_FUZZY_LENGTH and not _has_digit(word)


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
