"""A partition's exact keys in chunks read per query, and the resident directory that finds them.

Why chunks (index format 3, docs/adr/0010): every id, title, alias, fact address and section id
is an exact key, so the table grows with the sections (≈ 8 MB at 100k, ≈ 80 MB at 1M) while a
query looks up two or three keys. The sorted keys are cut into tables of about
``EXACT_CHUNK_BYTES`` (``router.package.format.exact`` layout), each a file named by its content
(``x-<sha16>.bin``, so an unchanged range is shared by consecutive versions); the directory
``exact.bin`` keeps each chunk's first key and hash, resident, and a lookup is a binary search
in it, then one fetch per distinct chunk — made concurrently with the query's posting shards.

    exact.bin
        magic    b"KREXDR01"          8 bytes
        header   uint32 chunks C      4 bytes
        offsets  uint32[C + 1]        byte offsets of each chunk's first key in the key blob
        hashes   C × 16 ASCII bytes   the hex digest naming chunk c: x-<hash>.bin
        keys     the first keys, UTF-8, concatenated (sorted: UTF-8 bytes order)
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.lru import LruCache
from router.package.format.arrays import (
    SortedKeys,
    header_fields,
    little_endian_bytes,
)
from router.package.format.exact import (
    ExactKeys,
    LocalTarget,
    decode_exact,
    encode_table,
    exact_keys_of,
)
from router.package.format.key_directory import decode_first_keys
from router.package.stores.chunks import ChunkStore
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkFetcher
from router.package.version.content_names import Digests

__all__ = [
    "EXACT_CHUNK_BYTES",
    "EXACT_NAME",
    "ExactDirectory",
    "ExactTables",
    "PartitionExact",
    "decode_exact_directory",
    "encode_exact_chunks",
]

EXACT_NAME = "exact.bin"
EXACT_CHUNK_BYTES = 16 * 1024

_MAGIC = b"KREXDR01"
_HEADER = struct.Struct("<8sI")
_HASH = 16
_PER_KEY = 8  # its offset and range entries
_PER_TARGET = 13  # kind, document, section, fact


def _chunk_name(digest: str) -> str:
    return f"x-{digest}.bin"


def encode_exact_chunks(
    documents: Sequence[Document], chunk_bytes: int = EXACT_CHUNK_BYTES
) -> dict[str, bytes]:
    """``exact.bin`` and its chunks for a partition's documents; same documents → same bytes."""
    keys = exact_keys_of(documents)
    groups: list[dict[str, list[LocalTarget]]] = [{}]
    size = 0
    for key in sorted(keys):  # code point order is UTF-8 byte order
        if groups[-1] and size >= chunk_bytes:
            groups.append({})
            size = 0
        groups[-1][key] = keys[key]
        size += len(key.encode("utf-8")) + _PER_KEY + _PER_TARGET * len(keys[key])
    files: dict[str, bytes] = {}
    firsts: list[bytes] = []
    digests: list[str] = []
    for group in groups:
        table = encode_table(group)
        digest = hashlib.sha256(table).hexdigest()[:_HASH]
        files[_chunk_name(digest)] = table
        digests.append(digest)
        firsts.append(min(group).encode("utf-8") if group else b"")
    offsets = [0]
    for first in firsts:
        offsets.append(offsets[-1] + len(first))
    files[EXACT_NAME] = b"".join(
        [
            _HEADER.pack(_MAGIC, len(groups)),
            little_endian_bytes("I", offsets),
            "".join(digests).encode("ascii"),
            b"".join(firsts),
        ]
    )
    return files


@dataclass(frozen=True)
class ExactDirectory:
    """Each chunk's first key and hash: enough to find the chunk of any key."""

    offsets: Sequence[int]
    hashes: Digests
    first_keys: bytes

    @property
    def chunks(self) -> int:
        return len(self.hashes)

    def file_name(self, chunk: int) -> str:
        return _chunk_name(self.hashes[chunk])

    def first_key(self, chunk: int) -> bytes:
        return self.first_keys[self.offsets[chunk] : self.offsets[chunk + 1]]

    def chunk_of(self, key: str) -> int:
        """The chunk that holds ``key`` if any chunk does (the last whose first key ≤ it)."""
        return SortedKeys(self.first_key, self.chunks).last_at_most(key.encode("utf-8"))


def decode_exact_directory(blob: bytes) -> ExactDirectory:
    """The directory of ``exact.bin``; a wrong magic or length refuses the package."""
    (chunks,) = header_fields(blob, _HEADER, _MAGIC, EXACT_NAME)
    if chunks < 1:
        raise PackageFormatError(f"{EXACT_NAME} is truncated")
    offsets, digests, keys_at = decode_first_keys(blob, _HEADER.size, chunks, EXACT_NAME)
    first_keys = bytes(blob[keys_at:])
    if offsets[chunks] != len(first_keys):
        raise PackageFormatError(f"{EXACT_NAME} has inconsistent key offsets")
    return ExactDirectory(offsets, digests, first_keys)


ExactTables = LruCache[str, ExactKeys]
"""Decoded key tables of one package (every partition), by file name."""


class PartitionExact(ChunkStore[ExactKeys]):
    """One partition's exact keys: the resident directory and its chunks, read through a cache."""

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
