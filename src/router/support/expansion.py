"""Corrective query expansion (seed 001 §8.6): synonyms and typo repair, tried once.

Why once and only on weak results: when the lexical result is weak, the likely causes are a
typo ("permisão") or the user's word for a thing the documents name differently. The router
adds the curated synonyms (``_synonyms.yml``) and the closest vocabulary term of each unknown term,
runs the lexical stages again once, and keeps the better of the two — it never invents.

Why bounded (issue 12): the repair's cost grows with the unknown words of a question and their
length (each word's one-edit spellings are checked against Bloom filters, ~3 µs each), so one
question of 400 random words cost 1.3 s. ``RepairLimits`` bounds the words repaired
(``RetrievalBudget.max_repaired_words``), the spellings checked (``max_typo_probes``), the
candidates kept per word (``MAX_CANDIDATES_PER_WORD``) and stops at the latency deadline; the
synonyms added are bounded per group (``MAX_SYNONYMS_PER_GROUP``) and in all
(``max_expansion_terms``). The corrective stage's trace says when a bound was reached.

Why a question of mostly unknown words is not repaired at all (issue 31): those bounds still let
each question of 60 random or misspelt words spend the whole probe budget (~15 ms of a Worker's
CPU, most of what such a question costs), for nothing — correcting the few words the repair may
take cannot make such a question answerable: its best section would still hold under
``RouterConfig.min_coverage`` of its terms, and the question abstains. ``repair_reach`` is that
ceiling, known before any spelling is generated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from router.analysis.sound import portuguese_sound_key
from router.analysis.surface import MAX_FUZZY_LENGTH, MIN_FUZZY_LENGTH
from router.analysis.text import fold
from router.config import (
    DEFAULT_MAX_EXPANSION_TERMS,
    DEFAULT_MAX_REPAIRED_WORDS,
    DEFAULT_MAX_TYPO_PROBES,
)
from router.package.format.string_map import VALUE_SEPARATOR
from router.package.format.words import SOUND_PREFIX, WORD_PREFIX
from router.package.view import PackageView
from router.trace import NO_DEADLINE, Deadline

__all__ = [
    "MAX_CANDIDATES_PER_WORD",
    "MAX_SYNONYMS_PER_GROUP",
    "Expansion",
    "RepairCandidates",
    "RepairLimits",
    "SynonymIndex",
    "expand_terms",
    "repair_candidates",
    "repair_reach",
    "stem_corrections",
    "surface_stems",
    "term_alphabet",
]

MAX_CANDIDATES_PER_WORD = 16
"""Candidate corrections kept for one unknown term or word (the first in order): those the
Bloom filters let through, or the words sharing its sound key. Their vocabulary entries are
read before the commonest is chosen; the sample's typos have 1–6, a 5-letter term in SciFact's
30k-term vocabulary up to ~20, and a sound key's words are few."""

MAX_SYNONYMS_PER_GROUP = 8
"""Terms one synonym group may add to a question (the sample's largest group adds 7)."""


@dataclass
class RepairLimits:
    """What one question's typo repair may still do (``RetrievalBudget``), and what it did.

    A word is repaired whole or not at all: its spellings are checked only if they all fit the
    probes left, so which corrections a question gets never depends on where a count fell."""

    max_words: int = DEFAULT_MAX_REPAIRED_WORDS  # per level: stems, then surface words
    probes_left: int = DEFAULT_MAX_TYPO_PROBES
    deadline: Deadline = NO_DEADLINE
    probes: int = 0  # spellings checked against the filters
    truncated: bool = False  # a bound left unknown words unrepaired
    timed_out: bool = False  # the latency deadline stopped the repair

    def admit(self, words: Sequence[str]) -> list[str]:
        """The first of ``words`` the repair may take (at most ``max_words``)."""
        if len(words) > self.max_words:
            self.truncated = True
        return list(words[: self.max_words])

    def check(self, spellings: Sequence[str], holds: Callable[[str], bool]) -> set[str] | None:
        """The spellings ``holds`` lets through (at most ``MAX_CANDIDATES_PER_WORD``), or None
        when the deadline passed or they do not all fit the probes left (the repair stops)."""
        if self.deadline():
            self.timed_out = True
            return None
        if len(spellings) > self.probes_left:
            self.truncated = True
            self.probes_left = 0
            return None
        self.probes_left -= len(spellings)
        self.probes += len(spellings)
        return _first(c for c in spellings if holds(c))

    def kept(self, candidates: Iterable[str]) -> set[str]:
        """At most ``MAX_CANDIDATES_PER_WORD`` of ``candidates``, the first in sorted order."""
        return _first(sorted(candidates))

    @property
    def stopped(self) -> bool:
        """The deadline passed, or no probe is left: no further word can be repaired."""
        return self.timed_out or self.probes_left == 0


