"""Stage — confidence of the lexical result and its level (PRD §20, seed 003).

Why these signals: raw BM25 scores are not comparable across queries; *coverage* (share of the
query's terms found in the best section, any field) and *strength* (its score over the best score
those terms could reach anywhere, field weights applied) are. *Margin* (how far the best section is
ahead of the second) separates a clear winner from a tie. A query whose words the knowledge never
uses gets coverage 0 and the router abstains instead of returning the least bad passage.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from router.config import RouterConfig
from router.package.postings import Postings
from router.package.reader import KnowledgePackage
from router.stages.bm25 import max_impact

__all__ = ["LexicalConfidence", "confidence_level", "lexical_confidence"]


@dataclass(frozen=True)
class LexicalConfidence:
    coverage: float
    strength: float
    margin: float
    value: float
    matched_terms: list[str]
    unknown_terms: list[str]


def lexical_confidence(
    package: KnowledgePackage,
    terms: Sequence[str],
    ranked: Sequence[tuple[int, float]],
    weights: Mapping[str, float],
    config: RouterConfig,
) -> LexicalConfidence:
    """coverage × (1 − w_s + w_s·strength) × (1 − w_m + w_m·margin), each in 0..1."""
    distinct = list(dict.fromkeys(terms))
    unknown = [t for t in distinct if t not in package.term_ids]
    if not distinct or not ranked:
        return LexicalConfidence(0.0, 0.0, 0.0, 0.0, [], unknown)
    best, score = ranked[0]
    blocks = {name: package.blocks[name] for name in weights}
    matched = [
        t
        for t in distinct
        if t in package.term_ids
        and any(_contains(p, package.term_ids[t], best) for p in blocks.values())
    ]
    ideal = sum(
        weight * max_impact(postings, package.term_ids[t], package.impact_bounds)
        for t in terms
        if t in package.term_ids
        for name, postings in blocks.items()
        if (weight := weights[name]) > 0
    )
    coverage = len(matched) / len(distinct)
    strength = min(1.0, score / ideal) if ideal > 0 else 0.0
    second = ranked[1][1] if len(ranked) > 1 else 0.0
    margin = 1.0 - second / score if score > 0 else 0.0
    value = (
        coverage
        * (1 - config.strength_weight + config.strength_weight * strength)
        * (1 - config.margin_weight + config.margin_weight * margin)
    )
    return LexicalConfidence(coverage, strength, margin, value, matched, unknown)


def confidence_level(value: float, config: RouterConfig) -> str:
    """HIGH / MEDIUM / LOW from the configured thresholds (PRD §20 start values)."""
    if value >= config.high_confidence:
        return "HIGH"
    if value >= config.medium_confidence:
        return "MEDIUM"
    return "LOW"


def _contains(postings: Postings, term_id: int, section: int) -> bool:
    start, end = postings.indptr[term_id], postings.indptr[term_id + 1]
    at = bisect_left(postings.section_ids, section, start, end)
    return at < end and postings.section_ids[at] == section
