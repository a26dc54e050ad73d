"""The posting shards a query needs, fetched concurrently and kept under a byte budget.

Why (docs/adr/0010, step 3): an isolate cannot hold a million sections' postings, and a query
reads a few terms' lists. The partition's directory (resident) says which shard holds a term;
``load`` fetches the shards not already held, all at once (one round trip when an event loop
runs), verifies each against the manifest, and keeps the decoded shards in one LRU per package.
The core stays sans-I/O: ``fetch(name)`` is given by whoever loaded the package.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field

from router.package.format.postings import Postings
from router.package.format.shards import ShardDirectory, decode_head_page, decode_shard
from router.package.stores.arena import ArenaLease, ShardArena
from router.package.stores.budget import ReaderBudget
from router.package.stores.texts import ChunkFetcher
from router.package.version.partitions import partition_file
from router.ports import Allocate, Blob
from router.sync import concurrently

__all__ = [
    "ChunkIntoFetcher",
    "Loaded",
    "PartitionShards",
    "ShardCache",
    "ShardReads",
    "load_shards",
]


ChunkIntoFetcher = Callable[[str, Allocate], Awaitable[Blob]]
"""``fetch_into(name, allocate)``: a lazily read file, verified, copied into ``allocate(size)``
when that gives a buffer (the arena), else returned as ``bytes``."""


Loaded = dict[str, dict[str, Postings]]
"""One query's shards: file name → decoded blocks. The query scores from these references, so
another query of the isolate trimming the cache (or ending its arena lease) meanwhile cannot take
a shard away from it."""


@dataclass(frozen=True)
class ShardReads:
    """What loading a query's posting lists cost (shards fetched, their bytes, round trips), and
    the shards it loaded."""

    shards_fetched: int = 0
    bytes_fetched: int = 0
    round_trips: int = 0
    shards: Loaded = field(default_factory=dict, compare=False, repr=False)
    head_pages: int = 0  # lists the query holds as their head page only (read or cached)


class ShardCache:
    """Decoded shards of one package (every partition), least recently used dropped first; and
    the package's shard arena, where a query's large shards live until its lease ends."""

    def __init__(
        self, budget_bytes: int = ReaderBudget.shard_bytes, arena: ShardArena | None = None
    ) -> None:
        self._budget = budget_bytes
        self._held: OrderedDict[str, tuple[dict[str, Postings], int]] = OrderedDict()
        self._bytes = 0
        self.arena = arena or ShardArena(0, 0)

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

    def resize(self, budget_bytes: int) -> None:
        """A new budget (the isolate's room changed): past it, the oldest are dropped now."""
        self._budget = budget_bytes
        self.trim(())

    def end_lease(self, lease: ArenaLease) -> None:
        """Give the arena back: the lease's shards (held by its query only) are dead bytes now."""
        self.arena.release(lease)

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
        self,
        key: str,
        directory: ShardDirectory,
        fetch: ChunkFetcher,
        cache: ShardCache,
        fetch_into: ChunkIntoFetcher | None = None,
    ) -> None:
        self.key = key
        self.directory = directory
        self._fetch = fetch
        self._fetch_into = fetch_into
        self.cache = cache
        self._files: dict[int, str] = {}  # shard → its file name, once asked (a query's terms)

    def file(self, shard: int) -> str:
        name = self._files.get(shard)
        if name is None:
            name = self._files[shard] = partition_file(self.key, self.directory.file_name(shard))
        return name

    def page_file(self, shard: int) -> str | None:
        """The file of a long list's head page, or None when its shard has none."""
        name = self.directory.page_name(shard)
        return None if name is None else partition_file(self.key, name)

    def postings(self, term: int, block: str, loaded: Loaded | None = None) -> tuple[Postings, int]:
        """(block of the shard holding ``term``, the term's id in it); the shard must have been
        loaded for this query (``load_shards``, whose ``loaded`` map is looked in first)."""
        shard = self.directory.shard_of(term)
        name = self.file(shard)
        held = loaded.get(name) if loaded is not None else None
        if held is None:
            held = self.cache.get(name)
        if held is None:
            raise RuntimeError(f"shard {shard} of partition {self.key} was not loaded")
        return held[block], term - self.directory.first[shard]

    async def fetch_shard(
        self, shard: int, lease: ArenaLease | None, page: bool = False
    ) -> tuple[int, Blob]:
        """A shard's verified bytes (its head page's when ``page``): into the lease's arena when
        the store can copy there and the shard is large, else as ``bytes``."""
        name = self.page_file(shard) if page else self.file(shard)
        assert name is not None  # callers ask for pages the directory names
        if lease is not None and self._fetch_into is not None and not page:
            return shard, await self._fetch_into(name, lease.allocate)
        return shard, await self._fetch(name)

    def remember(
        self,
        shard: int,
        blob: Blob,
        keep: Collection[str],
        lease: ArenaLease | None,
        page: bool = False,
    ) -> dict[str, Postings]:
        """Decode a fetched shard (or head page); cache it unless it lives in the arena (its
        query's only). A page is cached under its own name, never as the shard."""
        if page:
            decoded = decode_head_page(blob, self.directory, shard, self.key)
            self.cache.put(str(self.page_file(shard)), decoded, len(blob), keep)
            return decoded
        decoded = decode_shard(blob, self.directory, shard, self.key)
        if lease is None or not lease.holds(blob):
            self.cache.put(self.file(shard), decoded, len(blob), keep)
        return decoded

    def held(self, shard: int, page: bool) -> tuple[dict[str, Postings] | None, bool]:
        """What the isolate holds of a shard: the whole shard when cached (also when only its
        page was asked: exact and free), else its cached page when ``page``; and whether what
        it returns is a page."""
        whole = self.cache.get(self.file(shard))
        if whole is not None or not page:
            return whole, False
        return self.cache.get(str(self.page_file(shard))), True


