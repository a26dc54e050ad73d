"""Stage — hybrid rank fusion (PRD §18–19): one ranking from every source, scores kept apart.

Why reciprocal rank fusion by default: BM25, cosine similarity and keyword scores live on
different scales; RRF (Cormack et al. 2009) only uses ranks, needs no calibration and is robust.
Weighted fusion (min-max normalised scores × source weights) is there for tuning.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = ["Fused", "fuse", "rrf", "weighted_fusion"]

Ranked = Sequence[tuple[int, float]]


@dataclass
class Fused:
    section: int
    final: float = 0.0
    scores: dict[str, float] = field(default_factory=dict)


def rrf(sources: Mapping[str, Ranked], k: int, weights: Mapping[str, float]) -> list[Fused]:
    """Σ_source weight / (k + rank), rank starting at 1."""
    fused: dict[int, Fused] = {}
    for name, ranked in sources.items():
        weight = weights.get(name, 0.0)
        if weight <= 0:
            continue
        for rank, (section, score) in enumerate(ranked, start=1):
            item = fused.setdefault(section, Fused(section))
            item.final += weight / (k + rank)
            item.scores[name] = round(score, 6)
    return _ordered(fused)


def weighted_fusion(sources: Mapping[str, Ranked], weights: Mapping[str, float]) -> list[Fused]:
    """Σ_source weight × score / best score of that source."""
    fused: dict[int, Fused] = {}
    for name, ranked in sources.items():
        if not ranked:
            continue
        weight = weights.get(name, 0.0)
        if weight <= 0:
            continue
        top = max(score for _, score in ranked) or 1.0
        for section, score in ranked:
            item = fused.setdefault(section, Fused(section))
            item.final += weight * score / top
            item.scores[name] = round(score, 6)
    return _ordered(fused)


def fuse(
    sources: Mapping[str, Ranked], method: str, k: int, weights: Mapping[str, float]
) -> list[Fused]:
    """A single source keeps its own order; several are fused with ``method``."""
    live = {name: ranked for name, ranked in sources.items() if ranked}
    if method == "weighted":
        return weighted_fusion(live, weights)
    return rrf(live, k, weights)


def _ordered(fused: dict[int, Fused]) -> list[Fused]:
    return sorted(fused.values(), key=lambda item: (-item.final, item.section))
