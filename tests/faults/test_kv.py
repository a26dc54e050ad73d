"""Backend faults never give a 500: the last good version keeps serving (and says why), a
failing cache is skipped, a hostile version id is refused before any read, a refused version is
not read again on every request, and local SQLite waits off the event loop."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.state import LocalState, SqliteKeyValueStore
from router.api.app import create_app
from router.contract import QueryRequest
from router.errors import BindingError
from router.ports import ACTIVE_VERSION_KEY
from router.service import KV_RETRY_S, REFUSED_RETRY_S, KnowledgeService
from router.stages.cache import QueryCache
from router.sync import run_sync
from tests.common import CountedStore
from tests.faults.common import DAMAGES, Clock, damage, damaged

QUESTION = QueryRequest(query="O que é APR?")
REFUSED_MANIFEST = "packages/kv-0123456789abcdef/manifest.json"


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_kv_file_keeps_the_last_good_version_serving_until_repaired(
    state: LocalState, how: str
) -> None:
    clock = Clock()
    service = KnowledgeService(kv=state.kv, blobs=state.blobs, clock=clock)
    good = asyncio.run(service.query(QUESTION)).knowledge_version
    client = TestClient(create_app(service))
    with damaged(state.root / "kv.sqlite", how):
        for _ in range(2):
            answer = client.post("/v1/query", json={"query": "O que é APR?"})
            assert answer.status_code == 200 and answer.json()["knowledge_version"] == good
            assert answer.json()["results"][0]["doc_id"] == "apr"
            clock.now += KV_RETRY_S + 1  # asked again, and still failing
        health = client.get("/v1/health").json()
        assert health["knowledge_version"] == good and health["status"] == "degraded"
        assert health["active_version"] is None  # KV cannot say
        assert "active version" in health["last_load_error"] and good in health["last_load_error"]
    clock.now += KV_RETRY_S + 1  # repaired: health says so without a restart
    health = client.get("/v1/health").json()
    assert health["status"] == "ok" and health["last_load_error"] is None
    assert health["active_version"] == health["knowledge_version"] == good


@pytest.mark.parametrize("how", DAMAGES)
def test_a_damaged_kv_file_before_any_load_is_a_503_json_error(state: LocalState, how: str) -> None:
    damage(state.root / "kv.sqlite", how)
    client = TestClient(create_app(KnowledgeService(kv=state.kv, blobs=state.blobs)))
    for response in (client.post("/v1/query", json={"query": "APR"}), client.get("/v1/health")):
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "binding_failed"


@pytest.mark.parametrize("bad", ["../../../etc", "..", "kv-x/../../secret", "", "a" * 500])
def test_an_invalid_or_emptied_active_version_is_refused_before_any_read(
    state: LocalState, bad: str
) -> None:
    blobs = CountedStore[bytes](state.blobs)
    service = KnowledgeService(kv=state.kv, blobs=blobs)
    good = asyncio.run(service.query(QUESTION)).knowledge_version
    read_before = len(blobs.reads)
    asyncio.run(state.kv.put(ACTIVE_VERSION_KEY, bad))
    client = TestClient(create_app(service))
    answer = client.post("/v1/query", json={"query": "O que é APR?"})
    assert answer.status_code == 200 and answer.json()["knowledge_version"] == good
    assert client.get("/v1/health").json()["knowledge_version"] == good
    assert all(".." not in key and bad not in key.split("/") for key in blobs.reads[read_before:])
    # with nothing loaded yet: a JSON 4xx/5xx naming the problem, on health too
    cold = TestClient(create_app(KnowledgeService(kv=state.kv, blobs=state.blobs)))
    for response in (cold.post("/v1/query", json={"query": "APR"}), cold.get("/v1/health")):
        assert response.status_code == 503
        assert response.json()["error"]["code"] in ("package_format", "no_active_version")


def test_a_refused_version_is_not_read_again_on_every_request(state: LocalState) -> None:
    clock = Clock()
    blobs = CountedStore[bytes](state.blobs)
    service = KnowledgeService(kv=state.kv, blobs=blobs, clock=clock)  # TTL 0: KV every request
    good = asyncio.run(service.query(QUESTION)).knowledge_version
    asyncio.run(state.kv.put(ACTIVE_VERSION_KEY, "kv-0123456789abcdef"))  # nothing stored there
    tried = len(blobs.reads)
    for _ in range(5):
        assert asyncio.run(service.query(QUESTION)).knowledge_version == good
    attempts = [key for key in blobs.reads[tried:] if key == REFUSED_MANIFEST]
    assert len(attempts) == 1  # one attempt (one round trip), then remembered
    clock.now += REFUSED_RETRY_S + 1
    asyncio.run(service.query(QUESTION))
    assert blobs.reads[tried:].count(REFUSED_MANIFEST) == 2  # retried once the interval passed


class FailingKV:
    """A KV whose reads fail (an outage); writes fail too."""

    async def get(self, key: str) -> str | None:
        raise BindingError("KV get failed: network")

    async def put(self, key: str, value: str) -> None:
        raise BindingError("KV put failed: network")


def test_a_failing_cache_is_skipped_and_the_query_answered(state: LocalState) -> None:
    service = KnowledgeService(kv=state.kv, blobs=state.blobs, cache=QueryCache(8, FailingKV()))
    response = asyncio.run(service.query(QUESTION))
    assert response.results[0].doc_id == "apr"
    assert response.trace["stages"]["cache"]["where"] == "unavailable"


def test_a_locked_kv_file_waits_off_the_event_loop(state: LocalState) -> None:
    """A writer holds kv.sqlite locked: the request waits for the lock timeout without
    stalling the loop (a ticker keeps running), then the last good version answers."""
    service = KnowledgeService(kv=state.kv, blobs=state.blobs)
    good = asyncio.run(service.query(QUESTION)).knowledge_version
    lock = sqlite3.connect(state.root / "kv.sqlite", timeout=0)
    lock.execute("BEGIN EXCLUSIVE")
    ticks = 0

    async def ticker(done: asyncio.Event) -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await asyncio.sleep(0.01)

    async def both() -> str:
        done = asyncio.Event()
        ticking = asyncio.create_task(ticker(done))
        try:
            return (await service.query(QUESTION)).knowledge_version
        finally:
            done.set()
            await ticking

    try:
        assert asyncio.run(both()) == good
    finally:
        lock.rollback()
        lock.close()
    assert ticks > 10  # the loop ran other work while SQLite waited
    assert service.last_load_error and "locked" in service.last_load_error


def test_the_local_cache_expires_its_entries_and_keeps_at_most_its_cap(tmp_path: Path) -> None:
    clock = Clock()
    kv = SqliteKeyValueStore(tmp_path / "kv.sqlite", clock=clock)
    asyncio.run(kv.put(ACTIVE_VERSION_KEY, "kv-0000000000000001"))
    cache_kv = kv.with_limits(expiration_ttl_s=60, max_entries=3)
    for n in range(5):
        asyncio.run(cache_kv.put(f"qcache:{n}", f"answer {n}"))
        clock.now += 1
    kept = [n for n in range(5) if asyncio.run(cache_kv.get(f"qcache:{n}")) is not None]
    assert kept == [2, 3, 4]  # the cap dropped those expiring first
    clock.now += 60
    assert asyncio.run(cache_kv.get("qcache:4")) is None  # expired
    asyncio.run(cache_kv.put("qcache:new", "x"))  # a write sweeps the expired rows
    with sqlite3.connect(tmp_path / "kv.sqlite") as db:
        rows = {row[0] for row in db.execute("SELECT key FROM kv")}
    assert rows == {ACTIVE_VERSION_KEY, "qcache:new"}  # the active version never expires


def test_a_cached_answer_never_carries_another_callers_text(state: LocalState) -> None:
    """The cache key ignores case: the second caller is served the first one's answer, from
    memory and from KV (a fresh isolate), with none of the first caller's own text."""
    first = "Qual a VALIDADE da APR, Menezes?"
    asked = "qual a validade da apr, menezes?"
    cache_kv = state.kv.with_limits(60, 100)
    service = KnowledgeService(kv=state.kv, blobs=state.blobs, cache=QueryCache(8, cache_kv))
    asyncio.run(service.query(QueryRequest(query=first)))
    fresh = KnowledgeService(kv=state.kv, blobs=state.blobs, cache=QueryCache(8, cache_kv))
    for served in (service, fresh):
        response = asyncio.run(served.query(QueryRequest(query=asked)))
        assert response.metadata.cache in ("memory", "kv")
        dumped = response.model_dump_json()
        assert "VALIDADE" not in dumped and "Menezes" not in dumped and "APR," not in dumped
        assert response.trace["stages"]["normalize"]["text"].startswith("qual a validade")


def test_the_local_stores_answer_without_an_event_loop_too(state: LocalState) -> None:
    """``run_sync`` drives a coroutine without a loop (benchmarks, synchronous callers): the
    SQLite work then runs inline instead of failing for want of a loop."""
    service = KnowledgeService(kv=state.kv, blobs=state.blobs)
    assert run_sync(service.query(QUESTION)).results[0].doc_id == "apr"
