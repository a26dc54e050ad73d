"""The latency tier a request asks for (seed 004 ``latency_preference``) and what it changes.

Why tiers: an autocomplete box wants the deterministic stages only, a support agent drafting an
answer can wait for vectors and the reranker. ``fast`` runs the lexical stages only (cache,
exact, keyword, BM25, corrective, graph: no embedding or reranker call); ``normal`` is the
cascade as configured (vectors, and the reranker when one is configured, when the lexical
confidence is not HIGH); ``quality`` runs the same stages with twice the latency budget, so
the vector stage and the reranker are not the ones the budget cuts. The tier is part of
the cache key, and shows in ``analysis.latency_tier`` and in ``strategy_used`` (an extractive
answer that vectors or the reranker shaped at ``quality`` is ``enriched_rag``).
"""

from __future__ import annotations

import dataclasses

from router.config import RouterConfig
from router.contract import QueryRequest
from router.results import LatencyTier

__all__ = ["latency_tier", "tier_config"]


_TIERS: dict[str, LatencyTier] = {
    "rápido": "fast",
    "rapido": "fast",
    "fast": "fast",
    "normal": "normal",
    "qualidade": "quality",
    "quality": "quality",
}
QUALITY_BUDGET_FACTOR = 2.0


def latency_tier(request: QueryRequest) -> LatencyTier:
    """The request's ``latency_preference`` in the contract's English names."""
    return _TIERS.get(request.latency_preference, "normal")


def tier_config(config: RouterConfig, tier: LatencyTier) -> RouterConfig:
    """``config`` for the tier: ``quality`` gets ``QUALITY_BUDGET_FACTOR`` × the latency
    budget (still a bound); the other tiers use it as it is."""
    if tier != "quality":
        return config
    budget = config.budget
    longer = dataclasses.replace(
        budget, max_latency_ms=budget.max_latency_ms * QUALITY_BUDGET_FACTOR
    )
    return dataclasses.replace(config, budget=longer)
