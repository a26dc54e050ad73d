"""A partition's section graph, compiled: its edges, the codec of a table of them and its directory.

Why compiled (docs/adr/0010): the graph stage follows wikilinks, backlinks and parent/child
documents from the best sections. Built at query time from the catalog it cost ~22 MiB at 100k
sections (a dict per section); compiled, it is three arrays sorted by source section, read by
binary search. A partition holds the edges that start or end in its own sections, in view
numbering: a tenant's link to a shared section, and the backlink from that shared section, live in
the tenant's partition — so only the tenant's view ever sees them. The sorted edges are cut into
tables by source section, read per query (``router.package.stores.graph``); a table:

    magic    b"KRGRPH01"         8 bytes
    header   uint32 edges E
    sources  uint32[E]           ascending
    targets  uint32[E]
    kinds    uint8[E]            RELATIONS order (+ padding to 4)

The tables hold about ``GRAPH_CHUNK_BYTES`` each (a section's edges are never split), each a file
named by its content (``g-<sha16>.bin``); the resident directory ``graph.bin`` keeps each
chunk's first source section and hash, 20 bytes a chunk:

    graph.bin
        magic    b"KRGDIR01"          8 bytes
        header   uint32 chunks C, edges E
        firsts   uint32[C]            first source section of each chunk (view numbering)
        hashes   C × 16 ASCII bytes   the hex digest naming chunk c: g-<hash>.bin
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.version.content_names import Digests, content_name

__all__ = [
    "GRAPH_CHUNK_BYTES",
    "GRAPH_NAME",
    "GRAPH_STEM",
    "RELATIONS",
    "Edge",
    "GraphDirectory",
    "GraphTable",
    "decode_graph",
    "decode_graph_directory",
    "encode_graph_chunks",
    "encode_table",
    "graph_edges",
]

Edge = tuple[int, int, int]
"""(source section, target section, relation index in ``RELATIONS``), in view numbering."""

RELATIONS = ("link", "backlink", "parent", "child")
_MAGIC = b"KRGRPH01"
_HEADER = struct.Struct("<8sI")


def graph_edges(
    documents: Sequence[Document],
    first_section: int,
    target_section: Callable[[str], int | None],
    doc_first_section: Callable[[str], int | None],
    strength: Mapping[str, float],
) -> list[Edge]:
    """The edges of a partition, sorted: links from its sections (and their backlinks), and the
    parent/child edges of its documents; ``strength`` keeps one relation per edge, the strongest."""
    edges: dict[tuple[int, int], str] = {}

    def edge(source: int, target: int, relation: str) -> None:
        current = edges.get((source, target))
        if current is None or strength[relation] > strength[current]:
            edges[source, target] = relation

    section = first_section
    for doc in documents:
        doc_first = section
        for part in doc.sections:
            for link in part.links:
                target = target_section(link.target)
                if target is not None and target != section:
                    edge(section, target, "link")
                    edge(target, section, "backlink")
            section += 1
        parent_id = doc.semantic_id.rsplit(".", 1)[0] if "." in doc.semantic_id else None
        parent = doc_first_section(parent_id) if parent_id is not None else None
        if parent is not None:
            edge(doc_first, parent, "parent")
            edge(parent, doc_first, "child")
    return [(s, t, RELATIONS.index(relation)) for (s, t), relation in sorted(edges.items())]


def encode_table(edges: Sequence[Edge]) -> bytes:
    """The table of ``edges`` (sorted by source)."""
    kinds = bytes(kind for _, _, kind in edges)
    return b"".join(
        [
            _HEADER.pack(_MAGIC, len(edges)),
            little_endian_bytes("I", [source for source, _, _ in edges]),
            little_endian_bytes("I", [target for _, target, _ in edges]),
            kinds + b"\0" * (-len(kinds) % 4),
        ]
    )


@dataclass(frozen=True)
class GraphTable:
    """A partition's edges (zero-copy views), by source section."""

    sources: Sequence[int]
    targets: Sequence[int]
    kinds: bytes

    def neighbours(self, section: int) -> dict[int, str]:
        """Target section → relation, for the edges leaving ``section``."""
        low = bisect_left(self.sources, section)
        high = bisect_right(self.sources, section, low)
        return {self.targets[i]: RELATIONS[self.kinds[i]] for i in range(low, high)}


def decode_graph(blob: bytes, what: str = "graph table") -> GraphTable:
    """The table in ``blob`` (``what`` names it in errors); a wrong magic or length refuses it."""
    (count,) = header_fields(blob, _HEADER, _MAGIC, what)
    expected = _HEADER.size + 8 * count + count + (-count % 4)
    if len(blob) != expected:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, expected {expected}")
    view = memoryview(blob)
    offset = _HEADER.size
    sources = little_endian_view(view[offset : offset + 4 * count], "I")
    targets = little_endian_view(view[offset + 4 * count : offset + 8 * count], "I")
    kinds = bytes(view[offset + 8 * count : offset + 9 * count])
    return GraphTable(sources, targets, kinds)


GRAPH_NAME = "graph.bin"


GRAPH_STEM = "g"


GRAPH_CHUNK_BYTES = 16 * 1024


_DIRECTORY_MAGIC = b"KRGDIR01"


_DIRECTORY_HEADER = struct.Struct("<8sII")


_DIRECTORY_HASH = 16


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
            _DIRECTORY_HEADER.pack(_DIRECTORY_MAGIC, len(groups), len(edges)),
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
    chunks, edges = header_fields(blob, _DIRECTORY_HEADER, _DIRECTORY_MAGIC, what)
    hashes_at = _DIRECTORY_HEADER.size + 4 * chunks
    if len(blob) != hashes_at + _DIRECTORY_HASH * chunks:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, its header says otherwise")
    firsts = little_endian_view(memoryview(blob)[_DIRECTORY_HEADER.size : hashes_at], "I")
    try:
        digests = bytes(blob[hashes_at:]).decode("ascii")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed chunk hash") from exc
    ascending = all(a < b for a, b in pairwise(firsts))
    if not ascending or (edges == 0) != (chunks == 0):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    return GraphDirectory(firsts, Digests(digests), edges)
