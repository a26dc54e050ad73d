"""Encoder and decoder of the exact keys: a chunk (a compiled range of keys) and its directory.

The keys of a partition are cut into such tables (chunks ``x-<hash>.bin``), listed by the
resident directory ``exact.bin`` (its layout below; docs/index-format.md).

Why compiled: the exact stage resolves a folded id, section id, alias, title or fact address to
its targets. Built at query time from the catalog, that map cost ~40 MiB at 100k sections (a
Python string and a list of objects per key); compiled, it is a sorted key blob and four arrays,
looked up by binary search — a few bytes a key, nothing built on a cold isolate.

    magic    b"KREXAC01"                          8 bytes
    header   uint32 keys K, targets N, fact names F
    keys     uint32[K + 1] byte offsets into the key blob (keys sorted, UTF-8, folded)
    ranges   uint32[K + 1] targets of key k are [ranges[k], ranges[k+1])
    kinds    uint8[N]  0 document, 1 title, 2 alias, 3 fact, 4 section   (+ padding to 4)
    docs     uint32[N] partition-local document
    sections uint32[N] partition-local section (0xFFFFFFFF: none)
    facts    uint32[N] index of the fact name (0xFFFFFFFF: none)
    names    uint32[F + 1] byte offsets into the fact-name blob
    blobs    the key blob, then the fact-name blob (UTF-8)

The sorted keys are cut into tables of about ``EXACT_CHUNK_BYTES``, each a file named by its
content (``x-<sha16>.bin``, so an unchanged range is shared by consecutive versions); the
resident directory ``exact.bin``, read by ``router.package.stores.exact``, keeps each chunk's
first key and hash:

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from router.analysis.text import fold
from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.format.arrays import (
    SortedKeys,
    header_fields,
    little_endian_bytes,
    little_endian_view,
)
from router.package.format.key_directory import decode_first_keys
from router.package.version.content_names import Digests

__all__ = [
    "EXACT_CHUNK_BYTES",
    "EXACT_KINDS",
    "EXACT_NAME",
    "ExactDirectory",
    "ExactKeys",
    "LocalTarget",
    "decode_exact",
    "decode_exact_directory",
    "encode_exact_chunks",
    "encode_table",
    "exact_keys_of",
]

EXACT_KINDS = ("document", "title", "alias", "fact", "section")
_NONE = 0xFFFFFFFF
_MAGIC = b"KREXAC01"
_HEADER = struct.Struct("<8sIII")

LocalTarget = tuple[str, int, int | None, str | None]
"""(kind, partition-local document, partition-local section or None, fact name or None)."""


def exact_keys_of(documents: Sequence[Document]) -> dict[str, list[LocalTarget]]:
    """Folded key → targets, in document order (ids, titles, aliases, facts), then sections."""
    keys: dict[str, list[LocalTarget]] = {}

    def add(key: str, target: LocalTarget) -> None:
        keys.setdefault(fold(key).strip(), []).append(target)

    for doc_index, doc in enumerate(documents):
        add(doc.semantic_id, ("document", doc_index, None, None))
        add(doc.title, ("title", doc_index, None, None))
        for alias in doc.aliases:
            add(alias, ("alias", doc_index, None, None))
        for name in doc.facts:
            add(f"{doc.semantic_id}.{name}", ("fact", doc_index, None, name))
    section = 0
    for doc_index, doc in enumerate(documents):
        for part in doc.sections:
            add(part.section_id, ("section", doc_index, section, None))
            section += 1
    return keys


def encode_table(keys: Mapping[str, Sequence[LocalTarget]]) -> bytes:
    """The table of ``keys`` (folded key → its targets); same keys → same bytes."""
    ordered = sorted(keys)
    fact_names = sorted({t[3] for targets in keys.values() for t in targets if t[3] is not None})
    fact_index = {name: i for i, name in enumerate(fact_names)}
    key_offsets, ranges = [0], [0]
    kinds: list[int] = []
    docs: list[int] = []
    sections: list[int] = []
    facts: list[int] = []
    encoded_keys = []
    for key in ordered:
        raw = key.encode("utf-8")
        encoded_keys.append(raw)
        key_offsets.append(key_offsets[-1] + len(raw))
        for kind, doc, section, fact in keys[key]:
            kinds.append(EXACT_KINDS.index(kind))
            docs.append(doc)
            sections.append(_NONE if section is None else section)
            facts.append(_NONE if fact is None else fact_index[fact])
        ranges.append(len(kinds))
    encoded_names = [name.encode("utf-8") for name in fact_names]
    name_offsets = [0]
    for raw in encoded_names:
        name_offsets.append(name_offsets[-1] + len(raw))
    kind_bytes = bytes(kinds) + b"\0" * (-len(kinds) % 4)
    return b"".join(
        [
            _HEADER.pack(_MAGIC, len(ordered), len(kinds), len(fact_names)),
            little_endian_bytes("I", key_offsets),
            little_endian_bytes("I", ranges),
            kind_bytes,
            little_endian_bytes("I", docs),
            little_endian_bytes("I", sections),
            little_endian_bytes("I", facts),
            little_endian_bytes("I", name_offsets),
            b"".join(encoded_keys),
            b"".join(encoded_names),
        ]
    )


@dataclass(frozen=True)
class ExactKeys:
    """The decoded table: zero-copy views, searched by ``lookup``."""

    key_offsets: Sequence[int]
    ranges: Sequence[int]
    kinds: bytes
    docs: Sequence[int]
    sections: Sequence[int]
    facts: Sequence[int]
    fact_names: tuple[str, ...]
    key_blob: bytes

    def _key(self, index: int) -> bytes:
        return self.key_blob[self.key_offsets[index] : self.key_offsets[index + 1]]

    def lookup(self, key: str) -> list[LocalTarget]:
        """The targets of a folded key (none when the partition has no such key)."""
        low = SortedKeys(self._key, len(self.ranges) - 1).find(key.encode("utf-8"))
        if low is None:
            return []
        found: list[LocalTarget] = []
        for t in range(self.ranges[low], self.ranges[low + 1]):
            section, fact = self.sections[t], self.facts[t]
            found.append(
                (
                    EXACT_KINDS[self.kinds[t]],
                    self.docs[t],
                    None if section == _NONE else section,
                    None if fact == _NONE else self.fact_names[fact],
                )
            )
        return found


def decode_exact(blob: bytes) -> ExactKeys:
    """A decoded exact-key table; a wrong magic or length refuses the package."""
    keys, targets, names = header_fields(blob, _HEADER, _MAGIC, "an exact-key table")
    view = memoryview(blob)
    offset = _HEADER.size

    def take(count: int, typecode: str = "I") -> Sequence[int]:
        nonlocal offset
        size = 4 * count
        if offset + size > len(blob):
            raise PackageFormatError("an exact-key table is truncated")
        found = little_endian_view(view[offset : offset + size], typecode)
        offset += size
        return found

    key_offsets, ranges = take(keys + 1), take(keys + 1)
    kinds = bytes(view[offset : offset + targets])
    offset += targets + (-targets % 4)
    docs, sections, facts, name_offsets = (
        take(targets),
        take(targets),
        take(targets),
        take(names + 1),
    )
    key_blob = bytes(view[offset : offset + key_offsets[keys]])
    offset += key_offsets[keys]
    name_blob = bytes(view[offset:])
    if len(name_blob) != name_offsets[names] or ranges[keys] != targets or len(kinds) != targets:
        raise PackageFormatError("an exact-key table has inconsistent lengths")
    fact_names = tuple(
        name_blob[name_offsets[i] : name_offsets[i + 1]].decode("utf-8") for i in range(names)
    )
    return ExactKeys(key_offsets, ranges, kinds, docs, sections, facts, fact_names, key_blob)


EXACT_NAME = "exact.bin"


EXACT_CHUNK_BYTES = 16 * 1024


_DIRECTORY_MAGIC = b"KREXDR01"


_DIRECTORY_HEADER = struct.Struct("<8sI")


_DIRECTORY_HASH = 16


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
        digest = hashlib.sha256(table).hexdigest()[:_DIRECTORY_HASH]
        files[_chunk_name(digest)] = table
        digests.append(digest)
        firsts.append(min(group).encode("utf-8") if group else b"")
    offsets = [0]
    for first in firsts:
        offsets.append(offsets[-1] + len(first))
    files[EXACT_NAME] = b"".join(
        [
            _DIRECTORY_HEADER.pack(_DIRECTORY_MAGIC, len(groups)),
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
    (chunks,) = header_fields(blob, _DIRECTORY_HEADER, _DIRECTORY_MAGIC, EXACT_NAME)
    if chunks < 1:
        raise PackageFormatError(f"{EXACT_NAME} is truncated")
    offsets, digests, keys_at = decode_first_keys(blob, _DIRECTORY_HEADER.size, chunks, EXACT_NAME)
    first_keys = bytes(blob[keys_at:])
    if offsets[chunks] != len(first_keys):
        raise PackageFormatError(f"{EXACT_NAME} has inconsistent key offsets")
    return ExactDirectory(offsets, digests, first_keys)
