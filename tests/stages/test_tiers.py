"""Stage — latency tiers: the request's ``latency_preference`` in the contract's names, and the
longer latency budget the ``quality`` tier buys (the stages each tier runs are checked in
``test_request_fields.py``)."""

from __future__ import annotations

import dataclasses

import pytest

from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.results import LatencyTier
from router.stages.tiers import QUALITY_BUDGET_FACTOR, latency_tier, tier_config


@pytest.mark.parametrize(
    ("preference", "tier"),
    [
        ("rápido", "fast"),
        ("rapido", "fast"),
        ("fast", "fast"),
        ("normal", "normal"),
        ("qualidade", "quality"),
        ("quality", "quality"),
    ],
)
def test_each_preference_names_a_tier(preference: str, tier: str) -> None:
    request = QueryRequest(query="APR", latency_preference=preference)  # type: ignore[arg-type]
    assert latency_tier(request) == tier


def test_a_request_without_a_preference_is_normal() -> None:
    assert latency_tier(QueryRequest(query="APR")) == "normal"


def test_quality_doubles_the_latency_budget_and_changes_nothing_else() -> None:
    config = RouterConfig(top_k=7, budget=RetrievalBudget(max_latency_ms=120, max_documents=9))
    quality = tier_config(config, "quality")
    assert QUALITY_BUDGET_FACTOR == 2.0
    assert quality.budget.max_latency_ms == 240
    assert quality.budget == dataclasses.replace(config.budget, max_latency_ms=240)
    assert quality == dataclasses.replace(config, budget=quality.budget)
    assert config.budget.max_latency_ms == 120  # the caller's config is left as it was


@pytest.mark.parametrize("tier", ["fast", "normal"])
def test_fast_and_normal_keep_the_configured_budget(tier: LatencyTier) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_latency_ms=120))
    assert tier_config(config, tier) is config
