"""Stage — the corrective expansion (seed 001 §8.6): one retry of a weak lexical result.

A weak result is retried once, with its typos repaired and then with synonyms, and a retry is
kept only if it is more confident.

Why corrections first: a repaired query ("certifcado de aprovasao do epi") is usually precise,
and appending a synonym group (EPI = equipamento de proteção individual) would pull it toward the
general documents. Synonyms are added when it is still weak.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from router.errors import RouterError
from router.stages.expansion import (
    SynonymIndex,
    expand_terms,
    repair_candidates,
    surface_stems,
)
from router.stages.lexical import Lexical, lexical_search
from router.stages.terms import read_terms

if TYPE_CHECKING:
    from router.config import RouterConfig
    from router.stages.confidence import LexicalConfidence
    from router.state import QueryState

__all__ = ["correct", "is_weak", "unknown_words"]


def is_weak(confidence: LexicalConfidence, config: RouterConfig) -> bool:
    """Below MEDIUM, or some query term the index does not know: worth one corrective retry."""
    return confidence.value < config.medium_confidence or bool(confidence.unknown_terms)


async def correct(state: QueryState, lexical: Lexical) -> Lexical:
    """Expand once (typo repair, then synonyms); the most confident of the tries is kept.

    The candidates' vocabulary entries are read before choosing (one round trip, for the few
    the partitions' Bloom filters let through)."""
    unknown = await unknown_words(state)
    by_word = await _surface_candidates(state, unknown)
    candidates = repair_candidates(state.package, lexical.terms, by_word)
    await read_terms(state, candidates.terms())
    package = state.package
    synonyms: SynonymIndex = package.derive("synonyms", SynonymIndex)
    expansion = expand_terms(package, lexical.terms, candidates, synonyms, unknown)
    if not expansion.changed:
        state.trace.stage("corrective", changed=False)
        return lexical
    best, tried = lexical, []
    if expansion.corrections:
        corrected = expansion.terms[: len(lexical.terms)]
        tried.append(await lexical_search(state, corrected, "_corrected"))
    if expansion.synonyms and (not tried or is_weak(tried[0].confidence, state.config)):
        tried.append(await lexical_search(state, expansion.terms, "_expanded"))
    for candidate in tried:
        if candidate.confidence.value > best.confidence.value:
            best = candidate
    state.trace.stage(
        "corrective",
        changed=True,
        corrections=expansion.corrections,
        synonyms=expansion.synonyms if best.terms == expansion.terms else [],
        before=round(lexical.confidence.value, 3),
        after=round(best.confidence.value, 3),
        kept=best is not lexical,
    )
    return best


async def unknown_words(state: QueryState) -> dict[str, str]:
    """Query words whose stem the index does not know (candidates for typo repair); their
    stems' entries are read first (usually the query's own terms, already read)."""
    analyzer = state.package.analyzer
    stems = {
        word: analyzer.word_stem(word) for word in analyzer.vocabulary_words([state.query.text])
    }
    await read_terms(state, [stem for stem in stems.values() if stem is not None])
    return {
        word: stem
        for word, stem in sorted(stems.items())
        if stem is not None and not state.package.knows(stem)
    }


async def _surface_candidates(state: QueryState, unknown: Mapping[str, str]) -> dict[str, set[str]]:
    """``surface_stems`` of the unknown words; none when the word chunks cannot be read (the
    stem-level repair still runs; the failure is named in ``state.unreadable``)."""
    if not unknown:
        return {}
    try:
        return await surface_stems(state.package, unknown)
    except RouterError as exc:
        state.note_unreadable("typo words", exc)
        return {}