def _first(candidates: Iterable[str]) -> set[str]:
    found: set[str] = set()
    for candidate in candidates:
        found.add(candidate)
        if len(found) == MAX_CANDIDATES_PER_WORD:
            break
    return found


def term_alphabet(package: PackageView) -> str:
    """The letters of the terms in view (the stem-level edits' alphabet), from the partitions'
    vocabulary directories."""
    return _alphabet(part.partition.vocabulary.directory.keys.alphabet for part in package.parts)


def term_candidates(
    package: PackageView, term: str, alphabet: str, limits: RepairLimits | None = None
) -> set[str] | None:
    """Spellings one edit away (insert, delete, substitute, swap) from an unknown term that a
    partition in view may hold — its Bloom filter says so; ``knows`` decides once they are read.
    None when ``limits`` stop the repair before this term.

    Why candidates are generated at query time (Norvig) instead of a SymSpell deletion index:
    the index cost 73 MiB for SciFact's 30k terms — more than half a Worker isolate — while a
    repair runs only on weak queries; the filters keep the reads to the few that pass.
    """
    if not _repairable(term) or package.knows(term):
        return set()
    limits = limits or RepairLimits()
    return limits.check(_edits(term, alphabet), _term_filter(package))


async def surface_stems(
    package: PackageView, words: Iterable[str], limits: RepairLimits | None = None
) -> dict[str, set[str]]:
    """Index terms of the corpus words that sound like each query word or are one edit away —
    for typos that change the stem: "equipamneto" stems to "equipamnet", far from "equip", but
    is one swap from the word "equipamento"; "calibrassão" sounds like "calibração" (Portuguese
    sound key). None for a word that is itself a corpus word, a code, or too short; at most
    ``limits.max_words`` words are tried, in order, while the probes and the deadline allow.

    Two reads of the partitions' word chunks (``router.package.stores.words``): the words and
    their sound keys, then the candidate words (the sound's words, else the one-edit spellings
    the Bloom filters let through); the first partition holding a word gives its term.
    """
    limits = limits or RepairLimits()
    eligible = {}
    for word in words:
        folded = fold(word.casefold())
        if _repairable(folded):
            eligible[word] = folded
    eligible = {word: eligible[word] for word in limits.admit(list(eligible))}
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
        if found:
            candidates[word] = limits.kept(found)
            continue
        checked = limits.check(_edits(folded, alphabet), _word_filter(package))
        if checked is None:
            break
        candidates[word] = checked
    wanted = {WORD_PREFIX + c for group in candidates.values() for c in group}
    second, _ = await package.look_up_words(wanted)
    stems: dict[str, set[str]] = {}
    for word, group in candidates.items():
        terms = {_first_value(second[WORD_PREFIX + c]) for c in group}
        if terms - {None}:
            stems[word] = {t for t in terms if t is not None}
    return stems


def _term_filter(package: PackageView) -> Callable[[str], bool]:
    """``package.may_know`` with the partitions' filters looked up once (a probe is most of
    the repair's cost: ~3 µs, a third of it the calls down to the filter)."""
    holds = [part.partition.vocabulary.may_hold for part in package.parts]
    if len(holds) == 1:
        return holds[0]
    return lambda term: any(may_hold(term) for may_hold in holds)


def _word_filter(package: PackageView) -> Callable[[str], bool]:
    """``package.may_hold_word`` of a spelling's word key, the filters looked up once."""
    holds = [part.partition.words.may_hold for part in package.parts]
    return lambda spelling: any(may_hold(WORD_PREFIX + spelling) for may_hold in holds)


def _first_value(values: Sequence[str | None]) -> str | None:
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


