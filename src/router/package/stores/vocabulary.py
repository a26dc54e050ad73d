"""A partition's vocabulary read per query: the chunks holding the query's terms, found through
the resident directory and kept in the package's cache (codec and layouts: ``format.vocabulary``).

Why chunks (index format 3, docs/adr/0010): at a million sections a partition has ~1.8 million
terms; their sorted list (27 MB), their document frequencies and block maxima (10 MB) and the
keyword phrases (56 MB) were resident — most of an isolate — while a query looks up ten terms.
A cold query reads its terms' chunks together with its exact keys (one round trip), then its
posting shards (the second): the two sequential reads before scoring that docs/adr/0010 allows.
"""

from __future__ import annotations

from collections.abc import Iterable

from router.errors import PackageFormatError
from router.lru import LruCache
from router.package.format.vocabulary import (
    TermEntry,
    VocabularyChunk,
    VocabularyDirectory,
    decode_chunk,
)
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher
from router.sync import concurrently

__all__ = [
    "DECODED_PER_BYTE",
    "PartitionVocabulary",
    "VocabularyChunks",
]


VocabularyChunks = LruCache[str, VocabularyChunk]
"""Decoded vocabulary chunks of one package (every partition), by file name."""


DECODED_PER_BYTE = 1.1
"""Bytes a decoded chunk holds per byte of its file, in the Worker (the chunks of the 100k bench
corpus, Pyodide 314, tracemalloc: 1.08; the decoded chunk is mostly views of the file)."""


class PartitionVocabulary(ChunkStore[VocabularyChunk]):
    """One partition's terms: the resident directory and its chunks, read through a cache."""

    decoded_per_byte = DECODED_PER_BYTE

    def __init__(
        self,
        key: str,
        directory: VocabularyDirectory,
        fetch: ChunkFetcher,
        cache: VocabularyChunks,
    ) -> None:
        super().__init__(key, directory.keys.file_name, fetch, cache)
        self.directory = directory

    def __len__(self) -> int:
        return self.directory.terms

    def may_hold(self, term: str) -> bool:
        """False when the partition certainly lacks ``term`` (its Bloom filter); True may lie."""
        return self.directory.keys.may_hold(term)

    async def entries(self, terms: Iterable[str]) -> tuple[dict[str, TermEntry | None], ReadCost]:
        """The entry of each term (None: not a term here), and what reading them cost."""
        return await self.lookup(
            terms, self.directory.keys.chunk_of, VocabularyChunk.lookup, _no_entry
        )

    def decode(self, chunk: int, blob: bytes) -> VocabularyChunk:
        decoded = decode_chunk(blob, self.file(chunk))
        firsts = self.directory.firsts
        if (
            decoded.first_id != firsts[chunk]
            or len(decoded.terms) != firsts[chunk + 1] - firsts[chunk]
        ):
            raise PackageFormatError(f"{self.file(chunk)} does not match its directory")
        return decoded

    async def read_all(self) -> list[str]:
        """Every term in order (whole-package tools and tests; a query never does this)."""
        chunks = range(self.directory.keys.chunks)
        blobs = await concurrently([self._fetch(self.file(c)) for c in chunks])
        return [
            term
            for c, blob in zip(chunks, blobs, strict=True)
            for term in self.decode(c, blob).terms
        ]


def _no_entry() -> TermEntry | None:
    return None
