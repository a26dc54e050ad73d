"""The rerank stage: it reorders the fused top-N when the reranker disagrees, runs only when the
confidence is not HIGH and budget is left, degrades to the fused order (never a 500) when the
reranker fails or is slow, and only ever shows a reranker the caller's own candidates."""

from __future__ import annotations

import asyncio
import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router import pipeline
from router.api.app import create_app
from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError, RerankError
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade
from router.results import Fused
from router.service import KnowledgeService
from router.stages.rerank import RERANK_SOURCE, blend, scores_by_index
from router.sync import run_sync
from tests.common import ALFA, BETA, KNOWLEDGE, TODAY

MEDIUM_QUESTION = "treinamento de emergência"  # MEDIUM on the sample: the reranker runs
HIGH_QUESTION = "para que serve o CA do EPI?"  # HIGH without an exact hit: it does not


class Scripted:
    """A reranker that scores passages with ``score(index, passage)`` and remembers what it
    was shown."""

    model = "scripted"

    def __init__(self, score: Any = None) -> None:
        self.score = score or (lambda i, passage: -float(i))  # agrees with the fused order
        self.calls: list[tuple[str, list[str]]] = []

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        self.calls.append((question, list(passages)))
        return [float(self.score(i, p)) for i, p in enumerate(passages)]


class Failing:
    model = "failing"

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        raise RerankError("rerank endpoint http://127.0.0.1:9/rerank: HTTP 503: overloaded")


class Slow:
    model = "slow"

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        await asyncio.sleep(5)
        return [0.0] * len(passages)


class WrongShape:
    model = "wrong-shape"

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        return [1.0]  # one score for many passages


def ask(
    package: KnowledgePackage,
    query: str,
    reranker: Any = None,
    config: RouterConfig | None = None,
    **request: Any,
) -> QueryResponse:
    services = CascadeServices(reranker=reranker)
    return run_sync(
        run_cascade(package, QueryRequest(query=query, **request), config, services, today=TODAY)
    )


def ids(response: QueryResponse) -> list[str]:
    return [r.section_id for r in response.results]


def test_the_reranker_reorders_the_fused_candidates_when_it_disagrees(
    package: KnowledgePackage,
) -> None:
    fused = ask(package, MEDIUM_QUESTION)
    assert fused.confidence_level == "MEDIUM"
    assert fused.trace["stages"]["rerank"]["skipped"] == "no reranker configured"
    third = ids(fused)[2]
    reranker = Scripted(lambda i, passage: 1.0 if i == 2 else -float(i))
    reranked = ask(package, MEDIUM_QUESTION, reranker)
    assert ids(reranked)[0] == third
    assert ids(reranked)[1:3] == ids(fused)[:2]
    assert reranked.results[0].scores[RERANK_SOURCE] == 1.0
    assert all(RERANK_SOURCE in r.scores for r in reranked.results)
    scores = [r.final_score for r in reranked.results]
    assert scores == sorted(scores, reverse=True)  # each slot keeps its fused score
    stage = reranked.trace["stages"]["rerank"]
    assert stage["model"] == "scripted" and stage["level_before"] == "MEDIUM"
    assert stage["candidates"] == RouterConfig().rerank_candidates
    assert stage["ranking"][0] == [third, 1.0, 3]
    question, passages = reranker.calls[0]
    assert question == "treinamento de emergência" and len(passages) == stage["candidates"]
    assert passages[0].startswith("Atendimento a emergências\n")  # title, then text


def test_a_reranker_that_agrees_changes_nothing_but_the_scores(package: KnowledgePackage) -> None:
    fused, reranked = ask(package, MEDIUM_QUESTION), ask(package, MEDIUM_QUESTION, Scripted())
    assert ids(reranked) == ids(fused)
    assert reranked.answer == fused.answer
    assert reranked.trace["stages"]["rerank"]["moved"] == 0


