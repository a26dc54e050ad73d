"""Workers AI's reranker (``@cf/baai/bge-reranker-base``) over a fake ``AI`` binding, and the
Worker's ``KR_RERANKER`` switch: off by default; on, it reorders non-HIGH queries, its answers
are cached apart, and a failing binding leaves the fused order (HTTP 200)."""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.adapters.cloudflare.service import (
    WorkerSettings,
    bindings,
    build_service,
    reset_service,
    settings_from_env,
)
from router.adapters.cloudflare.workers_ai import DEFAULT_RERANK_MODEL, WorkersAiReranker
from router.api.app import create_app
from router.compile.build import BuildResult
from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError, RerankError
from router.namespaced import NamespacedStore
from router.ops.publish import publish_package
from router.service import KnowledgeService
from tests.adapters.cloudflare_fakes import FakeAI, FakeD1, FakeKV, FakeR2, fake_env
from tests.common import TODAY

MEDIUM_QUESTION = "treinamento de emergência"  # MEDIUM: the reranker runs
PASSAGES = ["the cat sat", "a dog", "the cat and the dog"]


@pytest.fixture(autouse=True)
def _fresh_isolate() -> Iterator[None]:
    reset_service()
    yield
    reset_service()


@pytest.fixture
def env(built: BuildResult) -> types.SimpleNamespace:
    worker_env = fake_env(KNOWLEDGE_KV=FakeKV(), KNOWLEDGE_BUCKET=FakeR2(), AI=FakeAI())
    worker_env.KNOWLEDGE_DB = FakeD1()
    cf = bindings(worker_env)
    assert cf.blobs and cf.kv and cf.relational
    asyncio.run(publish_package(built.package.files(), cf.blobs, cf.kv, cf.relational))
    return worker_env


def ask(service: KnowledgeService, query: str = MEDIUM_QUESTION) -> QueryResponse:
    return asyncio.run(service.query(QueryRequest(query=query), today=TODAY))


def test_the_request_and_the_scores_mapped_back_by_id() -> None:
    ai = FakeAI()
    scores = asyncio.run(WorkersAiReranker(ai).rerank("the cat", PASSAGES))
    assert scores == [2.0, 0.0, 2.0]
    [(model, inputs)] = ai.calls
    assert model == DEFAULT_RERANK_MODEL == "@cf/baai/bge-reranker-base"
    assert inputs == {
        "query": "the cat",
        "contexts": [{"text": t} for t in PASSAGES],
        "top_k": 3,  # every passage: the model answers only top_k rows
    }


def test_failures_are_rerank_errors() -> None:
    broken = FakeAI()
    broken.fail = True
    with pytest.raises(RerankError, match="Capacity temporarily exceeded"):
        asyncio.run(WorkersAiReranker(broken).rerank("q", PASSAGES))

    class Odd(FakeAI):
        async def run(self, model: str, inputs: dict[str, Any]) -> dict[str, Any]:
            return {"response": [{"id": 9, "score": 1.0}]}

    with pytest.raises(RerankError, match="index 9"):
        asyncio.run(WorkersAiReranker(Odd()).rerank("q", PASSAGES))

    class Empty(FakeAI):
        async def run(self, model: str, inputs: dict[str, Any]) -> dict[str, Any]:
            return {"result": "?"}

    with pytest.raises(RerankError, match="no response rows"):
        asyncio.run(WorkersAiReranker(Empty()).rerank("q", PASSAGES))


def test_the_worker_reranks_only_when_asked() -> None:
    assert settings_from_env(fake_env()).reranker == "off"
    on = settings_from_env(fake_env(KR_RERANKER="workers-ai", KR_RERANKER_MODEL="@cf/x/r"))
    assert on.reranker == "workers-ai" and on.reranker_model == "@cf/x/r"
    with pytest.raises(ConfigError, match="KR_RERANKER"):
        settings_from_env(fake_env(KR_RERANKER="cohere"))


def test_off_by_default_the_binding_never_sees_a_rerank(env: Any) -> None:
    service = build_service(bindings(env), WorkerSettings())
    assert service.reranker is None
    response = ask(service)
    assert response.trace["stages"]["rerank"]["skipped"] == "no reranker configured"
    assert not [m for m, _ in env.AI.calls if m == DEFAULT_RERANK_MODEL]


def test_on_it_reorders_non_high_queries_and_caches_them_apart(env: Any) -> None:
    service = build_service(bindings(env), WorkerSettings(reranker="workers-ai"))
    assert isinstance(service.reranker, WorkersAiReranker)
    assert service.cache is not None and isinstance(service.cache.kv, NamespacedStore)
    response = ask(service)
    stage = response.trace["stages"]["rerank"]
    assert stage["model"] == DEFAULT_RERANK_MODEL and stage["candidates"] > 1
    assert all("rerank" in r.scores for r in response.results)
    [(_, inputs)] = [(m, i) for m, i in env.AI.calls if m == DEFAULT_RERANK_MODEL]
    assert inputs["query"] == "treinamento de emergência" and len(inputs["contexts"]) > 1
    cached = [k for k in env.KNOWLEDGE_KV.values if "qcache:" in k]
    assert cached and all(k.startswith(f"rr:{DEFAULT_RERANK_MODEL}:qcache:") for k in cached)
    plain = build_service(bindings(env), WorkerSettings())  # another isolate, reranker off
    assert ask(plain).metadata.cache == "miss"  # it never reads the reranked answer


def test_a_failing_binding_keeps_the_fused_order_and_answers_200(env: Any) -> None:
    plain = ask(build_service(bindings(env), WorkerSettings()))
    env.AI.fail = True
    service = build_service(bindings(env), WorkerSettings(reranker="workers-ai"))
    reply = TestClient(create_app(service)).post("/v1/query", json={"query": MEDIUM_QUESTION})
    assert reply.status_code == 200
    body = reply.json()
    assert body["trace"]["stages"]["rerank"]["degraded"] == "rerank_failed"
    assert [r["section_id"] for r in body["results"]] == [r.section_id for r in plain.results]


def test_without_an_ai_binding_there_is_no_rerank_stage(built: BuildResult) -> None:
    worker_env = fake_env(KNOWLEDGE_KV=FakeKV(), KNOWLEDGE_BUCKET=FakeR2())
    service = build_service(bindings(worker_env), WorkerSettings(reranker="workers-ai"))
    assert service.reranker is None
