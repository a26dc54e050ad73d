"""The query cache seen through the cascade: memory then KV, what splits an entry and
what never shares one (page, version, LLM answer), a failing or corrupt KV, the memory bound."""

from __future__ import annotations

import asyncio
import json

from router.adapters.local.state import LocalState
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices
from router.stages.cache import CACHE_PREFIX, QueryCache
from tests.cascade.common import (
    EXACT_ID,
    DictKV,
    FakeGenerator,
    cascade,
    stage,
)


def test_identical_request_is_served_from_memory_with_the_same_response(
    package: KnowledgePackage,
) -> None:
    services = CascadeServices(cache=QueryCache(16))
    first = cascade(package, "validade da permissão de trabalho", services=services)
    second = cascade(package, "validade da permissão de trabalho", services=services)
    assert first.metadata.cache == "miss"
    assert second.metadata.cache == "memory"
    assert second.trace["served_from_cache"] == "memory"
    assert second.results == first.results and second.results
    assert second.answer == first.answer and second.citations == first.citations
    assert second.knowledge_version == first.knowledge_version


def test_spacing_and_edge_punctuation_do_not_split_the_cache(package: KnowledgePackage) -> None:
    services = CascadeServices(cache=QueryCache(16))
    cascade(package, "validade da permissão de trabalho", services=services)
    again = cascade(package, "  validade da   permissão de trabalho? ", services=services)
    assert again.metadata.cache == "memory"
    shouted = cascade(package, "Validade da Permissão de Trabalho", services=services)
    assert shouted.metadata.cache == "memory"  # letter case does not split the cache either


def test_a_cached_response_names_the_askers_own_query(package: KnowledgePackage) -> None:
    services = CascadeServices(cache=QueryCache(16))
    first = cascade(package, "loto", services=services)
    again = cascade(package, "LOTO", services=services)
    assert again.metadata.cache == "memory" and again.results == first.results
    assert again.context is not None and again.context.query == "LOTO"


def test_without_a_cache_nothing_is_cached(package: KnowledgePackage) -> None:
    response = cascade(package, "validade da permissão de trabalho")
    assert response.metadata.cache == "off"
    assert stage(response, "cache")["skipped"]


def test_same_deictic_question_on_two_pages_never_shares_an_entry(
    package: KnowledgePackage,
) -> None:
    cache = QueryCache(16)
    services = CascadeServices(cache=cache)
    on_profile = cascade(package, "explique isso", services=services, page="profile")
    on_dashboard = cascade(package, "explique isso", services=services, page="dashboard")
    assert on_profile.metadata.cache == "miss"
    assert on_dashboard.metadata.cache == "miss"
    assert on_profile.results[0].doc_id == "app.page.profile"
    assert on_dashboard.results[0].doc_id == "app.page.dashboard"
    assert len(cache.memory) == 2
    back = cascade(package, "explique isso", services=services, page="profile")
    assert back.metadata.cache == "memory"
    assert back.results[0].doc_id == "app.page.profile"


def test_a_new_knowledge_version_never_serves_the_old_versions_entries(
    package: KnowledgePackage, vpackage: KnowledgePackage
) -> None:
    assert package.version != vpackage.version  # same folder, with and without vectors
    services = CascadeServices(cache=QueryCache(16, DictKV()))
    old = cascade(package, "validade da permissão de trabalho", services=services)
    new = cascade(vpackage, "validade da permissão de trabalho", services=services)
    assert old.metadata.cache == "miss" and new.metadata.cache == "miss"
    assert old.knowledge_version == package.version
    assert new.knowledge_version == vpackage.version
    assert new.context is not None and new.context.knowledge_version == vpackage.version


def test_llm_and_extractive_answers_are_cached_apart(package: KnowledgePackage) -> None:
    generator = FakeGenerator(cite=lambda context: [context.relevant_chunks[0].chunk_id])
    services = CascadeServices(cache=QueryCache(16), generator=generator)
    plain = cascade(package, "O que é APR?", services=services)
    generated = cascade(package, "O que é APR?", services=services, generate=True)
    assert plain.strategy_used != "enriched_rag"
    assert generated.metadata.cache == "miss" and generated.strategy_used == "enriched_rag"
    assert cascade(package, "O que é APR?", services=services).strategy_used == plain.strategy_used


