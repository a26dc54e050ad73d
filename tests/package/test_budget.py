"""The caches' budget follows the isolate's heap (issue 32, item 4): a budget from a headroom
stays within it, every cache holds what its bytes allow, and an isolate with room answers a
question asked again without a read, while one without room reads again."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from router.contract import QueryRequest
from router.errors import ConfigError
from router.lru import LruCache
from router.package.stores.budget import (
    MIB,
    VIEW_BYTES,
    HeapPlan,
    HeapRoom,
    ReaderBudget,
)
from router.service import KnowledgeService
from tests.common import GOLDEN, TODAY, CountedStore

BYTE_FIELDS = (
    "shard_bytes",
    "table_bytes",
    "chunk_bytes",
    "bound_bytes",
    "record_bytes",
    "partition_bytes",
)


@pytest.mark.parametrize("room", [0, 1000, 3 * MIB, 40 * MIB, 1 << 30])
def test_a_budget_from_a_headroom_stays_within_it(room: int) -> None:
    budget = ReaderBudget.for_headroom(room)
    assert sum(getattr(budget, name) for name in BYTE_FIELDS) <= room
    assert budget.cache_bytes <= max(room, VIEW_BYTES)  # one view is always kept composed
    assert budget.views >= 1


def test_a_larger_headroom_never_gives_a_cache_less() -> None:
    small, large = ReaderBudget.for_headroom(20 * MIB), ReaderBudget.for_headroom(60 * MIB)
    assert all(getattr(small, n) <= getattr(large, n) for n in (*BYTE_FIELDS, "views"))


def test_a_weighted_lru_holds_its_bytes_and_drops_the_oldest_past_them() -> None:
    cache: LruCache[str, str] = LruCache(100)
    for number in range(10):
        cache.put(f"k{number}", "v", 30)
        assert cache.held <= 100
    assert [cache.get(f"k{n}") for n in (6, 7, 8, 9)] == [None, "v", "v", "v"]
    cache.get("k7")  # now the most recent
    cache.resize(30)
    assert cache.held == 30 and cache.get("k7") == "v" and cache.get("k9") is None
    cache.put("big", "v", 31)  # heavier than the whole budget: not kept
    assert cache.get("big") is None and cache.held <= 30


def test_the_heap_room_is_what_is_left_below_the_ceiling_and_an_overshoot_is_paid_once() -> None:
    plan = HeapPlan(limit_bytes=100 * MIB, reserve_bytes=10 * MIB, reserve_per_section=0)
    room = HeapRoom(plan, heap_bytes=50 * MIB, sections=1000)
    assert room.room(50 * MIB) == 40 * MIB
    assert room.room(85 * MIB) == 40 * MIB  # the caches filling their room: nothing changes
    assert room.room(95 * MIB) == 35 * MIB  # 5 MiB past the ceiling: the caches give it back
    assert room.room(95 * MIB) == 35 * MIB  # the same overshoot is not counted again
    assert room.room(60 * MIB) == 35 * MIB  # (the heap in use never goes down)


def test_a_larger_package_keeps_more_of_the_heap_free() -> None:
    plan = HeapPlan(limit_bytes=108 * MIB, reserve_bytes=8 * MIB, reserve_per_section=40)
    small = HeapRoom(plan, heap_bytes=50 * MIB, sections=100_000).room(50 * MIB)
    large = HeapRoom(plan, heap_bytes=50 * MIB, sections=1_000_000).room(50 * MIB)
    assert small == 50 * MIB and large < 20 * MIB


def test_a_heap_plan_is_checked_where_it_is_written() -> None:
    with pytest.raises(ConfigError):
        HeapPlan(limit_bytes=8 * MIB, reserve_bytes=16 * MIB)


def _questions() -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines() if line]
    fields = ("query", "tenant", "page", "tab", "focus")
    return [{k: row[k] for k in fields if row.get(k) is not None} for row in rows]


def _reads_per_question(heap_bytes: int, service: KnowledgeService) -> tuple[list[int], Any]:
    """The golden questions asked twice (no query cache) by an isolate whose heap reads
    ``heap_bytes``: the reads of each question of the second pass, and the package."""
    blobs = CountedStore[bytes](service.blobs)
    served = KnowledgeService(kv=service.kv, blobs=blobs, heap_bytes=lambda: heap_bytes)
    questions = _questions()
    reads = []
    for round_ in range(2):
        for body in questions:
            before = len(blobs.reads)
            asyncio.run(served.query(QueryRequest(**body), today=TODAY))
            if round_:
                reads.append(len(blobs.reads) - before)
    return reads, asyncio.run(served.package())


def test_an_isolate_with_room_asks_its_store_nothing_for_a_question_asked_again(
    service: KnowledgeService,
) -> None:
    reads, package = _reads_per_question(40 * MIB, service)
    assert sum(reads) == 0
    assert package.budget == ReaderBudget.for_headroom(HeapPlan().ceiling(373) - 40 * MIB)
    assert 0 < package.cached_bytes <= package.budget.cache_bytes  # bytes accounted


def test_an_isolate_without_room_reads_again_and_holds_nothing_past_it(
    service: KnowledgeService,
) -> None:
    full = HeapPlan().ceiling(373)  # the heap already at the ceiling: no room for caches
    reads, package = _reads_per_question(full, service)
    assert sum(1 for r in reads if r) > len(reads) // 2
    assert package.budget == ReaderBudget.for_headroom(0)
    caches = package.caches
    assert caches is not None and caches.exact.held == caches.records.decoded.held == 0
    assert caches.chunks.cached_bytes <= 64 * 1024  # the last chunk read, at most
    caches.shards.trim(())  # what the next question does first: the last one's shards go
    assert caches.shards.cached_bytes == 0
