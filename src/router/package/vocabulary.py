"""A partition's vocabulary in chunks read per query, and the resident directory that finds them.

Why chunks (index format 3, docs/adr/0010): at a million sections a partition has ~1.8 million
terms; their sorted list (27 MB), their document frequencies and block maxima (10 MB) and the
keyword phrases (56 MB) were resident — most of an isolate — while a query looks up ten terms.
Now the sorted terms, with each term's document frequency and the keyword phrases filed under it,
are cut into chunks of about ``VOCABULARY_CHUNK_BYTES`` (``router.package.vocabulary_chunk``),
each a file named by its content (``v-<sha16>.bin``). What stays resident is this directory:
each chunk's first term, id and hash, the letters of the vocabulary and a Bloom filter of its
terms (``router.package.bloom``) for typo repair — about 1.3 bytes a term.

A cold query reads its terms' chunks together with its exact keys (one round trip), then its
posting shards (the second): the two sequential reads before scoring that docs/adr/0010 allows.

    terms.bin
        magic    b"KRVDIR01"          8 bytes
        header   uint32 terms T, chunks C, alphabet bytes A, filter bytes B
        firsts   uint32[C + 1]        first term id of each chunk; firsts[C] = T
        offsets  uint32[C + 1]        byte offsets of each chunk's first term in the key blob
        hashes   C × 16 ASCII bytes   the hex digest naming chunk c: v-<hash>.bin
        keys     the first terms, UTF-8, concatenated (sorted: UTF-8 bytes order)
        alphabet the vocabulary's letters, UTF-8 (typo repair's edit alphabet)
        filter   the Bloom filter of the T terms
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise

from router.errors import PackageFormatError
from router.lru import LruCache
from router.package.arrays import SortedKeys, header_fields, little_endian_bytes, little_endian_view
from router.package.bloom import BloomFilter, encode_bloom
from router.package.content_names import content_name
from router.package.text_store import ChunkFetcher, TextReads
from router.package.vocabulary_chunk import (
    KeywordEntry,
    TermEntry,
    VocabularyChunk,
    decode_chunk,
    encode_chunk,
    entry_bytes,
)
from router.sync import concurrently

__all__ = [
    "DEFAULT_VOCABULARY_CACHE_CHUNKS",
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
DEFAULT_VOCABULARY_CACHE_CHUNKS = 256
"""Decoded vocabulary chunks an isolate keeps, for the whole package (≈ 4 MiB)."""

_MAGIC = b"KRVDIR01"
_HEADER = struct.Struct("<8sIIII")
_HASH = 16


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
    files: dict[str, bytes] = {}
    digests: list[str] = []
    for start, end in pairwise(cuts):
        blob = encode_chunk(start, terms[start:end], df[start:end], keywords[start:end])
        name = content_name(VOCABULARY_STEM, blob)
        files[name] = blob
        digests.append(name[len(VOCABULARY_STEM) + 1 : -len(".bin")])
    firsts = [terms[start].encode("utf-8") for start in cuts[:-1]]
    offsets = [0]
    for first in firsts:
        offsets.append(offsets[-1] + len(first))
    alphabet = "".join(sorted({ch for term in terms for ch in term})).encode("utf-8")
    bloom = encode_bloom(terms, len(terms))
    files[VOCABULARY_NAME] = b"".join(
        [
            _HEADER.pack(_MAGIC, len(terms), len(digests), len(alphabet), len(bloom)),
            little_endian_bytes("I", cuts if terms else [0]),
            little_endian_bytes("I", offsets),
            "".join(digests).encode("ascii"),
            *firsts,
            alphabet,
            bloom,
        ]
    )
    return files


@dataclass(frozen=True)
class VocabularyDirectory:
    """Each chunk's first term, id and hash, the vocabulary's letters and its Bloom filter."""

    terms: int
    firsts: Sequence[int]
    offsets: Sequence[int]
    hashes: tuple[str, ...]
    first_keys: bytes
    alphabet: str
    bloom: BloomFilter

    @property
    def chunks(self) -> int:
        return len(self.hashes)

    def file_name(self, chunk: int) -> str:
        return f"{VOCABULARY_STEM}-{self.hashes[chunk]}.bin"

    def first_key(self, chunk: int) -> bytes:
        return self.first_keys[self.offsets[chunk] : self.offsets[chunk + 1]]

    def chunk_of(self, term: str) -> int | None:
        """The chunk that holds ``term`` if any does (the last whose first term ≤ it)."""
        if not self.chunks:
            return None
        return SortedKeys(self.first_key, self.chunks).last_at_most(term.encode("utf-8"))


def decode_vocabulary_directory(blob: bytes, what: str = VOCABULARY_NAME) -> VocabularyDirectory:
    """The directory in ``terms.bin``; a wrong magic or inconsistent table refuses the package."""
    terms, chunks, alphabet_bytes, bloom_bytes = header_fields(blob, _HEADER, _MAGIC, what)
    firsts_at = _HEADER.size
    offsets_at = firsts_at + 4 * (chunks + 1)
    hashes_at = offsets_at + 4 * (chunks + 1)
    keys_at = hashes_at + _HASH * chunks
    if len(blob) < keys_at:
        raise PackageFormatError(f"{what} is truncated")
    view = memoryview(blob)
    firsts = little_endian_view(view[firsts_at:offsets_at], "I")
    offsets = little_endian_view(view[offsets_at:hashes_at], "I")
    alphabet_at = keys_at + offsets[chunks]
    if len(blob) != alphabet_at + alphabet_bytes + bloom_bytes:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, its header says otherwise")
    try:
        digests = bytes(view[hashes_at:keys_at]).decode("ascii")
        alphabet = bytes(view[alphabet_at : alphabet_at + alphabet_bytes]).decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed hash or alphabet") from exc
    if (
        firsts[0] != 0
        or firsts[chunks] != terms
        or list(firsts) != sorted(firsts)
        or offsets[0] != 0
        or list(offsets) != sorted(offsets)
        or (terms > 0) != (chunks > 0)
    ):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    hashes = tuple(digests[c * _HASH : (c + 1) * _HASH] for c in range(chunks))
    return VocabularyDirectory(
        terms,
        firsts,
        offsets,
        hashes,
        bytes(view[keys_at:alphabet_at]),
        alphabet,
        BloomFilter(bytes(view[alphabet_at + alphabet_bytes :])),
    )


VocabularyChunks = LruCache[str, VocabularyChunk]
"""Decoded vocabulary chunks of one package (every partition), by file name."""


class PartitionVocabulary:
    """One partition's terms: the resident directory and its chunks, read through a cache."""

    def __init__(
        self,
        key: str,
        directory: VocabularyDirectory,
        fetch: ChunkFetcher,
        cache: VocabularyChunks,
    ) -> None:
        self.key = key
        self.directory = directory
        self._fetch = fetch
        self._cache = cache

    def __len__(self) -> int:
        return self.directory.terms

    def may_hold(self, term: str) -> bool:
        """False when the partition certainly lacks ``term`` (its Bloom filter); True may lie."""
        return term in self.directory.bloom

    def file(self, chunk: int) -> str:
        return f"{self.key}.{self.directory.file_name(chunk)}"

    async def lookup(self, terms: Iterable[str]) -> tuple[dict[str, TermEntry | None], TextReads]:
        """The entry of each term (None: not a term here), and what reading them cost (the
        chunks not already held, fetched concurrently: one round trip)."""
        wanted = sorted(set(terms))
        chunk_of = {term: self.directory.chunk_of(term) for term in wanted}
        held: dict[int, VocabularyChunk] = {}
        missing: list[int] = []
        for chunk in sorted({c for c in chunk_of.values() if c is not None}):
            found = self._cache.get(self.file(chunk))
            if found is None:
                missing.append(chunk)
            else:
                held[chunk] = found
        blobs = await concurrently([self._fetch(self.file(c)) for c in missing])
        for chunk, blob in zip(missing, blobs, strict=True):
            held[chunk] = self._decoded(chunk, blob)
            self._cache.put(self.file(chunk), held[chunk])
        entries = {
            term: None if chunk is None else held[chunk].lookup(term)
            for term, chunk in chunk_of.items()
        }
        cost = TextReads(len(wanted), len(blobs), sum(map(len, blobs)), 1 if blobs else 0)
        return entries, cost

    def _decoded(self, chunk: int, blob: bytes) -> VocabularyChunk:
        decoded = decode_chunk(blob, self.file(chunk))
        directory = self.directory
        if (
            decoded.first_id != directory.firsts[chunk]
            or len(decoded.terms) != directory.firsts[chunk + 1] - directory.firsts[chunk]
        ):
            raise PackageFormatError(f"{self.file(chunk)} does not match its directory")
        return decoded

    async def read_all(self) -> list[str]:
        """Every term in order (whole-package tools and tests; a query never does this)."""
        blobs = await concurrently(
            [self._fetch(self.file(c)) for c in range(self.directory.chunks)]
        )
        return [term for c, blob in enumerate(blobs) for term in self._decoded(c, blob).terms]
