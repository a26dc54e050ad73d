"""Stage — adaptive top-K (PRD §22): as few sections as the confidence allows.

Why: a confident answer needs three passages; a doubtful one needs more context (and the
vector fallback) so the agent can still find the answer — never a fixed twenty.
"""

from __future__ import annotations

from collections.abc import Mapping

from router.config import DEFAULT_TOP_K_BY_LEVEL, RouterConfig
from router.contract import Level

__all__ = ["adaptive_k", "shown_k"]


def adaptive_k(level: Level, by_level: Mapping[str, int], requested: int | None) -> int:
    """The caller's explicit ``top_k`` wins; otherwise the level's K (LOW's for unknown levels)."""
    if requested is not None:
        return requested
    return by_level.get(level, by_level.get("LOW", DEFAULT_TOP_K_BY_LEVEL["LOW"]))


def shown_k(level: Level, config: RouterConfig, requested: int | None) -> int:
    """How many sections a response at ``level`` shows: ``adaptive_k`` within the budget's
    ``max_documents``."""
    return min(adaptive_k(level, config.top_k_by_level, requested), config.budget.max_documents)
