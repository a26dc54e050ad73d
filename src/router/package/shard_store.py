"""The posting shards a query needs, fetched concurrently and kept under a byte budget.

Why (docs/adr/0010, step 3): an isolate cannot hold a million sections' postings, and a query
reads a few terms' lists. The partition's directory (resident) says which shard holds a term;
``load`` fetches the shards not already held, all at once (one round trip when an event loop
runs), verifies each against the manifest, and keeps the decoded shards in one LRU per package.
The core stays sans-I/O: ``fetch(name)`` is given by whoever loaded the package.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from router.package.budget import ReaderBudget
from router.package.partitions import partition_file
from router.package.postings import Postings
from router.package.shards import ShardDirectory, decode_shard
from router.package.text_store import ChunkFetcher
from router.sync import concurrently

__all__ = [
    "PartitionShards",
    "ShardCache",
    "ShardReads",
    "load_shards",
]


@dataclass(frozen=True)
class ShardReads:
    """What loading a query's posting lists cost: shards fetched, their bytes, round trips."""

    shards_fetched: int = 0
    bytes_fetched: int = 0
    round_trips: int = 0


class ShardCache:
    """Decoded shards of one package (every partition), least recently used dropped first."""

    def __init__(self, budget_bytes: int = ReaderBudget.shard_bytes) -> None:
        self._budget = budget_bytes
        self._held: OrderedDict[str, tuple[dict[str, Postings], int]] = OrderedDict()
        self._bytes = 0

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def get(self, name: str) -> dict[str, Postings] | None:
        found = self._held.get(name)
        if found is None:
            return None
        self._held.move_to_end(name)
        return found[0]

    def put(self, name: str, shard: dict[str, Postings], size: int, keep: Collection[str]) -> None:
        """Hold a shard; drop the oldest past the budget, never one in ``keep`` (the shards the
        current query is about to read)."""
        self._held[name] = (shard, size)
        self._bytes += size
        self.trim(keep)

    def trim(self, keep: Collection[str]) -> None:
        """Drop the oldest shards not in ``keep`` until the budget holds. Called before a
        query's fetch too: the last query's shards may exceed the budget (they were all in its
        ``keep``), and a wasm heap keeps the peak of them plus the new ones."""
        for old in list(self._held):
            if self._bytes <= self._budget:
                break
            if old not in keep:
                self._bytes -= self._held.pop(old)[1]


class PartitionShards:
    """One partition's postings: the resident directory and its shards, read through a cache."""

    def __init__(
        self, key: str, directory: ShardDirectory, fetch: ChunkFetcher, cache: ShardCache
    ) -> None:
        self.key = key
        self.directory = directory
        self._fetch = fetch
        self.cache = cache

    def file(self, shard: int) -> str:
        return partition_file(self.key, self.directory.file_name(shard))

    def postings(self, term: int, block: str) -> tuple[Postings, int]:
        """(block of the shard holding ``term``, the term's id in it); the shard must have been
        loaded for this query (``load``)."""
        shard = self.directory.shard_of(term)
        held = self.cache.get(self.file(shard))
        if held is None:
            raise RuntimeError(f"shard {shard} of partition {self.key} was not loaded")
        return held[block], term - self.directory.first[shard]

    def missing(self, terms: Iterable[int]) -> list[int]:
        """Shards holding ``terms`` that the cache does not hold (refreshed when it does)."""
        shards = sorted({self.directory.shard_of(t) for t in terms})
        return [s for s in shards if self.cache.get(self.file(s)) is None]

    async def fetch_shard(self, shard: int) -> tuple[int, bytes]:
        return shard, await self._fetch(self.file(shard))

    def remember(self, shard: int, blob: bytes, keep: Collection[str]) -> None:
        decoded = decode_shard(blob, self.directory, shard, self.key)
        self.cache.put(self.file(shard), decoded, len(blob), keep)


async def load_shards(wanted: list[tuple[PartitionShards, list[int]]]) -> ShardReads:
    """Fetch the given terms' missing shards of several partitions at once, and hold them."""
    jobs = [(store, shard) for store, terms in wanted for shard in store.missing(terms)]
    if not jobs:
        return ShardReads()
    keep = {store.file(store.directory.shard_of(t)) for store, terms in wanted for t in terms}
    jobs[0][0].cache.trim(keep)  # one cache per package: every partition's store shares it
    blobs = await concurrently([store.fetch_shard(shard) for store, shard in jobs])
    for (store, _), (shard, blob) in zip(jobs, blobs, strict=True):
        store.remember(shard, blob, keep)
    return ShardReads(len(jobs), sum(len(blob) for _, blob in blobs), 1)
