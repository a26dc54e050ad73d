"""The shard arena: a query's large shards are read into one reusable buffer, live only for
its lease, and the answers are the same as without it."""

from __future__ import annotations

import asyncio
from typing import Any

from kr.golden import load_golden
from router.adapters.cloudflare.jsconv import copy_into
from router.compile.build import BuildResult
from router.package.reader import KnowledgePackage, load_package
from router.package.stores.arena import MIB, ShardArena
from router.package.stores.budget import ReaderBudget
from router.pipeline import run_cascade, run_query
from router.ports import Allocate, Blob
from tests.common import GOLDEN, TODAY


def test_one_lease_at_a_time_large_shards_only_and_no_overlap() -> None:
    arena = ShardArena(max_bytes=4 * MIB, min_shard_bytes=100)
    first = arena.lease()
    assert first is not None and arena.lease() is None  # another query allocates for itself
    assert first.allocate(50) is None  # small: plain bytes, cacheable
    assert first.allocate(300) is None  # the arena starts empty
    arena.release(first)
    assert len(arena.buffer) == MIB  # grown to what the lease wanted, in whole MiBs
    second = arena.lease()
    assert second is not None
    a, b = second.allocate(600_000), second.allocate(400_000)
    assert a is not None and b is not None and second.allocate(100_000) is None  # full
    a[:] = b"a" * len(a)
    b[:] = b"b" * len(b)
    assert bytes(a) == b"a" * 600_000 and second.holds(a) and not second.holds(b"a")
    arena.release(second)
    assert len(arena.buffer) == 2 * MIB  # 1.1 MB wanted: the next query's fit
    huge = arena.lease()
    assert huge is not None and huge.allocate(9 * MIB) is None
    arena.release(huge)
    assert len(arena.buffer) == 4 * MIB  # never past max_bytes


def _arena_package(built: BuildResult) -> tuple[KnowledgePackage, list[str]]:
    """The sample package with every shard read into the arena (its shards are small), and
    none cached between queries."""
    files = built.package.files()
    into: list[str] = []

    async def fetch_into(name: str, allocate: Allocate) -> Blob:
        blob = files[name]
        target = allocate(len(blob))
        if target is None:
            return blob
        copy_into(blob, target)
        into.append(name)
        return target

    budget = ReaderBudget(
        shard_bytes=0, arena_bytes=16 * MIB, arena_min_shard_bytes=1
    )  # refetched by every query
    package = load_package(
        files["manifest.json"], files.__getitem__, budget=budget, fetch_chunk_into=fetch_into
    )
    return package, into


def _comparable(value: Any) -> Any:
    """A response without timings and fetch counts (they depend on what was held already)."""
    if isinstance(value, dict):
        return {
            k: _comparable(v)
            for k, v in value.items()
            if k not in ("ms", "latency_ms", "round_trips") and not k.endswith("_fetched")
        }
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def test_golden_answers_are_the_same_with_the_arena_reused_query_after_query(
    built: BuildResult, package: KnowledgePackage
) -> None:
    """Every golden query, twice over, through a package whose shards all go to the arena: the
    arena is reused by each query (a shard left cached in it would be read overwritten), and
    no shard of a finished query stays in the cache."""
    arena_package, into = _arena_package(built)
    golden = load_golden(GOLDEN)
    expected = [
        _comparable(run_query(package, g.request, today=TODAY).model_dump()) for g in golden
    ]
    for _ in range(2):
        for g, answer in zip(golden, expected, strict=True):
            got = run_query(arena_package, g.request, today=TODAY).model_dump()
            assert _comparable(got) == answer, g.request.query
            cache = arena_package.view(None).parts[0].partition.postings.cache
            assert all(size for _, size in cache._held.values())  # no arena shard is held
    assert len(into) > len(golden)  # shards were read into it, again and again


def test_interleaved_queries_score_from_their_own_shards(
    built: BuildResult, package: KnowledgePackage
) -> None:
    """Every golden query at once, their shard reads interleaved (each fetch waits a different
    while), with a cache too small to hold one query's shards and the arena taken by whichever
    query leased it first: another query's trimming or lease ending never takes a shard from
    under a query still scoring, so each answer is the one it gets alone."""
    files = built.package.files()
    delays = iter([0.0, 0.003, 0.001, 0.002] * 10_000)

    async def fetch(name: str) -> bytes:
        await asyncio.sleep(next(delays))
        return files[name]

    async def fetch_into(name: str, allocate: Allocate) -> Blob:
        blob = await fetch(name)
        target = allocate(len(blob))
        if target is None:
            return blob
        copy_into(blob, target)
        return target

    budget = ReaderBudget(shard_bytes=1, arena_bytes=16 * MIB, arena_min_shard_bytes=1)
    shared = load_package(
        files["manifest.json"], files.__getitem__, budget=budget, fetch_chunk_into=fetch_into
    )
    for part in shared.view(None).parts:  # every partition's other lazy files wait too
        part.partition.postings._fetch = fetch
    golden = load_golden(GOLDEN)
    expected = [
        _comparable(run_query(package, g.request, today=TODAY).model_dump()) for g in golden
    ]

    async def all_at_once() -> list[Any]:
        runs = [run_cascade(shared, g.request, today=TODAY, clock=_still) for g in golden]
        return [r.model_dump() for r in await asyncio.gather(*runs)]

    got = asyncio.run(all_at_once())  # a still clock: waiting for each other spends no budget
    for g, answer, response in zip(golden, expected, got, strict=True):
        assert _comparable(response) == answer, g.request.query


def _still() -> float:
    return 0.0
