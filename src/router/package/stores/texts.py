"""The section texts a query needs, fetched chunk by chunk and kept under a byte budget.

Why lazy (docs/adr/0010, step 1): a query shows a handful of sections, so the isolate holds only
the text index and the chunks recently quoted, not every text of the knowledge base. The core
stays sans-I/O: it names the chunks, and ``fetch(name)`` (given by whoever loaded the package:
R2, a folder, memory) returns their bytes, verified against the manifest before use. Chunks of
one call are fetched concurrently when an event loop runs, so a cold read is one round trip.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable

from router.package.format.texts import TextIndex
from router.package.stores.budget import ReaderBudget
from router.package.stores.cost import ReadCost
from router.sync import concurrently

__all__ = [
    "ChunkCache",
    "ChunkFetcher",
    "SectionTexts",
]


ChunkFetcher = Callable[[str], Awaitable[bytes]]
"""``fetch(name)``: the verified bytes of one chunk file of this package."""


class ChunkCache:
    """Chunk bytes of one package — every partition's texts and records — least recently used
    dropped first, so the isolate's budget does not grow with the number of tenants."""

    def __init__(self, budget_bytes: int = ReaderBudget.chunk_bytes) -> None:
        self._budget = budget_bytes
        self._chunks: OrderedDict[str, bytes] = OrderedDict()
        self._held = 0

    @property
    def cached_bytes(self) -> int:
        return self._held

    def get(self, key: str) -> bytes | None:
        found = self._chunks.get(key)
        if found is not None:  # used again: the least recently used are dropped first
            self._chunks.move_to_end(key)
        return found

    def put(self, key: str, blob: bytes) -> None:
        """Hold a chunk; past the budget drop the oldest (the caller keeps its own reference
        to the chunks it is reading, so dropping never breaks a read in progress)."""
        self._chunks[key] = blob
        self._held += len(blob)
        self._trim()

    def resize(self, budget_bytes: int) -> None:
        """A new budget (the isolate's room changed): past it, the oldest are dropped now."""
        self._budget = budget_bytes
        self._trim()

    def _trim(self) -> None:
        while self._held > self._budget and len(self._chunks) > 1:
            _, dropped = self._chunks.popitem(last=False)
            self._held -= len(dropped)


class SectionTexts:
    """Item index → text (a section's text, or a document's record), for the items asked for,
    through the package's chunk cache."""

    def __init__(
        self,
        index: TextIndex,
        fetch: ChunkFetcher,
        budget_bytes: int = ReaderBudget.chunk_bytes,
        *,
        cache: ChunkCache | None = None,
        owner: str = "",
    ) -> None:
        self.index = index
        self._fetch = fetch
        self._cache = cache if cache is not None else ChunkCache(budget_bytes)
        self._owner = owner  # the partition: chunk names repeat across partitions

    @property
    def cached_bytes(self) -> int:
        """What the chunk cache holds (the whole package's, when it is shared)."""
        return self._cache.cached_bytes

    def _key(self, chunk: int) -> str:
        return f"{self._owner}/{self.index.chunk_name(chunk)}"

    async def load(self, sections: Iterable[int]) -> tuple[dict[int, str], ReadCost]:
        """The texts of ``sections`` and what reading them cost."""
        wanted = sorted(set(sections))
        chunk_ids = sorted({self.index.chunk_of(s) for s in wanted})
        held: dict[int, bytes] = {}
        for chunk in chunk_ids:
            blob = self._cache.get(self._key(chunk))
            if blob is not None:
                held[chunk] = blob
        fetched = await self._fetch_all([c for c in chunk_ids if c not in held])
        for chunk, blob in fetched.items():
            self._cache.put(self._key(chunk), blob)
        chunks = {**held, **fetched}
        texts = {s: self.index.text(s, chunks[self.index.chunk_of(s)]) for s in wanted}
        cost = ReadCost(
            sections=len(wanted),
            chunks_fetched=len(fetched),
            bytes_fetched=sum(len(b) for b in fetched.values()),
            round_trips=1 if fetched else 0,
        )
        return texts, cost

    async def _fetch_all(self, chunk_ids: list[int]) -> dict[int, bytes]:
        if not chunk_ids:
            return {}
        blobs = await concurrently([self._fetch(self.index.chunk_name(c)) for c in chunk_ids])
        return dict(zip(chunk_ids, blobs, strict=True))
