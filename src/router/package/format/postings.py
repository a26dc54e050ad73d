"""Encoder and decoder of ``postings.bin``, the compiled BM25 impacts (docs/index-format.md).

Why this layout: the Worker must start fast without numpy, so each block is three little-endian
arrays read with ``memoryview.cast`` — no parsing loop, no copy. ``postings.bin`` holds one block
per weighted field (or one BM25F block) behind a small directory:

    magic  b"KRPOSTS2", uint32 block count, then per block: 16-byte ASCII name (NUL-padded) and
    uint32 byte length; then the blocks in the same order, each laid out as:

    magic  b"KRPOST02"                        8 bytes
    header uint32 terms, sections, postings  12 bytes
           float32 scale                     4 bytes
    indptr uint32[terms + 1]                 postings of term t are [indptr[t], indptr[t+1])
    ids    uint32[postings]                  section numbers, ascending within a term
    scores uint16[postings] (+2 bytes when odd) quantized impact q; the impact is q × scale

Why quantized: a posting costs 6 bytes instead of 8, and a query multiplies each list's weight
by ``scale`` once instead of each impact. ``scale`` is the block's largest impact / 65,535, so the
largest impact is exact and any other is within scale / 2 of its value (relative 8·10⁻⁶ of the
largest); q ≥ 1, so a term present never scores 0.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.package.format.arrays import little_endian_bytes, little_endian_view

__all__ = [
    "BLOCKS_MAGIC",
    "MAGIC",
    "Postings",
    "decode_blocks",
    "decode_postings",
    "encode_blocks",
    "encode_postings",
    "quantization_scale",
    "quantize",
]

MAGIC = b"KRPOST02"
_HEADER = struct.Struct("<8sIIIf")
_LEVELS = 65535
BLOCKS_MAGIC = b"KRPOSTS2"
_DIRECTORY = struct.Struct("<8sI")
_ENTRY = struct.Struct("<16sI")


@dataclass(frozen=True)
class Postings:
    """Read-only views over the three arrays (CSC layout: one column per term)."""

    indptr: Sequence[int]
    section_ids: Sequence[int]
    scores: Sequence[float]  # quantized impacts: multiply by ``scale``
    num_sections: int
    scale: float = 1.0
    maxima: Sequence[float] | None = None  # each term's largest impact, when stored
    key: str = ""  # stable identity (partition, shard, block) for memos; "" → id()
    head: Postings | None = None  # long lists' largest impacts, largest first (shards only)
    lengths: Sequence[int] | None = None  # each term's full list, when only its head was read

    @property
    def num_terms(self) -> int:
        return len(self.indptr) - 1

    def list_length(self, term: int) -> int:
        """The term's postings in the block (its document frequency), read or not."""
        if self.lengths is not None:
            return self.lengths[term]
        return self.indptr[term + 1] - self.indptr[term]


def quantization_scale(scores: Sequence[float]) -> float:
    """The step of a block's quantized impacts: its largest impact / 65,535 (1 when empty)."""
    largest = max(scores, default=0.0)
    return struct.unpack("<f", struct.pack("<f", largest / _LEVELS))[0] if largest > 0 else 1.0


def quantize(scores: Sequence[float], scale: float) -> list[int]:
    """Impacts as multiples of ``scale``, rounded, at least 1 and at most 65,535."""
    return [min(_LEVELS, max(1, round(score / scale))) for score in scores]


def encode_postings(
    indptr: Sequence[int],
    section_ids: Sequence[int],
    scores: Sequence[float],
    num_sections: int,
    scale: float | None = None,
) -> bytes:
    """Serialise the arrays, impacts quantized with ``scale`` (by default the block's own, see
    ``quantization_scale``); same input → same bytes."""
    num_terms = len(indptr) - 1
    if len(section_ids) != len(scores) or (num_terms >= 0 and indptr[-1] != len(section_ids)):
        raise PackageFormatError("postings arrays have inconsistent lengths")
    scale = quantization_scale(scores) if scale is None else scale
    parts = [_HEADER.pack(MAGIC, num_terms, num_sections, len(section_ids), scale)]
    parts.append(little_endian_bytes("I", indptr))
    parts.append(little_endian_bytes("I", section_ids))
    parts.append(little_endian_bytes("H", quantize(scores, scale)))
    if len(section_ids) % 2:
        parts.append(b"\0\0")  # keeps the next block 4-byte aligned
    return b"".join(parts)


def decode_postings(blob: bytes | memoryview) -> Postings:
    """Zero-copy views over an encoded blob; refuses truncated or foreign files."""
    if len(blob) < _HEADER.size:
        raise PackageFormatError("postings.bin is truncated (no header)")
    magic, num_terms, num_sections, num_postings, scale = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        raise PackageFormatError("postings.bin has an unknown magic number")
    expected = _HEADER.size + 4 * (num_terms + 1) + 6 * num_postings + 2 * (num_postings % 2)
    if len(blob) != expected or not scale > 0:
        raise PackageFormatError(f"postings.bin has {len(blob)} bytes, expected {expected}")
    view = memoryview(blob)
    offset = _HEADER.size
    indptr, offset = _view(view, offset, num_terms + 1, "I")
    ids, offset = _view(view, offset, num_postings, "I")
    scores = little_endian_view(view[offset : offset + 2 * num_postings], "H")
    return Postings(indptr, ids, scores, num_sections, scale)


def _view(view: memoryview, offset: int, count: int, typecode: str) -> tuple[Sequence, int]:  # type: ignore[type-arg]
    end = offset + 4 * count
    return little_endian_view(view[offset:end], typecode), end


def encode_blocks(blocks: dict[str, bytes]) -> bytes:
    """Pack encoded blocks under their names (order kept; names are ASCII, ≤ 16 bytes)."""
    head = [_DIRECTORY.pack(BLOCKS_MAGIC, len(blocks))]
    for name, blob in blocks.items():
        raw = name.encode("ascii")
        if len(raw) > 16:
            raise PackageFormatError(f"postings block name {name!r} is longer than 16 bytes")
        head.append(_ENTRY.pack(raw, len(blob)))
    return b"".join(head) + b"".join(blocks.values())


def decode_blocks(blob: bytes) -> dict[str, Postings]:
    """Named zero-copy blocks; refuses a truncated directory or blocks of the wrong size."""
    if len(blob) < _DIRECTORY.size:
        raise PackageFormatError("postings.bin is truncated (no directory)")
    magic, count = _DIRECTORY.unpack_from(blob)
    if magic != BLOCKS_MAGIC:
        raise PackageFormatError("postings.bin has an unknown magic number")
    offset = _DIRECTORY.size + count * _ENTRY.size
    if len(blob) < offset:
        raise PackageFormatError("postings.bin is truncated (directory)")
    entries = [_ENTRY.unpack_from(blob, _DIRECTORY.size + i * _ENTRY.size) for i in range(count)]
    if offset + sum(size for _, size in entries) != len(blob):
        raise PackageFormatError("postings.bin block sizes do not add up to its length")
    view = memoryview(blob)
    blocks: dict[str, Postings] = {}
    for raw, size in entries:
        blocks[raw.rstrip(b"\0").decode("ascii")] = decode_postings(view[offset : offset + size])
        offset += size
    return blocks
