"""The shard cache: within its byte budget between queries, never dropping what a query reads."""

from __future__ import annotations

from router.package.format.shards import decode_directory, encode_shards
from router.package.stores.shards import PartitionShards, ShardCache, load_shards
from router.sync import run_sync

TERMS = 6


def _store(cache: ShardCache, fetched: list[int]) -> PartitionShards:
    """A partition of six terms, one shard each (30 postings a term), read through ``cache``;
    ``fetched`` records the cache's bytes at each fetch."""
    indptr = [30 * t for t in range(TERMS + 1)]
    ids = [s for _ in range(TERMS) for s in range(30)]
    impacts = [1.0 + (s * t) % 7 for t in range(TERMS) for s in range(30)]  # each shard differs
    blob, files, _ = encode_shards({"bm25f": (indptr, ids, impacts)}, TERMS, 30, target=30)
    directory = decode_directory(blob)

    async def fetch(name: str) -> bytes:
        fetched.append(cache.cached_bytes)
        return files[name.partition(".")[2]]

    return PartitionShards("shared", directory, fetch, cache)


def test_a_querys_shards_stay_held_and_the_last_querys_excess_goes_before_the_next_fetch() -> None:
    fetched: list[int] = []
    cache = ShardCache(budget_bytes=1)  # smaller than any shard
    store = _store(cache, fetched)
    first = run_sync(load_shards([(store, [0, 1, 2])]))
    held = cache.cached_bytes
    assert held > 0 and all(store.postings(t, "bm25f") for t in (0, 1, 2))  # none dropped
    run_sync(load_shards([(store, [3, 4])]))
    assert fetched[:3] == [0, 0, 0] and fetched[3:] == [0, 0]  # the excess went before fetching
    assert _cached(store) == [3, 4]
    # the first query still reads its own shards, and gets the same lists as before
    again = [store.postings(t, "bm25f", first.shards) for t in (0, 1, 2)]
    assert [list(p.section_ids[p.indptr[t] : p.indptr[t + 1]]) for p, t in again] == [
        list(range(30))
    ] * 3


def _cached(store: PartitionShards) -> list[int]:
    return [s for s in range(TERMS) if store.cache.get(store.file(s)) is not None]


def test_within_the_budget_earlier_shards_are_kept_for_later_queries() -> None:
    fetched: list[int] = []
    store = _store(ShardCache(budget_bytes=10**6), fetched)
    run_sync(load_shards([(store, [0, 1])]))
    second = run_sync(load_shards([(store, [1, 2])]))
    assert len(fetched) == 3  # shard 1 was not fetched again
    assert _cached(store) == [0, 1, 2] and sorted(second.shards) == sorted(
        [store.file(1), store.file(2)]
    )
