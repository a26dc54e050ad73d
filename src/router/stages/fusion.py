"""Stage — hybrid rank fusion (PRD §18–19): one ranking from every source, scores kept apart.

Why reciprocal rank fusion by default: BM25, cosine similarity and keyword scores live on
different scales; RRF (Cormack et al. 2009) only uses ranks, needs no calibration and is robust.
Weighted fusion (min-max normalised scores × source weights) is there for tuning.

The fusion policy (``fuse_candidates``) lives here too, in ADR 0006's order: each voting source
is boosted by trust and UI context *before* fusing; sources at weight 0 (graph always, keyword by
default) annotate instead of voting; exact and UI-context targets are pinned above everything.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from router.checks import check_choice
from router.config import FUSION_METHODS
from router.results import Fused
from router.stages.exact import hit_section
from router.support.boosts import boost_factors, boosted, context_targets
from router.trace import SectionRef

if TYPE_CHECKING:
    from router.contract import Level
    from router.state import QueryState

__all__ = [
    "annotate",
    "fuse",
    "fuse_candidates",
    "fusion_weights",
    "record_fusion",
    "rrf",
    "source_names",
    "weighted_fusion",
]

Ranked = Sequence[tuple[int, float]]
SOURCE_ORDER = ("exact", "keyword", "bm25", "graph", "vector")
PIN_LIFT = 1.0  # pinned targets score this much above the best fused candidate


def _gather(
    contributions: Iterable[tuple[str, int, float, float]],
) -> list[Fused]:
    """(source, section, share of the final score, source's own score) → fused candidates."""
    finals: dict[int, float] = {}
    scores: dict[int, dict[str, float]] = {}
    for name, section, share, score in contributions:
        finals[section] = finals.get(section, 0.0) + share
        scores.setdefault(section, {})[name] = round(score, 6)
    fused = [Fused(section, finals[section], scores[section]) for section in finals]
    return sorted(fused, key=lambda item: (-item.final, item.section))


def rrf(sources: Mapping[str, Ranked], k: int, weights: Mapping[str, float]) -> list[Fused]:
    """Σ_source weight / (k + rank), rank starting at 1."""
    return _gather(
        (name, section, weight / (k + rank), score)
        for name, ranked in sources.items()
        if (weight := weights.get(name, 0.0)) > 0
        for rank, (section, score) in enumerate(ranked, start=1)
    )


def weighted_fusion(sources: Mapping[str, Ranked], weights: Mapping[str, float]) -> list[Fused]:
    """Σ_source weight × score / best score of that source."""
    return _gather(
        (name, section, weight * score / top, score)
        for name, ranked in sources.items()
        if ranked and (weight := weights.get(name, 0.0)) > 0
        for top in [max(s for _, s in ranked) or 1.0]
        for section, score in ranked
    )


def fuse(
    sources: Mapping[str, Ranked], method: str, k: int, weights: Mapping[str, float]
) -> list[Fused]:
    """A single source keeps its own order; several are fused with ``method`` (one of
    ``FUSION_METHODS``; any other name raises ``ConfigError``)."""
    live = {name: ranked for name, ranked in sources.items() if ranked}
    if method == "weighted":
        return weighted_fusion(live, weights)
    if method == "rrf":
        return rrf(live, k, weights)
    check_choice("fuse", "method", method, FUSION_METHODS)
    raise AssertionError("unreachable: check_choice raised")


def annotate(fused: Sequence[Fused], name: str, ranked: Ranked) -> list[Fused]:
    """A source that does not vote (graph neighbours; keyword phrases by default) never reorders
    what the query matched — measured on the golden set, fusing graph neighbours as a source cost
    30 points of hit@1 and keyword votes displaced BM25's best section. Its score is recorded on
    the candidates it shares, and the candidates it alone found are appended after them."""
    own = {section: round(score, 6) for section, score in ranked}
    floor = min((f.final for f in fused), default=1.0)
    top = max((v for _, v in ranked), default=1.0) or 1.0
    shared = {f.section for f in fused}
    kept = [f.with_score(name, own[f.section]) if f.section in own else f for f in fused]
    appended: dict[int, Fused] = {}
    for section, score in ranked:
        if section not in shared and section not in appended:
            appended[section] = Fused(section, floor * 0.5 * score / top, {name: own[section]})
    return kept + sorted(appended.values(), key=lambda f: (-f.final, f.section))


def voting_sources(state: QueryState) -> dict[str, Ranked]:
    """Ranked lists that may enter fusion (exact hits are pinned, graph nodes annotate)."""
    lexical = state.lexical_result()
    return {"keyword": lexical.keyword, "bm25": lexical.bm25, "vector": state.vector}


def source_names(state: QueryState) -> list[str]:
    """Names of the sources that found something, in cascade order, for the trace."""
    found = {"exact": bool(state.exact), "graph": bool(state.graph)}
    found.update({name: bool(ranked) for name, ranked in voting_sources(state).items()})
    return [name for name in SOURCE_ORDER if found[name]]


def fusion_weights(state: QueryState, level: Level) -> dict[str, float]:
    """Source weights with the vector list scaled by the lexical confidence level."""
    config = state.config
    weights = dict(config.source_weights)
    if "vector" in weights:
        weights["vector"] *= config.vector_weight_by_level.get(level, 1.0)
    return weights


def fuse_candidates(state: QueryState) -> list[Fused]:
    """Exact/context targets pinned first (they are decisions), the rest boosted, fused, and
    annotated by the non-voting sources and the UI context."""
    package, request, config = state.package, state.request, state.config
    in_context = context_targets(package, request.page, request.tab, request.focus)
    sources = voting_sources(state)
    candidates = sorted({s for ranked in sources.values() for s, _ in ranked})
    factors = boost_factors(
        package, candidates, config.trust_weights, in_context, config.context_boost
    )
    sources = {name: boosted(ranked, factors) for name, ranked in sources.items()}
    weights = fusion_weights(state, state.verdict().level)
    fused = fuse(sources, config.fusion, config.rrf_k, weights)
    for name, ranked in sources.items():
        if weights.get(name, 0.0) <= 0:
            fused = annotate(fused, name, ranked)
    fused = annotate(fused, "graph", [(s, v) for s, v, _ in state.graph])
    fused = [
        f.with_score("context", config.context_boost) if f.section in in_context else f
        for f in fused
    ]
    return _pin_exact(state, fused)


def _pin_exact(state: QueryState, fused: list[Fused]) -> list[Fused]:
    """Exact and UI-context targets first, above the best fused score, in hit order."""
    by_section = {f.section: f for f in fused}
    pinned: dict[int, Fused] = {}
    for hit in state.exact:
        section = hit_section(state.package, hit)
        item = pinned.get(section) or by_section.get(section) or Fused(section)
        pinned[section] = item.with_score(hit.source, 1.0)
    top = max((f.final for f in fused), default=0.0)
    lifted = [Fused(f.section, max(f.final, top) + PIN_LIFT, f.scores) for f in pinned.values()]
    return lifted + [f for f in fused if f.section not in pinned]


def record_fusion(state: QueryState, fused: Sequence[Fused], k: int) -> None:
    """The fusion stage in the trace: method, sources, K and the top-K ranking."""
    state.trace.stage(
        "fusion",
        method=state.config.fusion,
        sources=source_names(state),
        top_k=k,
        ranking=[[SectionRef(f.section), round(f.final, 6), dict(f.scores)] for f in fused[:k]],
    )
