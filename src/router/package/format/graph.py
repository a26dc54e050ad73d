"""A partition's section graph, compiled: its edges, and the codec of a table of them.

Why compiled (docs/adr/0010): the graph stage follows wikilinks, backlinks and parent/child
documents from the best sections. Built at query time from the catalog it cost ~22 MiB at 100k
sections (a dict per section); compiled, it is three arrays sorted by source section, read by
binary search. A partition holds the edges that start or end in its own sections, in view
numbering: a tenant's link to a shared section, and the backlink from that shared section, live in
the tenant's partition — so only the tenant's view ever sees them. The sorted edges are cut into
tables by source section (``router.package.stores.graph``), read per query; a table:

    magic    b"KRGRPH01"         8 bytes
    header   uint32 edges E
    sources  uint32[E]           ascending
    targets  uint32[E]
    kinds    uint8[E]            RELATIONS order (+ padding to 4)
"""

from __future__ import annotations

import struct
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view

__all__ = ["RELATIONS", "Edge", "GraphTable", "decode_graph", "encode_table", "graph_edges"]

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
