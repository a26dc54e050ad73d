"""Stage — adaptive top-K: three sections for a confident answer, eight for a doubtful one,
fifteen for a weak one, unless the caller asks for a number (the cascade's cut by the
document budget is checked in ``tests/cascade/test_ranking.py``)."""

from __future__ import annotations

import pytest

from router.config import DEFAULT_TOP_K_BY_LEVEL, RouterConfig
from router.contract import Level
from router.stages.topk import adaptive_k


@pytest.mark.parametrize(("level", "k"), [("HIGH", 3), ("MEDIUM", 8), ("LOW", 15)])
def test_the_default_k_grows_as_confidence_falls(level: Level, k: int) -> None:
    assert adaptive_k(level, RouterConfig().top_k_by_level, None) == k


@pytest.mark.parametrize(("level", "requested"), [("HIGH", 1), ("HIGH", 40), ("LOW", 2)])
def test_the_callers_top_k_wins_over_the_level(level: Level, requested: int) -> None:
    assert adaptive_k(level, DEFAULT_TOP_K_BY_LEVEL, requested) == requested


def test_configured_levels_are_used_and_a_missing_level_takes_lows() -> None:
    levels = {"HIGH": 2, "MEDIUM": 4, "LOW": 6}
    order: tuple[Level, ...] = ("HIGH", "MEDIUM", "LOW")
    assert [adaptive_k(level, levels, None) for level in order] == [2, 4, 6]
    assert adaptive_k("MEDIUM", {"HIGH": 2, "LOW": 6}, None) == 6
    assert adaptive_k("MEDIUM", {"HIGH": 2}, None) == DEFAULT_TOP_K_BY_LEVEL["LOW"] == 15
