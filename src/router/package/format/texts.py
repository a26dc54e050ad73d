"""Encoder and decoder of the section texts: ``texts.bin`` (the index) and its chunk files.

Why apart from the catalog (index format 3, docs/adr/0010): section texts are most of a package's
bytes, yet a query quotes only the few sections it shows. Texts are packed in section order into
chunk files of about ``TEXT_CHUNK_BYTES`` (boundaries chosen by content: ``_cut_before``); the
index says which chunk holds each section, so a reader fetches (and verifies) just the chunks of
the sections it needs, and each chunk says where its texts start — so the resident index costs
20 bytes a chunk, not 4 a section (4 MB at a million sections). Layout, little-endian:

    texts.bin
        magic     b"KRTEXT05"                 8 bytes
        header    uint32 sections N, chunks C  8 bytes
        first     uint32[C + 1]               first section of each chunk; first[C] = N
        hashes    C × 16 ASCII bytes          chunk c is texts-<hashes[c]>.bin
    texts-<sha16>.bin (one per chunk, named by its content: router.package.version.content_names)
        offsets   uint32[n + 1]               n = first[c+1] − first[c]: where each text starts
                                              after the offsets, and offsets[n] = their length
        the UTF-8 texts of sections first[c] … first[c+1]−1, concatenated

The same layout stores any sequence of UTF-8 items read a few at a time: the document records
(``records.bin`` and ``records-<c>.bin``, ``router.package.stores.records``) are one JSON item per
document. ``stem`` names the files; "section" above then reads "item".
"""

from __future__ import annotations

import struct
import zlib
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view
from router.package.version.content_names import (
    CONTENT_HASH_DIGITS,
    Digests,
    content_name,
    digest_of,
)

__all__ = [
    "TEXTS_INDEX_NAME",
    "TEXT_CHUNK_BYTES",
    "TextIndex",
    "decode_text_index",
    "encode_texts",
]

TEXTS_STEM = "texts"
TEXTS_INDEX_NAME = "texts.bin"
TEXT_CHUNK_BYTES = 16 * 1024
"""Target size of one chunk file: a quoted section costs one fetch of at most about this much."""

_MAGIC = b"KRTEXT05"
_HEADER = struct.Struct("<8sII")


@dataclass(frozen=True)
class TextIndex:
    """Which chunk holds each section's text (each chunk says where its texts start)."""

    first: Sequence[int]  # C + 1 entries
    hashes: Digests  # C content digests: the chunks' names
    stem: str = TEXTS_STEM

    @property
    def sections(self) -> int:
        return self.first[-1]

    @property
    def chunks(self) -> int:
        return len(self.first) - 1

    def chunk_name(self, chunk: int) -> str:
        """The file name of chunk number ``chunk`` (without its partition prefix)."""
        return f"{self.stem}-{self.hashes[chunk]}.bin"

    def chunk_names(self) -> list[str]:
        return [self.chunk_name(c) for c in range(self.chunks)]

    def chunk_of(self, section: int) -> int:
        if not 0 <= section < self.sections:
            raise IndexError(f"section {section} is not in this package")
        return bisect_right(self.first, section) - 1

    def chunk_texts(self, chunk: int, blob: bytes) -> list[str]:
        """Every text of chunk number ``chunk`` (its bytes ``blob``), in order."""
        return [self.text(s, blob) for s in range(self.first[chunk], self.first[chunk + 1])]

    def text(self, section: int, chunk: bytes) -> str:
        """The text of ``section``, cut from the bytes of its chunk (a chunk whose offsets do
        not fit its bytes is refused)."""
        number = self.chunk_of(section)
        count = self.first[number + 1] - self.first[number]
        base = 4 * (count + 1)
        if len(chunk) < base:
            raise PackageFormatError(f"{self.chunk_name(number)} is truncated")
        offsets = little_endian_view(memoryview(chunk)[:base], "I")
        if offsets[count] != len(chunk) - base:
            raise PackageFormatError(f"{self.chunk_name(number)} does not match its offsets")
        local = section - self.first[number]
        return bytes(chunk[base + offsets[local] : base + offsets[local + 1]]).decode("utf-8")


def encode_texts(
    texts: Iterable[str], chunk_bytes: int = TEXT_CHUNK_BYTES, stem: str = TEXTS_STEM
) -> dict[str, bytes]:
    """``<stem>.bin`` and its chunk files for ``texts`` (section texts, in section order),
    read once: a build hands them over one at a time, not as a list of a partition's texts."""
    first: list[int] = [0]
    chunks: list[bytes] = []
    current: list[bytes] = []
    size = 0
    count = 0
    for index, text in enumerate(texts):
        count = index + 1
        encoded = text.encode("utf-8")
        if current and _cut_before(encoded, size, chunk_bytes):
            chunks.append(_chunk(current))
            first.append(index)
            current, size = [], 0
        current.append(encoded)
        size += len(encoded)
    if current or not chunks:
        chunks.append(_chunk(current))
    first.append(count)
    names = [content_name(stem, blob) for blob in chunks]
    index_blob = (
        _HEADER.pack(_MAGIC, count, len(chunks))
        + little_endian_bytes("I", first)
        + "".join(digest_of(blob) for blob in chunks).encode("ascii")
    )
    files = {f"{stem}.bin": index_blob}
    files.update(zip(names, chunks, strict=True))
    return files


def _cut_before(item: bytes, size: int, chunk_bytes: int) -> bool:
    """Whether a chunk of ``size`` bytes ends before ``item``: chosen by the item's content.

    Why content-defined boundaries: cut at a fixed size, one edited or inserted section moves
    every later boundary, so every later chunk gets a new name and a new version re-uploads them
    all. Here a chunk of at least half the target ends before an item with a probability
    proportional to the item's size (its crc32 decides), so chunks average about the target
    whatever the sizes of the items, are at most four times it, and the boundaries after an
    edit fall where they fell before within a chunk or two: unchanged texts keep their chunks'
    names (docs/adr/0018)."""
    if size >= 4 * chunk_bytes:
        return True
    half = max(1, chunk_bytes // 2)
    if size < half:
        return False
    return (zlib.crc32(item) & 0xFFFF) < (len(item) << 16) // half


def _chunk(items: Sequence[bytes]) -> bytes:
    """One chunk: its items' start offsets (and their total length), then the items."""
    offsets = [0]
    for item in items:
        offsets.append(offsets[-1] + len(item))
    return little_endian_bytes("I", offsets) + b"".join(items)


def decode_text_index(blob: bytes, stem: str = TEXTS_STEM) -> TextIndex:
    """The index of ``<stem>.bin``; a wrong magic or length refuses the package."""
    what = f"{stem}.bin"
    sections, chunks = header_fields(blob, _HEADER, _MAGIC, what)
    numbers = 4 * (chunks + 1)
    expected = _HEADER.size + numbers + CONTENT_HASH_DIGITS * chunks
    if len(blob) != expected:
        raise PackageFormatError(f"{what} is {len(blob)} bytes, expected {expected}")
    view = memoryview(blob)[_HEADER.size :]
    first = little_endian_view(view[:numbers], "I")
    if first[0] != 0 or first[chunks] != sections or list(first) != sorted(first):
        raise PackageFormatError(f"{what} has an inconsistent chunk table")
    try:
        digests = bytes(view[numbers:]).decode("ascii")
    except UnicodeDecodeError as exc:
        raise PackageFormatError(f"{what} has a malformed chunk hash") from exc
    return TextIndex(first, Digests(digests), stem)