def repair_reach(terms: Sequence[str], unknown: Iterable[str], max_words: int) -> float:
    """The most of ``terms`` (distinct) a repair could make known: every known one, plus one
    correction for each unknown term it may take — ``max_words`` at the stem level and
    ``max_words`` words at the surface level (``RepairLimits.admit``, each level once). An
    upper bound on the coverage of the corrected question: a correction that merges two terms
    adds nothing, and a known term may still be missing from the best section. 0 for no terms.
    """
    distinct = set(terms)
    if not distinct:
        return 0.0
    missing = len(distinct & set(unknown))
    return (len(distinct) - missing + min(missing, 2 * max_words)) / len(distinct)


def repair_candidates(
    package: PackageView,
    terms: Sequence[str],
    by_word: Mapping[str, set[str]],
    limits: RepairLimits | None = None,
) -> RepairCandidates:
    """The candidates of each query term (stem level), with those of the unknown words
    (``by_word``, from ``surface_stems``): the first ``limits.max_words`` unknown terms, while
    the probes and the deadline allow."""
    limits = limits or RepairLimits()
    alphabet = term_alphabet(package)
    unknown = [t for t in dict.fromkeys(terms) if _repairable(t) and not package.knows(t)]
    by_term: dict[str, set[str]] = {}
    for term in limits.admit(unknown):
        found = term_candidates(package, term, alphabet, limits)
        if found is None:
            break
        if found:
            by_term[term] = found
    return RepairCandidates(by_term, dict(by_word))


class SynonymIndex:
    """Each synonym group as analyzed phrases; a phrase in the question brings in the others."""

    def __init__(self, package: PackageView) -> None:
        analyze = package.analyzer.terms
        self.groups = [
            [tuple(analyze(phrase)) for phrase in group if analyze(phrase)]
            for group in package.synonyms
        ]

    def expand(
        self, terms: Sequence[str], max_terms: int = DEFAULT_MAX_EXPANSION_TERMS
    ) -> list[str]:
        """The terms of the groups a phrase of ``terms`` is in: at most
        ``MAX_SYNONYMS_PER_GROUP`` from one group, ``max_terms`` in all (groups in file order)."""
        present = set(terms)
        added: list[str] = []
        for group in self.groups:
            if len(added) >= max_terms:
                break
            if any(phrase and set(phrase) <= present for phrase in group):
                fresh = [t for phrase in group for t in phrase if t not in present]
                fresh = [t for t in dict.fromkeys(fresh) if t not in added]
                added += fresh[: min(MAX_SYNONYMS_PER_GROUP, max_terms - len(added))]
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
    max_synonyms: int = DEFAULT_MAX_EXPANSION_TERMS,
) -> Expansion:
    """Unknown terms replaced by their correction, then synonyms of the result appended.

    A term is corrected at the stem level first (one edit); ``unknown_words`` (query word → its
    unknown stem) are then tried against the corpus's surface words, by sound and by one edit.
    Of several candidates the commonest term wins; ``package`` must hold every candidate's entry
    (``RepairCandidates.terms``).
    """
    corrections = stem_corrections(package, candidates.by_term)
    for word, stem in (unknown_words or {}).items():
        group = candidates.by_word.get(word, set())
        if stem not in corrections and (found := _commonest(package, group)):
            corrections[stem] = found
    corrected = [corrections.get(t, t) for t in terms]
    added = synonyms.expand(corrected, max_synonyms)
    return Expansion(corrected + added, corrections, added)


def stem_corrections(package: PackageView, by_term: Mapping[str, set[str]]) -> dict[str, str]:
    """Each unknown term's stem-level correction: its commonest known candidate (``package``
    must hold the candidates' entries); the terms with none are left out."""
    return {t: found for t, group in by_term.items() if (found := _commonest(package, group))}


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


def _edits(word: str, alphabet: str) -> list[str]:
    """Every string one deletion, adjacent swap, substitution or insertion away from ``word``,
    once each and in a fixed order (a set's order would change with the process's hash seed)."""
    splits = [(word[:i], word[i:]) for i in range(len(word) + 1)]
    deletes = [a + b[1:] for a, b in splits if b]
    swaps = [a + b[1] + b[0] + b[2:] for a, b in splits if len(b) > 1]
    replaces = [a + ch + b[1:] for a, b in splits if b for ch in alphabet]
    inserts = [a + ch + b for a, b in splits for ch in alphabet]
    found = dict.fromkeys(deletes + swaps + replaces + inserts)
    found.pop(word, None)
    return list(found)