def test_a_fresh_cache_over_the_same_kv_serves_from_kv_then_memory(
    package: KnowledgePackage,
) -> None:
    kv = DictKV()
    first = cascade(package, EXACT_ID, services=CascadeServices(cache=QueryCache(16, kv)))
    assert first.metadata.cache == "miss"
    assert [key for key in kv.data if key.startswith(CACHE_PREFIX)]
    other_isolate = CascadeServices(cache=QueryCache(16, kv))
    from_kv = cascade(package, EXACT_ID, services=other_isolate)
    assert from_kv.metadata.cache == "kv"
    assert from_kv.results == first.results and from_kv.answer == first.answer
    assert cascade(package, EXACT_ID, services=other_isolate).metadata.cache == "memory"


def test_kv_cache_write_can_wait_until_after_the_response(package: KnowledgePackage) -> None:
    kv, later = DictKV(), []
    services = CascadeServices(cache=QueryCache(16, kv), defer=later.append)
    response = cascade(package, EXACT_ID, services=services)
    assert response.metadata.cache == "miss" and not kv.data  # answered before the KV write
    assert cascade(package, EXACT_ID, services=services).metadata.cache == "memory"
    for work in later:
        asyncio.run(work)
    assert [key for key in kv.data if key.startswith(CACHE_PREFIX)]


def test_a_failing_kv_write_never_fails_the_query(package: KnowledgePackage) -> None:
    class BrokenKV(DictKV):
        def __init__(self) -> None:
            super().__init__()
            self.attempts: list[tuple[str, str]] = []

        async def put(self, key: str, value: str) -> None:
            self.attempts.append((key, value))
            raise ConnectionError("KV is down")

    kv = BrokenKV()
    services = CascadeServices(cache=QueryCache(16, kv))
    response = cascade(package, EXACT_ID, services=services)
    [(key, value)] = kv.attempts  # the KV copy was attempted, and failed
    assert key.startswith(CACHE_PREFIX) and json.loads(value)["results"]
    assert response.metadata.cache == "miss" and not kv.data
    assert response.results[0].section_id.startswith(EXACT_ID)
    assert response.results == cascade(package, EXACT_ID).results  # the answer is unharmed
    assert cascade(package, EXACT_ID, services=services).metadata.cache == "memory"


def test_kv_layer_over_the_local_sqlite_state(package: KnowledgePackage, state: LocalState) -> None:
    first = cascade(
        package, "O que é APR?", services=CascadeServices(cache=QueryCache(4, state.kv))
    )
    second = cascade(
        package, "O que é APR?", services=CascadeServices(cache=QueryCache(4, state.kv))
    )
    assert (first.metadata.cache, second.metadata.cache) == ("miss", "kv")
    assert second.results == first.results


def test_a_corrupt_kv_entry_is_a_miss_and_is_recomputed(package: KnowledgePackage) -> None:
    kv = DictKV()
    cascade(package, EXACT_ID, services=CascadeServices(cache=QueryCache(16, kv)))
    [key] = kv.data
    kv.data[key] = "{not json"
    response = cascade(package, EXACT_ID, services=CascadeServices(cache=QueryCache(16, kv)))
    assert response.metadata.cache == "miss"
    assert response.results[0].section_id.startswith(EXACT_ID)
    assert json.loads(kv.data[key])["knowledge_version"] == package.version


def test_memory_cache_is_bounded_and_falls_back_to_kv(package: KnowledgePackage) -> None:
    cache = QueryCache(1, DictKV())
    services = CascadeServices(cache=cache)
    cascade(package, EXACT_ID, services=services)
    cascade(package, "O que é APR?", services=services)  # evicts the first from memory
    assert len(cache.memory) == 1
    assert cascade(package, EXACT_ID, services=services).metadata.cache == "kv"
