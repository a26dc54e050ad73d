"""The typo repair's corpus words read per query: the chunks holding the asked keys, found through
the resident directory (whose Bloom filter answers "certainly not here" without a read) and
kept in the package's cache (codec and layouts: ``format.words``)."""

from __future__ import annotations

from collections.abc import Iterable

from router.lru import LruCache
from router.package.format.key_directory import KeyDirectory
from router.package.format.string_map import StringMap, decode_string_map
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher

__all__ = [
    "DECODED_PER_BYTE",
    "PartitionWords",
    "WordTables",
]


WordTables = LruCache[str, StringMap]
"""Decoded word chunks of one package (every partition), by file name."""


DECODED_PER_BYTE = 1.05
"""Bytes a decoded chunk holds per byte of its file, in the Worker (the chunks of the 100k bench
corpus, Pyodide 314, tracemalloc: 1.02; the decoded chunk is mostly views of the file)."""


class PartitionWords(ChunkStore[StringMap]):
    """One partition's surface words and sound keys: the directory and its chunks, cached."""

    decoded_per_byte = DECODED_PER_BYTE

    def __init__(
        self, key: str, directory: KeyDirectory, fetch: ChunkFetcher, cache: WordTables
    ) -> None:
        super().__init__(key, directory.file_name, fetch, cache)
        self.directory = directory

    def may_hold(self, key: str) -> bool:
        """False when the partition certainly lacks ``key`` (its Bloom filter)."""
        return self.directory.may_hold(key)

    async def values(self, keys: Iterable[str]) -> tuple[dict[str, str | None], ReadCost]:
        """The value of each key (None: not here) and what reading them cost."""
        return await self.lookup(keys, self.directory.chunk_of, StringMap.get, _none)

    def decode(self, chunk: int, blob: bytes) -> StringMap:
        return decode_string_map(blob, self.file(chunk))


def _none() -> str | None:
    return None
