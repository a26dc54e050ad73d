"""Stage — the corrective expansion (seed 001 §8.6): one retry of a weak lexical result.

A weak result is retried once, with its typos repaired and then with synonyms, and a retry is
kept only if it is more confident. Synonyms weigh ``RouterConfig.synonym_weight`` (0.5) of a
question's own term, as the knowledge format promises: at full weight a group of three words
outvoted the question ("aprovação da APR 5512" went to the general APR document).

Why corrections first: a repaired query ("certifcado de aprovasao do epi") is usually precise,
and appending a synonym group (EPI = equipamento de proteção individual) would pull it toward the
general documents. Synonyms are added when it is still weak.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from router.errors import RouterError
from router.package.stores.cost import ReadCost
from router.results import IndexReads, Lexical
from router.stages.lexical import lexical_search
from router.stages.terms import read_terms
from router.support.expansion import (
    Expansion,
    RepairCandidates,
    RepairLimits,
    SynonymIndex,
    expand_terms,
    repair_candidates,
    repair_reach,
    stem_corrections,
    surface_stems,
)

if TYPE_CHECKING:
    from router.config import RouterConfig
    from router.results import LexicalConfidence
    from router.state import QueryState
    from router.trace import Trace

__all__ = ["correct", "is_weak"]


def is_weak(confidence: LexicalConfidence, config: RouterConfig) -> bool:
    """Below MEDIUM, too little of the question covered to be served (it would abstain), or
    some query term the index does not know: worth one corrective retry."""
    return (
        confidence.value < config.medium_confidence
        or confidence.coverage < config.min_coverage
        or bool(confidence.unknown_terms)
    )


async def correct(state: QueryState, lexical: Lexical) -> tuple[Lexical, IndexReads]:
    """Expand once (typo repair, then synonyms); the most confident of the tries is kept, and
    returned with the term entries the tries read (for the pipeline to keep).

    The candidates' vocabulary entries are read before choosing (one round trip, for the few
    the partitions' Bloom filters let through): the stem-level candidates first, then — for the
    words whose stem found no correction, the only ones a surface correction could change —
    the corpus words sounding alike or one edit away (``surface_stems``), so a question whose
    typos the stems repair never spends reads or probes on its words. The repair is bounded
    (``RepairLimits``: words, spellings checked, the deadline) and a retry starts only while
    the budget lasts; the trace says ``truncated`` when a bound left words unrepaired,
    ``budget_exceeded`` when the deadline stopped the stage. A question of mostly unknown words
    is not repaired at all (``repair: skipped``): even corrected as far as the bounds allow, it
    would cover under ``min_coverage`` of its terms (``reach``, ``repair_reach``) and abstain;
    nor are its synonyms tried unless, all matched, they could lift it there (``synonym_retry:
    skipped``)."""
    budget, trace = state.config.budget, state.trace
    limits = RepairLimits(budget.max_repaired_words, budget.max_typo_probes, trace.deadline)
    reads = _Reads(state)
    expansion, bounded = await _expansion(reads, lexical, limits)
    bounded |= _bounds_reached(limits, len(expansion.synonyms) >= budget.max_expansion_terms)
    if not expansion.changed:
        _record(state, limits, bounded, changed=False)
        return lexical, reads.found
    best, tried = lexical, []
    if expansion.corrections and not _out_of_time(limits, trace):
        corrected = expansion.terms[: len(lexical.terms)]
        cost = await reads.terms(corrected)
        tried.append(await lexical_search(reads.state, corrected, cost, "_corrected"))
    weak = not tried or is_weak(tried[0].confidence, state.config)
    if expansion.synonyms and weak and not _out_of_time(limits, trace):
        weights = dict.fromkeys(expansion.synonyms, state.config.synonym_weight)
        cost = await reads.terms(expansion.terms)
        tried.append(
            await lexical_search(
                reads.state, expansion.terms, cost, "_expanded", term_weights=weights
            )
        )
    for candidate in tried:
        if candidate.confidence.value > best.confidence.value:
            best = candidate
    _record(
        state,
        limits,
        bounded,
        changed=True,
        corrections=expansion.corrections,
        synonyms=expansion.synonyms if best.terms == expansion.terms else [],
        before=round(lexical.confidence.value, 3),
        after=round(best.confidence.value, 3),
        kept=best is not lexical,
    )
    return best, reads.found


async def _expansion(
    reads: _Reads, lexical: Lexical, limits: RepairLimits
) -> tuple[Expansion, dict[str, object]]:
    """The corrections and synonyms to try, and what the trace says of the ones left out: a
    question of mostly unknown words (``repair_reach`` under ``min_coverage``) is not repaired,
    and its synonyms are left out too when even they could not lift it there."""
    config = reads.state.config
    max_words, max_synonyms = config.budget.max_repaired_words, config.budget.max_expansion_terms
    unknown_terms = lexical.confidence.unknown_terms
    reach = repair_reach(lexical.terms, unknown_terms, max_words)
    skipped: dict[str, object] = {}
    if reach < config.min_coverage:  # no repair could make it answerable: spend nothing on it
        unknown: dict[str, str] = {}
        candidates = RepairCandidates({}, {})
        skipped = {"repair": "skipped", "reach": round(reach, 3)}
    else:
        unknown = await unknown_words(reads)
        candidates = await _repair(reads, lexical, unknown, limits)
    package = reads.state.package
    synonyms: SynonymIndex = package.derive("synonyms", SynonymIndex)
    expansion = expand_terms(package, lexical.terms, candidates, synonyms, unknown, max_synonyms)
    if skipped and expansion.synonyms:
        with_synonyms = repair_reach([*lexical.terms, *expansion.synonyms], unknown_terms, 0)
        if with_synonyms < config.min_coverage:
            skipped["synonym_retry"] = "skipped"
            expansion = Expansion(list(lexical.terms))
    return expansion, skipped


async def _repair(
    reads: _Reads, lexical: Lexical, unknown: Mapping[str, str], limits: RepairLimits
) -> RepairCandidates:
    """The typo repair's candidates, their entries read: the stem level first (its corrections
    win), then the surface words of the unknown words it left."""
    stems = repair_candidates(reads.state.package, lexical.terms, {}, limits)
    await reads.terms(stems.terms())
    fixed = stem_corrections(reads.state.package, stems.by_term)
    left = {word: stem for word, stem in unknown.items() if stem not in fixed}
    by_word = {} if limits.stopped else await _surface_candidates(reads.state, left, limits)
    candidates = RepairCandidates(stems.by_term, by_word)
    await reads.terms(candidates.terms())
    return candidates


class _Reads:
    """The term entries this stage read, and the state as it sees them (a copy: the pipeline
    keeps them on the query's own state)."""

    def __init__(self, state: QueryState) -> None:
        self.state = state
        self.found = IndexReads()

    async def terms(self, terms: Iterable[str]) -> ReadCost:
        read, cost = await read_terms(self.state, terms)
        if read.terms:
            self.found = self.found.then(read)
            self.state = self.state.seeing(read)
        return cost


def _bounds_reached(limits: RepairLimits, synonyms_full: bool) -> dict[str, object]:
    """The trace's account of the bounds this repair reached (empty when none was)."""
    if not (limits.truncated or synonyms_full):
        return {}
    return {"truncated": True, "typo_probes": limits.probes}


def _out_of_time(limits: RepairLimits, trace: Trace) -> bool:
    """True (and remembered) when the budget is spent: no further retry starts."""
    if not limits.timed_out and trace.deadline():
        limits.timed_out = True
    return limits.timed_out


def _record(
    state: QueryState, limits: RepairLimits, bounded: dict[str, object], **details: object
) -> None:
    if limits.timed_out:
        state.trace.cut("corrective")
        details["budget_exceeded"] = True
    state.trace.stage("corrective", **details, **bounded)


async def unknown_words(reads: _Reads) -> dict[str, str]:
    """Query words whose stem the index does not know (candidates for typo repair), in question
    order, among the words the analyzer read (``QueryFeatures.words``: at most
    ``max_query_words``); their stems' entries are read first (usually the query's own terms,
    already read)."""
    analyzer = reads.state.package.analyzer
    stems = {word: analyzer.word_stem(word) for word in dict.fromkeys(reads.state.features.words)}
    await reads.terms([stem for stem in stems.values() if stem is not None])
    return {
        word: stem
        for word, stem in stems.items()
        if stem is not None and not reads.state.package.knows(stem)
    }


async def _surface_candidates(
    state: QueryState, unknown: Mapping[str, str], limits: RepairLimits
) -> dict[str, set[str]]:
    """``surface_stems`` of the unknown words; none when the word chunks cannot be read (the
    stem-level repair still runs; the failure is named in ``state.unreadable``)."""
    if not unknown:
        return {}
    try:
        return await surface_stems(state.package, unknown, limits)
    except RouterError as exc:
        state.note_unreadable("typo words", exc)
        return {}
