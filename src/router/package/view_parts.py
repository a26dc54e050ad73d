"""The parts a view is built from, and the sequences it reads through them on demand.

Why apart from the view (``package.view``): a view is its partitions placed one after another
(``ViewPart``), what the deltas among them amend (``Amended``), and sequences that read records
and texts per query rather than hold them (``LoadedDocuments``, ``SectionDocs``, ``ViewTexts``).
These know only partitions and numbers; the view's lookups and ``package.compose`` build on them.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from router.knowledge.model import Document, Section
from router.package.joined import Indexed
from router.package.stores.cost import ReadCost
from router.sync import concurrently

if TYPE_CHECKING:
    from router.package.partition import Partition

__all__ = [
    "Amended",
    "LoadedDocuments",
    "LoadedSections",
    "RecordNotLoaded",
    "SectionDocs",
    "ViewPart",
    "ViewTexts",
    "from_every_part",
    "part_of_doc",
    "part_of_section",
]

R = TypeVar("R")


@dataclass(frozen=True)
class ViewPart:
    """One partition in a view: where its sections and documents start in the view and in the
    package's global numbering (shared first, then every tenant in key order)."""

    partition: Partition
    first_doc: int  # view document index of its first document
    first_global: int  # global section index of its first section

    @property
    def first_section(self) -> int:
        return self.partition.first_section

    def doc_indices(self) -> range:
        """The view indices of this partition's documents."""
        return range(self.first_doc, self.first_doc + self.partition.doc_count)

    def section_indices(self) -> range:
        """The view indices of this partition's sections."""
        first = self.partition.first_section
        return range(first, first + self.partition.section_count)


@dataclass(frozen=True)
class Amended:
    """What the deltas in a view change in its base partitions (docs/adr/0020): the tombstoned
    documents (view indices, hidden by the filters) and the redirected sections."""

    documents: frozenset[int] = frozenset()
    redirects: Mapping[int, int] = field(default_factory=dict)  # old section → new copy's
    origins: Mapping[int, int] = field(default_factory=dict)  # new section → the old one
    # what the tombstoned sections still count in the base's statistics: N and, per block and
    # term, document frequency (deltas whose old copies were not read leave both stale)
    dead_sections: int = 0
    dead_frequencies: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.documents)


class RecordNotLoaded(LookupError):
    """A stage read a document record the query did not load (a bug in the cascade's order:
    records are read after fusion, for what the response shows)."""


class LoadedDocuments(Indexed[Document]):
    """The view's documents as a sequence, of which only the loaded records can be read."""

    __slots__ = ("_count", "_loaded")

    def __init__(self, loaded: Mapping[int, Document], count: int) -> None:
        self._loaded = loaded
        self._count = count

    def __len__(self) -> int:
        return self._count

    def _item(self, index: int) -> Document:
        found = self._loaded.get(index)
        if found is None:
            raise RecordNotLoaded(f"document {index} was not loaded for this query")
        return found


class LoadedSections(Indexed[Section]):
    """The view's sections, read through their (loaded) documents."""

    __slots__ = ("_docs", "_first", "_section_doc")

    def __init__(
        self, docs: LoadedDocuments, section_doc: Sequence[int], first: Sequence[int]
    ) -> None:
        self._docs = docs
        self._section_doc = section_doc
        self._first = first

    def __len__(self) -> int:
        return len(self._section_doc)

    def _item(self, index: int) -> Section:
        doc = self._section_doc[index]
        return self._docs[doc].sections[index - self._first[doc]]


class SectionDocs(Indexed[int]):
    """The view document of each view section, found by bisection in the documents' first
    sections (a document's sections are contiguous), so nothing is stored per section."""

    __slots__ = ("_first", "_sections")

    def __init__(self, first: Sequence[int], sections: int) -> None:
        self._first = first
        self._sections = sections

    def __len__(self) -> int:
        return self._sections

    def _item(self, index: int) -> int:
        return bisect_right(self._first, index) - 1


class ViewTexts:
    """Section texts of a view, read from the partitions' chunk stores (concurrently)."""

    def __init__(self, parts: tuple[ViewPart, ...]) -> None:
        self.parts = parts

    async def load(self, sections: Iterable[int]) -> tuple[dict[int, str], ReadCost]:
        wanted: list[list[int]] = [[] for _ in self.parts]
        for section in sections:
            wanted[part_of_section(self.parts, section)].append(section)
        jobs = [
            (part, [s - part.partition.first_section for s in chosen])
            for part, chosen in zip(self.parts, wanted, strict=True)
            if chosen
        ]
        per_part, reads = await from_every_part(
            [part.partition.texts.load(local) for part, local in jobs]
        )
        texts: dict[int, str] = {}
        for (part, _), found in zip(jobs, per_part, strict=True):
            base = part.partition.first_section
            texts.update({base + s: text for s, text in found.items()})
        return texts, reads


async def from_every_part(
    lookups: Sequence[Awaitable[tuple[R, ReadCost]]],
) -> tuple[list[R], ReadCost]:
    """Each partition's answer (in view order), their lookups made concurrently (one round trip),
    and what they cost together."""
    results = await concurrently(lookups)
    reads = ReadCost(0, 0, 0, 0)
    for _, cost in results:
        reads = reads.alongside(cost)
    return [found for found, _ in results], reads


def part_of_section(parts: tuple[ViewPart, ...], section: int) -> int:
    """The index of the part holding view section ``section``."""
    return _last_part(parts, section, lambda part: part.partition.first_section, "section")


def part_of_doc(parts: tuple[ViewPart, ...], doc: int) -> int:
    """The index of the part holding view document ``doc``."""
    return _last_part(parts, doc, lambda part: part.first_doc, "document")


def _last_part(
    parts: tuple[ViewPart, ...], number: int, first: Callable[[ViewPart], int], what: str
) -> int:
    """The last part whose numbering (``first``) starts at or before ``number``."""
    for index in range(len(parts) - 1, -1, -1):
        if number >= first(parts[index]):
            return index
    raise IndexError(f"{what} {number} is not in this view")
