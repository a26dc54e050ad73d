"""The latency budget in the cascade: a spent budget skips the graph and the vector stage
and still answers; a generous one is not reported."""

from __future__ import annotations

from router.config import RetrievalBudget, RouterConfig
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from tests.cascade.common import (
    HIGH_LEXICAL,
    LOW_LEXICAL,
    SteppingClock,
    cascade,
    ran,
    stage,
)


def test_spent_budget_skips_graph_and_vector_but_returns_what_it_has(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_latency_ms=1))
    response = cascade(
        vpackage, LOW_LEXICAL, services=vservices, config=config, clock=SteppingClock()
    )
    assert not response.abstained and response.results
    assert response.metadata.budget_exceeded == ["latency before graph", "latency before vector"]
    assert response.trace["budget"]["exceeded"] == response.metadata.budget_exceeded
    assert "budget" in stage(response, "graph")["skipped"]
    assert "budget" in stage(response, "vector")["skipped"]
    assert not response.metadata.fallback_triggered
    assert all("graph" not in r.scores and "vector" not in r.scores for r in response.results)
    lexical = cascade(vpackage, LOW_LEXICAL, config=RouterConfig(graph_depth=0))
    assert [r.section_id for r in response.results] == [r.section_id for r in lexical.results]


def test_generous_budget_is_not_reported(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    clock = SteppingClock(step=1e-6)
    response = cascade(vpackage, LOW_LEXICAL, services=vservices, clock=clock)
    assert response.metadata.budget_exceeded == []
    assert ran(response, "graph") and ran(response, "vector")


def test_budget_before_vector_only_reports_stages_that_would_have_run(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    config = RouterConfig(budget=RetrievalBudget(max_latency_ms=1))
    response = cascade(
        vpackage, HIGH_LEXICAL, services=vservices, config=config, clock=SteppingClock()
    )
    assert response.metadata.budget_exceeded == ["latency before graph"]
    assert stage(response, "vector")["skipped"] == "lexical confidence HIGH"
    assert len(response.results) == 3
