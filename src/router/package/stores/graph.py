"""A partition's graph edges in chunks read per query, and the resident directory that finds them.

Why chunks (index format 3, docs/adr/0010): at a million sections a partition's edges take
≈ 21 MB (9 bytes an edge), while a query follows the edges of its three best sections. The edges,
sorted by source section, are cut into tables of about ``GRAPH_CHUNK_BYTES``
(``router.package.format.graph`` layout; a section's edges are never split), each a file named by
its content (``g-<sha16>.bin``). The directory ``graph.bin`` keeps each chunk's first source
section and hash, resident: 20 bytes a chunk.

    graph.bin
        magic    b"KRGDIR01"          8 bytes
        header   uint32 chunks C, edges E
        firsts   uint32[C]            first source section of each chunk (view numbering)
        hashes   C × 16 ASCII bytes   the hex digest naming chunk c: g-<hash>.bin
"""

from __future__ import annotations

import struct
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from router.errors import PackageFormatError
from router.lru import LruCache
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.format.graph import Edge, GraphTable, decode_graph, encode_table
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher
from router.package.version.content_names import Digests, content_name

__all__ = [
    "GRAPH_CHUNK_BYTES",
    "GRAPH_NAME",
    "GRAPH_STEM",
    "GraphDirectory",
    "GraphTables",
    "PartitionGraph",
    "decode_graph_directory",
    "encode_graph_chunks",
]

GRAPH_NAME = "graph.bin"
GRAPH_STEM = "g"
GRAPH_CHUNK_BYTES = 16 * 1024

_MAGIC = b"KRGDIR01"
_HEADER = struct.Struct("<8sII")
_HASH = 16
_PER_EDGE = 9


def encode_graph_chunks(
    edges: Sequence[Edge], chunk_bytes: int = GRAPH_CHUNK_BYTES
) -> dict[str, bytes]:
    """``graph.bin`` and its chunks for a partition's sorted ``edges``; same edges, same bytes."""
    groups: list[list[Edge]] = []
    for edge in edges:
        starts_source = not groups or groups[-1][-1][0] != edge[0]
        if starts_source and (not groups or len(groups[-1]) * _PER_EDGE >= chunk_bytes):
            groups.append([])
        groups[-1].append(edge)
    files: dict[str, bytes] = {}
    digests: list[str] = []
    for group in groups:
        table = encode_table(group)
        name = content_name(GRAPH_STEM, table)
        files[name] = table
        digests.append(name[len(GRAPH_STEM) + 1 : -len(".bin")])
    files[GRAPH_NAME] = b"".join(
        [
            _HEADER.pack(_MAGIC, len(groups), len(edges)),
            little_endian_bytes("I", [group[0][0] for group in groups]),
            "".join(digests).encode("ascii"),
        ]
    )
    return files


@dataclass(frozen=True)
class GraphDirectory:
    """Each chunk's first source section and hash: enough to find any section's edges."""

    firsts: Sequence[int]
    hashes: Digests
    edges: int

    def file_name(self, chunk: int) -> str:
        return f"{GRAPH_STEM}-{self.hashes[chunk]}.bin"

    def chunk_of(self, section: int) -> int | None:
        """The chunk holding ``section``'s edges if any does."""
        found = bisect_right(self.firsts, section) - 1
        return found if found >= 0 else None


def decode_graph_directory(blob: bytes, what: str = GRAPH_NAME) -> GraphDirectory:
    """The directory in ``graph.bin``; a wrong magic or inconsistent table refuses the package."""
    chunks, edges = header_fields(blob, _HEADER, _MAGIC, what)
    hashes_at = _HEADER.size + 4 * chunks
    if len(blob) != hashes_at + _HASH * chunks:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, its header says otherwise")
    firsts = little_endian_view(memoryview(blob)[_HEADER.size : hashes_at], "I")
    try:
        digests = bytes(blob[hashes_at:]).decode("ascii")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed chunk hash") from exc
    ascending = all(a < b for a, b in pairwise(firsts))
    if not ascending or (edges == 0) != (chunks == 0):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    return GraphDirectory(firsts, Digests(digests), edges)


GraphTables = LruCache[str, GraphTable]
"""Decoded edge tables of one package (every partition), by file name."""


class PartitionGraph(ChunkStore[GraphTable]):
    """One partition's edges: the resident directory and its chunks, read through a cache."""

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
