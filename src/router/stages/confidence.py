"""Stage — confidence of the lexical result and the abstention decision (PRD §20, seed 003).

Why these signals: raw BM25 scores are not comparable across queries; *coverage* (share of the
query's terms found in the best section) and *strength* (its score over the best score those terms
could reach anywhere) are. A query whose words the knowledge never uses gets coverage 0 and the
router abstains instead of returning the least bad passage.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from dataclasses import dataclass

from router.config import RouterConfig
from router.package.reader import KnowledgePackage
from router.stages.bm25 import max_impact

__all__ = ["LexicalConfidence", "confidence_level", "lexical_confidence"]


@dataclass(frozen=True)
class LexicalConfidence:
    coverage: float
    strength: float
    value: float
    matched_terms: list[str]
    unknown_terms: list[str]


def lexical_confidence(
    package: KnowledgePackage, terms: Sequence[str], section: int | None, score: float
) -> LexicalConfidence:
    distinct = list(dict.fromkeys(terms))
    unknown = [t for t in distinct if t not in package.term_ids]
    if not distinct or section is None:
        return LexicalConfidence(0.0, 0.0, 0.0, [], unknown)
    matched = [t for t in distinct if t in package.term_ids and _contains(package, t, section)]
    ideal = sum(
        max_impact(package.postings, package.term_ids[t], package.impact_bounds)
        for t in terms
        if t in package.term_ids
    )
    coverage = len(matched) / len(distinct)
    strength = min(1.0, score / ideal) if ideal > 0 else 0.0
    value = coverage * (0.5 + 0.5 * strength)
    return LexicalConfidence(coverage, strength, value, matched, unknown)


def confidence_level(value: float, config: RouterConfig) -> str:
    if value >= config.high_confidence:
        return "HIGH"
    if value >= config.medium_confidence:
        return "MEDIUM"
    if value >= config.abstain_below:
        return "LOW"
    return "NONE"


def _contains(package: KnowledgePackage, term: str, section: int) -> bool:
    postings = package.postings
    term_id = package.term_ids[term]
    start, end = postings.indptr[term_id], postings.indptr[term_id + 1]
    at = bisect_left(postings.section_ids, section, start, end)
    return at < end and postings.section_ids[at] == section
