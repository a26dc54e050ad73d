"""Metrics of the cascade through the service: cache hits, exact matches, vector fallbacks,
abstentions and lexical successes counted as the queries did them."""

from __future__ import annotations

import asyncio

import pytest

from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.indexer import CompiledPackage
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.ops.publish import publish_package
from router.service import KnowledgeService
from router.stages.cache import QueryCache
from router.vectors.hash_embedder import HashEmbedder
from tests.cascade.common import (
    EXACT_ID,
    HIGH_LEXICAL,
    LOW_LEXICAL,
    OUT_OF_SCOPE,
    DictBlobs,
    DictKV,
    stage,
)
from tests.common import TODAY


@pytest.fixture
def vector_service(compiled: CompiledPackage) -> KnowledgeService:
    """A service over the vector package, published to in-memory stores, with a query cache."""
    kv, blobs = DictKV(), DictBlobs()
    asyncio.run(publish_package(compiled.files(), blobs, kv))
    return KnowledgeService(
        kv=kv,
        blobs=blobs,
        embedder=HashEmbedder(),
        vector_index=LocalVectorIndex(HashEmbedder.dimensions),
        load_vectors_on_activation=True,
        cache=QueryCache(32, kv),
        config=RouterConfig(budget=RetrievalBudget(max_latency_ms=60_000)),  # no timing flakes
    )


def test_metrics_count_what_the_queries_did(vector_service: KnowledgeService) -> None:
    queries = [EXACT_ID, EXACT_ID, LOW_LEXICAL, OUT_OF_SCOPE, HIGH_LEXICAL, LOW_LEXICAL]
    responses = [
        asyncio.run(vector_service.query(QueryRequest(query=q), today=TODAY)) for q in queries
    ]
    assert [r.metadata.cache for r in responses] == [
        "miss",
        "memory",
        "miss",
        "miss",
        "miss",
        "memory",
    ]
    computed = [r for r in responses if r.metadata.cache == "miss"]
    metrics = vector_service.metrics
    assert metrics.queries == len(queries) == 6
    assert metrics.cache_hits == 2
    assert metrics.exact_matches == 1 == sum(bool(stage(r, "exact")["hits"]) for r in computed)
    assert metrics.vector_fallbacks == 2 == sum(r.metadata.fallback_triggered for r in computed)
    assert metrics.abstentions == 1
    assert metrics.bm25_successes == 1  # HIGH_LEXICAL: answered by the lexical stages alone
    rates = metrics.rates()
    assert rates["cache_hit_rate"] == pytest.approx(2 / 6)
    assert rates["vector_fallback_rate"] == pytest.approx(2 / 6)
    assert metrics.stage_ms["bm25"] >= 0 and "vector" in metrics.stage_ms


def test_service_metrics_count_cache_hits_and_exact_matches(service: KnowledgeService) -> None:
    service.cache = QueryCache(8)

    def ask(query: str) -> QueryResponse:
        return asyncio.run(service.query(QueryRequest(query=query), today=TODAY))

    for query in (EXACT_ID, "O que é APR?", EXACT_ID, HIGH_LEXICAL, "O que é APR?"):
        ask(query)
    snapshot = service.metrics.snapshot()
    assert snapshot["queries"] == 5
    assert snapshot["cache_hits"] == 2
    assert snapshot["exact_matches"] == 2
    assert snapshot["vector_fallbacks"] == 0  # no embedder configured
    assert snapshot["bm25_successes"] == 1
