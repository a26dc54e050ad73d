"""A partition's vocabulary in chunks read per query, and the resident directory that finds them.

Why chunks (index format 3, docs/adr/0010): at a million sections a partition has ~1.8 million
terms; their sorted list (27 MB), their document frequencies and block maxima (10 MB) and the
keyword phrases (56 MB) were resident — most of an isolate — while a query looks up ten terms.
Now the sorted terms, with each term's document frequency and the keyword phrases filed under it,
are cut into chunks of about ``VOCABULARY_CHUNK_BYTES`` (``router.package.format.vocabulary``),
each a file named by its content (``v-<sha16>.bin``). What stays resident is this directory:
each chunk's first term, id and hash, the letters of the vocabulary and a Bloom filter of its
terms (``router.package.format.bloom``) for typo repair — about 1.3 bytes a term.

A cold query reads its terms' chunks together with its exact keys (one round trip), then its
posting shards (the second): the two sequential reads before scoring that docs/adr/0010 allows.

    terms.bin
        magic    b"KRVDIR01"          8 bytes
        header   uint32 terms T, chunks C
        firsts   uint32[C + 1]        first term id of each chunk; firsts[C] = T
        then the key block of ``router.package.format.key_directory`` (first terms, hashes naming
        the
        chunks v-<hash>.bin, the vocabulary's letters, the Bloom filter of the T terms)
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from router.errors import PackageFormatError
from router.lru import LruCache
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.format.key_directory import KeyDirectory, decode_key_block, encode_key_block
from router.package.format.vocabulary import (
    KeywordEntry,
    TermEntry,
    VocabularyChunk,
    decode_chunk,
    encode_chunk,
    entry_bytes,
)
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher
from router.sync import concurrently

__all__ = [
    "VOCABULARY_CHUNK_BYTES",
    "VOCABULARY_NAME",
    "VOCABULARY_STEM",
    "PartitionVocabulary",
    "VocabularyChunks",
    "VocabularyDirectory",
    "decode_vocabulary_directory",
    "encode_vocabulary",
]

VOCABULARY_NAME = "terms.bin"
VOCABULARY_STEM = "v"
VOCABULARY_CHUNK_BYTES = 16 * 1024

_MAGIC = b"KRVDIR01"
_HEADER = struct.Struct("<8sII")


def encode_vocabulary(
    terms: Sequence[str],
    df: Sequence[int],
    keywords: Sequence[Sequence[KeywordEntry]],
    chunk_bytes: int = VOCABULARY_CHUNK_BYTES,
) -> dict[str, bytes]:
    """``terms.bin`` and its chunks for a partition's sorted ``terms``, their ``df`` and the
    keyword phrases filed under each; the same vocabulary gives the same bytes."""
    cuts = [0]
    size = 0
    for term_id, term in enumerate(terms):
        if size >= chunk_bytes:
            cuts.append(term_id)
            size = 0
        size += entry_bytes(term, keywords[term_id])
    if terms:
        cuts.append(len(terms))
    chunks = [
        (terms[start], encode_chunk(start, terms[start:end], df[start:end], keywords[start:end]))
        for start, end in pairwise(cuts)
    ]
    letters = (ch for term in terms for ch in term)
    block, files = encode_key_block(VOCABULARY_STEM, chunks, terms, letters)
    head = _HEADER.pack(_MAGIC, len(terms), len(chunks))
    files[VOCABULARY_NAME] = head + little_endian_bytes("I", cuts if terms else [0]) + block
    return files


@dataclass(frozen=True)
class VocabularyDirectory:
    """The chunks' first terms and hashes (``keys``), and the first term id of each."""

    terms: int
    firsts: Sequence[int]
    keys: KeyDirectory


def decode_vocabulary_directory(blob: bytes, what: str = VOCABULARY_NAME) -> VocabularyDirectory:
    """The directory in ``terms.bin``; a wrong magic or inconsistent table refuses the package."""
    terms, chunks = header_fields(blob, _HEADER, _MAGIC, what)
    block_at = _HEADER.size + 4 * (chunks + 1)
    if len(blob) < block_at:
        raise PackageFormatError(f"{what} is truncated")
    firsts = little_endian_view(memoryview(blob)[_HEADER.size : block_at], "I")
    keys = decode_key_block(blob, block_at, chunks, VOCABULARY_STEM, what)
    if (
        firsts[0] != 0
        or firsts[chunks] != terms
        or list(firsts) != sorted(firsts)
        or (terms > 0) != (chunks > 0)
    ):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    return VocabularyDirectory(terms, firsts, keys)


VocabularyChunks = LruCache[str, VocabularyChunk]
"""Decoded vocabulary chunks of one package (every partition), by file name."""


class PartitionVocabulary(ChunkStore[VocabularyChunk]):
    """One partition's terms: the resident directory and its chunks, read through a cache."""

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
