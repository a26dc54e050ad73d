"""The cascade's ranking: each source's score in the fused trace, and the adaptive top-K
(by confidence level, configured levels, an explicit ``top_k``, the document budget)."""

from __future__ import annotations

import pytest

from router.config import RetrievalBudget, RouterConfig
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from tests.cascade.common import (
    HIGH_LEXICAL,
    LOW_AT_0_6,
    LOW_MANY,
    MEDIUM_LEXICAL,
    cascade,
    ran,
    stage,
)


def test_cascade_trace_shows_each_sources_score(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    response = cascade(vpackage, MEDIUM_LEXICAL, services=vservices)
    fusion = stage(response, "fusion")
    assert {"bm25", "vector"} <= set(fusion["sources"])
    assert fusion["method"] == "rrf"
    both = [r for r in response.results if {"bm25", "vector"} <= set(r.scores)]
    assert both, "a section found by both sources keeps both scores"
    finals = [r.final_score for r in response.results]
    assert finals == sorted(finals, reverse=True)


@pytest.mark.parametrize(
    ("query", "level", "settings"),
    [
        (HIGH_LEXICAL, "HIGH", {}),
        (MEDIUM_LEXICAL, "MEDIUM", {}),
        (LOW_MANY, "LOW", {**LOW_AT_0_6, "abstain_below": 0.0}),  # LOW served when allowed
    ],
)
def test_adaptive_top_k_follows_the_confidence_level(
    package: KnowledgePackage, query: str, level: str, settings: dict[str, float]
) -> None:
    config = RouterConfig(**settings)  # type: ignore[arg-type]
    response = cascade(package, query, config=config)
    assert response.confidence_level == level
    assert len(cascade(package, query, top_k=30).results) > 15  # more candidates than any K
    assert len(response.results) == config.top_k_by_level[level]
    assert stage(response, "fusion")["top_k"] == config.top_k_by_level[level]


def test_a_low_answer_abstains_after_the_corrective_step_with_its_reason(
    package: KnowledgePackage,
) -> None:
    """Seed 001 §8.6: LOW → expand once → still LOW → decline, never the least bad passage as
    an answer: what it found comes back only as evidence, flagged (docs/adr/0022)."""
    config = RouterConfig(**LOW_AT_0_6, abstain_below=0.6)
    response = cascade(package, LOW_MANY, config=config)
    assert ran(response, "corrective")  # the one retry was tried first
    assert response.abstained and response.citations == [] and response.confidence_level == "LOW"
    assert response.results and all("low_evidence" in r.flags for r in response.results)
    assert response.strategy_used == "safe_decline"
    assert response.abstention_reason and "probably not relevant" in response.abstention_reason
    assert not cascade(package, LOW_MANY).abstained  # P ≈ 0.29 is MEDIUM by default


def test_adaptive_top_k_uses_the_configured_levels(package: KnowledgePackage) -> None:
    config = RouterConfig(top_k_by_level={"HIGH": 2, "MEDIUM": 4, "LOW": 6})
    assert len(cascade(package, HIGH_LEXICAL, config=config).results) == 2
    assert len(cascade(package, LOW_MANY, config=config).results) == 4
    levels = {"HIGH": 2, "MEDIUM": 4, "LOW": 6}
    low = RouterConfig(top_k_by_level=levels, **LOW_AT_0_6, abstain_below=0.0)  # type: ignore[arg-type]
    assert len(cascade(package, LOW_MANY, config=low).results) == 6


@pytest.mark.parametrize(("query", "top_k"), [(HIGH_LEXICAL, 7), (LOW_MANY, 2), (LOW_MANY, 40)])
def test_explicit_top_k_wins(package: KnowledgePackage, query: str, top_k: int) -> None:
    assert len(cascade(package, query, top_k=top_k).results) == top_k


def test_max_documents_budget_caps_even_an_explicit_top_k(package: KnowledgePackage) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_documents=4))
    assert len(cascade(package, LOW_MANY, config=config, top_k=10).results) == 4
