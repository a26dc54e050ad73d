"""A partition's graph edges read per query: the chunks holding the asked sections' edges, found
through the resident directory and kept in the package's cache (codec and layouts:
``format.graph``).

Why chunks (index format 3, docs/adr/0010): at a million sections a partition's edges take
≈ 21 MB (9 bytes an edge), while a query follows the edges of its three best sections.
"""

from __future__ import annotations

from collections.abc import Iterable

from router.lru import LruCache
from router.package.format.graph import GraphDirectory, GraphTable, decode_graph
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher

__all__ = [
    "DECODED_PER_BYTE",
    "GraphTables",
    "PartitionGraph",
]


GraphTables = LruCache[str, GraphTable]
"""Decoded edge tables of one package (every partition), by file name."""


DECODED_PER_BYTE = 1.15
"""Bytes a decoded chunk holds per byte of its file, in the Worker (the chunks of the 100k bench
corpus, Pyodide 314, tracemalloc: 1.13; the decoded chunk is mostly views of the file)."""


class PartitionGraph(ChunkStore[GraphTable]):
    """One partition's edges: the resident directory and its chunks, read through a cache."""

    decoded_per_byte = DECODED_PER_BYTE

    def __init__(
        self, key: str, directory: GraphDirectory, fetch: ChunkFetcher, cache: GraphTables
    ) -> None:
        super().__init__(key, directory.file_name, fetch, cache)
        self.directory = directory

    async def neighbours_of(
        self, sections: Iterable[int]
    ) -> tuple[dict[int, dict[int, str]], ReadCost]:
        """Target → relation of the edges leaving each section, and what reading them cost."""
        return await self.lookup(sections, self.directory.chunk_of, GraphTable.neighbours, dict)

    def decode(self, chunk: int, blob: bytes) -> GraphTable:
        return decode_graph(blob, self.file(chunk))
