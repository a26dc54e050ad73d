"""A partition's exact keys read per query: the chunks a query's keys fall in, fetched through
the resident directory and kept in the package's cache (codec and layouts: ``format.exact``).

Why chunks (index format 3, docs/adr/0010): every id, title, alias, fact address and section id
is an exact key, so the table grows with the sections (≈ 8 MB at 100k, ≈ 80 MB at 1M) while a
query looks up two or three keys; a lookup is a binary search in the directory, then one fetch
per distinct chunk — made concurrently with the query's vocabulary chunks.
"""

from __future__ import annotations

from collections.abc import Iterable

from router.lru import LruCache
from router.package.format.exact import (
    ExactDirectory,
    ExactKeys,
    LocalTarget,
    decode_exact,
)
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher

__all__ = [
    "DECODED_PER_BYTE",
    "ExactTables",
    "PartitionExact",
]


ExactTables = LruCache[str, ExactKeys]
"""Decoded key tables of one package (every partition), by file name."""


DECODED_PER_BYTE = 1.7
"""Bytes a decoded chunk holds per byte of its file, in the Worker (the chunks of the 100k bench
corpus, Pyodide 314, tracemalloc: 1.68; the decoded chunk is mostly views of the file)."""


class PartitionExact(ChunkStore[ExactKeys]):
    """One partition's exact keys: the resident directory and its chunks, read through a cache."""

    decoded_per_byte = DECODED_PER_BYTE

    def __init__(
        self, key: str, directory: ExactDirectory, fetch: ChunkFetcher, cache: ExactTables
    ) -> None:
        super().__init__(key, directory.file_name, fetch, cache)
        self.directory = directory

    async def targets(self, keys: Iterable[str]) -> tuple[dict[str, list[LocalTarget]], ReadCost]:
        """The targets of each folded key in this partition, and what reading them cost."""
        return await self.lookup(keys, self.directory.chunk_of, ExactKeys.lookup, list)

    def decode(self, chunk: int, blob: bytes) -> ExactKeys:
        return decode_exact(blob)