async def load_shards(
    wanted: list[tuple[PartitionShards, list[int]]],
    lease: ArenaLease | None = None,
    pages: Collection[tuple[str, int]] = (),
) -> ShardReads:
    """Fetch the given terms' missing shards of several partitions at once (the large ones into
    ``lease``'s arena, readable until the lease ends; the others cached), and return them with
    the cached ones as the query's ``Loaded`` shards. A (partition key, term) in ``pages`` whose
    shard has a head page is read as that page unless the whole shard is held: the query then
    scores the list's largest impacts only (``Loaded`` files it under the shard's name)."""
    loaded: Loaded = {}
    jobs = []
    paged = 0
    keep: set[str] = set()
    for store, terms in wanted:
        by_shard: dict[int, list[int]] = {}
        for term in terms:
            by_shard.setdefault(store.directory.shard_of(term), []).append(term)
        for shard, shard_terms in sorted(by_shard.items()):
            page = store.page_file(shard) is not None and any(
                (store.key, t) in pages for t in shard_terms
            )
            keep.add(store.file(shard))
            if page:
                keep.add(str(store.page_file(shard)))
            held, is_page = store.held(shard, page)
            paged += page and (held is None or is_page)
            if held is None:
                jobs.append((store, shard, page))
            else:
                loaded[store.file(shard)] = held
    if not jobs:
        return ShardReads(shards=loaded, head_pages=paged)
    jobs[0][0].cache.trim(keep)  # one cache per package: every partition's store shares it
    blobs = await concurrently(
        [store.fetch_shard(shard, lease, page) for store, shard, page in jobs]
    )
    for (store, _, page), (shard, blob) in zip(jobs, blobs, strict=True):
        loaded[store.file(shard)] = store.remember(shard, blob, keep, lease, page)
    fetched = sum(len(blob) for _, blob in blobs)
    return ShardReads(len(jobs), fetched, 1, loaded, paged)