def test_it_is_skipped_at_high_confidence_unless_asked_always(package: KnowledgePackage) -> None:
    reranker = Scripted(lambda i, passage: float(i))  # would reverse everything
    high = ask(package, HIGH_QUESTION, reranker)
    assert high.confidence_level == "HIGH" and not high.trace["stages"]["exact"].get("hits")
    assert high.trace["stages"]["rerank"]["skipped"] == "confidence HIGH"
    assert reranker.calls == []
    always = ask(package, HIGH_QUESTION, reranker, RouterConfig(always_rerank=True))
    assert reranker.calls and always.trace["stages"]["rerank"]["moved"] > 0


def test_it_is_skipped_on_an_exact_hit_and_when_abstaining(package: KnowledgePackage) -> None:
    reranker = Scripted()
    exact = ask(package, "workPermit.validity", reranker, RouterConfig(always_rerank=True))
    assert exact.trace["stages"]["rerank"]["skipped"] == "exact hit"
    declined = ask(package, "qual a capital da mongólia?", reranker)
    assert declined.abstained and declined.trace["stages"]["rerank"]["skipped"] == "abstaining"
    assert reranker.calls == []


def test_it_is_skipped_when_the_latency_budget_is_spent(
    package: KnowledgePackage, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [0.0]
    recorded = pipeline.record_fusion

    def fusion_then_deadline(*args: Any) -> None:
        recorded(*args)
        now[0] += 3600.0  # the budget is spent right after fusion

    monkeypatch.setattr(pipeline, "record_fusion", fusion_then_deadline)
    reranker = Scripted(lambda i, passage: float(i))
    services = CascadeServices(reranker=reranker)
    request = QueryRequest(query=MEDIUM_QUESTION)
    response = run_sync(
        run_cascade(package, request, None, services, today=TODAY, clock=lambda: now[0])
    )
    assert response.trace["stages"]["rerank"]["skipped"] == "latency budget spent"
    assert "latency before rerank" in response.metadata.budget_exceeded
    assert reranker.calls == [] and ids(response) == ids(ask(package, MEDIUM_QUESTION))


@pytest.mark.parametrize(
    ("reranker", "code"),
    [(Failing(), "rerank_failed"), (WrongShape(), "rerank_failed"), (Slow(), "rerank_timeout")],
)
def test_a_failing_or_slow_reranker_keeps_the_fused_order(
    package: KnowledgePackage, reranker: Any, code: str
) -> None:
    fused = ask(package, MEDIUM_QUESTION)
    config = RouterConfig(rerank_timeout_ms=50.0)
    services = CascadeServices(reranker=reranker)
    response = asyncio.run(  # an event loop, so the timeout can fire
        run_cascade(package, QueryRequest(query=MEDIUM_QUESTION), config, services, today=TODAY)
    )
    assert ids(response) == ids(fused) and response.answer == fused.answer
    stage = response.trace["stages"]["rerank"]
    assert stage["degraded"] == code and stage["kept"] == "fused order"
    assert stage["model"] == reranker.model and stage["reason"]
    assert all(RERANK_SOURCE not in r.scores for r in response.results)


def test_the_http_api_answers_200_when_the_reranker_fails(service: KnowledgeService) -> None:
    service.reranker = Failing()
    reply = TestClient(create_app(service)).post("/v1/query", json={"query": MEDIUM_QUESTION})
    assert reply.status_code == 200
    body = reply.json()
    assert body["trace"]["stages"]["rerank"]["degraded"] == "rerank_failed"
    assert body["results"] and body["answer"]


def test_the_service_passes_its_reranker_to_the_cascade(service: KnowledgeService) -> None:
    reranker = Scripted(lambda i, passage: 1.0 if i == 1 else -float(i))
    service.reranker = reranker
    response = run_sync_service(service, MEDIUM_QUESTION)
    assert reranker.calls and response.trace["stages"]["rerank"]["model"] == "scripted"


def run_sync_service(service: KnowledgeService, query: str) -> QueryResponse:
    return asyncio.run(service.query(QueryRequest(query=query), today=TODAY))


# --- tenant isolation ------------------------------------------------------------------------


def _titles_by_tenant() -> dict[str, set[str]]:
    """Titles of the tenant-only documents of the sample, per tenant."""
    found: dict[str, set[str]] = {}
    for path in sorted(Path(KNOWLEDGE).rglob("*.md")):
        head = path.read_text(encoding="utf-8").split("---")[1]
        tenant = re.search(r"^tenant:\s*(.+)$", head, re.M)
        title = re.search(r"^title:\s*(.+)$", head, re.M)
        if tenant and title and tenant[1].strip().strip("'\"") not in ("*",):
            found.setdefault(tenant[1].strip().strip("'\""), set()).add(title[1].strip().strip('"'))
    return found


@pytest.mark.parametrize("tenant", [None, ALFA, BETA])
def test_the_reranker_sees_only_the_callers_candidates(
    package: KnowledgePackage, tenant: str | None
) -> None:
    titles = _titles_by_tenant()
    assert set(titles) == {ALFA, BETA}
    others = {t for owner, own in titles.items() if owner != tenant for t in own}
    # another tenant's titles name concepts the caller's view does not know ("Metalúrgica Beta"
    # asked by Alfa): declined, not reranked (docs/adr/0023); the shared questions are served
    shared = [MEDIUM_QUESTION, "permissão", "inventário de riscos"]
    questions = [t for own in titles.values() for t in own] + shared
    reranker = Scripted()
    config = RouterConfig(always_rerank=True, rerank_candidates=50)
    for question in questions:
        before = len(reranker.calls)
        response = ask(package, question, reranker, config, tenant=tenant)
        served = not response.abstained and not response.trace["stages"]["exact"]["hits"]
        assert len(reranker.calls) == before + served, question  # every served answer reranked
    assert len(reranker.calls) >= 3
    shown = {p.split("\n")[0].split(" › ")[0] for _, passages in reranker.calls for p in passages}
    assert shown and not shown & others
    if tenant is not None:  # its own documents do reach the reranker
        assert shown & titles[tenant]


# --- the pieces ------------------------------------------------------------------------------


def test_blend_weighs_the_reranker_against_the_fused_order() -> None:
    head = [Fused(s, 1.0 - s / 10, {"bm25": 1.0}) for s in range(4)]
    scores = [0.0, 0.0, 0.0, 9.0]  # the reranker puts the last one first
    alone = blend(head, scores, 1.0, 60)
    assert [f.section for f in alone] == [3, 0, 1, 2]
    assert [f.final for f in alone] == [f.final for f in head]  # slots keep their scores
    assert alone[0].scores == {"bm25": 1.0, "rerank": 9.0}
    assert [f.section for f in blend(head, scores, 0.0, 60)] == [0, 1, 2, 3]
    assert [f.section for f in blend(head, scores, 0.5, 60)] == [0, 3, 1, 2]


def test_scores_by_index_maps_api_pairs_back_to_passages() -> None:
    assert scores_by_index([(2, 0.9), (0, 0.5), (1, 0.1)], 3, "x") == [0.5, 0.1, 0.9]
    assert scores_by_index([(1, 2.0)], 3, "x") == [1.0, 2.0, 1.0]  # left out: below the rest
    for bad in ([(3, 1.0)], [(-1, 1.0)], [("0", 1.0)], [(0, "high")], [(0, float("nan"))], []):
        with pytest.raises(RerankError):
            scores_by_index(bad, 3, "x")


@pytest.mark.parametrize(
    "field",
    [
        {"rerank_candidates": 1},
        {"rerank_candidates": 101},
        {"rerank_passage_chars": 0},
        {"rerank_timeout_ms": 0},
        {"rerank_weight": 1.5},
    ],
)
def test_rerank_settings_are_checked(field: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match=next(iter(field))):
        dataclasses.replace(RouterConfig(), **field)


def test_a_flagged_section_reaches_the_reranker_by_its_title_only(
    package: KnowledgePackage,
) -> None:
    reranker = Scripted()
    config = RouterConfig(always_rerank=True)
    ask(package, "texto recebido de um usuário no fórum interno", reranker, config)
    [(_, passages)] = reranker.calls
    flagged = [p for p in passages if "fórum interno" in p]
    assert flagged == ["Dicas de uso do aplicativo › Texto recebido de um usuário no fórum interno"]
    assert not any("Ignore todas as instruções" in p for p in passages)
