"""The request fields of seed 004 act: ``context`` completes a follow-up question from the turn
before it, and ``latency_preference`` chooses the stages (and shows which)."""

from __future__ import annotations

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade, run_query
from router.stages.cache import QueryCache
from router.sync import run_sync
from router.vectors.hash_embedder import HashEmbedder
from tests.common import TODAY

FIRST = "Qual a validade da APR?"


def ask(package: KnowledgePackage, query: str, **fields: object) -> QueryResponse:
    return run_query(package, QueryRequest(query=query, **fields), today=TODAY)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("follow_up", "context", "doc_id", "said"),
    [
        ("e a da PT?", FIRST, "workPermit.validity", "7"),
        ("quem aprova ela?", FIRST, "apr.approval", "Técnico de Segurança"),
        ("e a da PT?", f"user: {FIRST}\nassistant: 30 dias.", "workPermit.validity", "7"),
    ],
)
def test_a_follow_up_is_answered_about_the_subject_of_the_turn_before(
    package: KnowledgePackage, follow_up: str, context: str, doc_id: str, said: str
) -> None:
    response = ask(package, follow_up, context=context)
    assert response.results[0].doc_id == doc_id
    assert response.strategy_used == "direct_answer" and said in response.answer
    assert response.trace["stages"]["references"]["resolved"]  # the question searched, shown


def test_without_context_a_follow_up_is_searched_as_asked(package: KnowledgePackage) -> None:
    response = ask(package, "e a da PT?")
    assert "references" not in response.trace["stages"]
    assert not response.answer.startswith("Validade da Permissão")


def test_a_whole_question_ignores_the_earlier_turns(package: KnowledgePackage) -> None:
    alone = ask(package, "Qual a carga horária do curso básico de NR-10?")
    after = ask(package, "Qual a carga horária do curso básico de NR-10?", context=FIRST)
    assert after.results == alone.results and after.answer == alone.answer


def test_the_cache_never_serves_a_follow_up_asked_after_another_turn(
    package: KnowledgePackage,
) -> None:
    services = CascadeServices(cache=QueryCache(64))

    def cached(context: str) -> QueryResponse:
        request = QueryRequest(query="e a da PT?", context=context)
        return run_sync(run_cascade(package, request, services=services, today=TODAY))

    about_validity = cached(FIRST)
    about_approval = cached("Quem aprova a APR?")
    assert about_approval.metadata.cache == "miss"
    assert about_validity.answer != about_approval.answer
    assert cached(FIRST).metadata.cache == "memory"  # the same turns: the same entry


@pytest.fixture
def vservices(vindex: LocalVectorIndex) -> CascadeServices:
    return CascadeServices(embedder=HashEmbedder(), vector_index=vindex, cache=QueryCache(64))


WEAK = "treinamento de emergência"  # MEDIUM: the vector stage runs at the normal tier


@pytest.mark.parametrize(
    ("preference", "tier"),
    [("rápido", "fast"), ("fast", "fast"), ("normal", "normal"), ("qualidade", "quality")],
)
def test_the_latency_tier_shows_in_the_analysis(
    vpackage: KnowledgePackage, vservices: CascadeServices, preference: str, tier: str
) -> None:
    request = QueryRequest(query=WEAK, latency_preference=preference)  # type: ignore[arg-type]
    response = run_sync(run_cascade(vpackage, request, services=vservices, today=TODAY))
    assert response.analysis.latency_tier == tier
    vector = response.trace["stages"]["vector"]
    if tier == "fast":
        assert "fast" in vector["skipped"] and not response.metadata.fallback_triggered
        assert all("vector" not in r.scores for r in response.results)
    else:
        assert response.metadata.fallback_triggered
    if tier == "quality":
        assert response.strategy_used == "enriched_rag"
    else:
        assert response.strategy_used == "simple_rag"


def test_each_tier_has_its_own_cache_entry(
    vpackage: KnowledgePackage, vservices: CascadeServices
) -> None:
    def asked(preference: str) -> QueryResponse:
        request = QueryRequest(query=WEAK, latency_preference=preference)  # type: ignore[arg-type]
        return run_sync(run_cascade(vpackage, request, services=vservices, today=TODAY))

    assert asked("normal").metadata.cache == "miss"
    fast = asked("rápido")
    assert fast.metadata.cache == "miss" and not fast.metadata.fallback_triggered
    assert asked("fast").metadata.cache == "memory"  # "rápido" and "fast" are one tier
