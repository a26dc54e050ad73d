"""Encoder and decoder of ``vectors.bin``: one L2-normalised float32 vector per section.

Why in the package: section vectors are computed once at build time (embedding is the slow
part), travel with the knowledge version they were computed for, and are upserted into Vectorize
(or the local index) on publish. Layout (little-endian): magic ``b"KRVEC001"``, uint32 dimensions,
uint32 rows, then ``rows × dimensions`` float32 in section order.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from router.errors import PackageFormatError
from router.package.format.arrays import little_endian_bytes, little_endian_view

__all__ = ["VECTORS_MAGIC", "SectionVectors", "decode_vectors", "encode_vectors"]

VECTORS_MAGIC = b"KRVEC001"
_HEADER = struct.Struct("<8sII")


@dataclass(frozen=True)
class SectionVectors:
    """Row-major float32 view; ``row(i)`` is section i's vector."""

    dimensions: int
    count: int
    values: Sequence[float]

    def row(self, index: int) -> Sequence[float]:
        start = index * self.dimensions
        return self.values[start : start + self.dimensions]


def encode_vectors(rows: Sequence[Sequence[float]], dimensions: int) -> bytes:
    for row in rows:
        if len(row) != dimensions:
            raise PackageFormatError(f"a section vector has {len(row)} values, not {dimensions}")
    flat = little_endian_bytes("f", (float(v) for row in rows for v in row))
    return _HEADER.pack(VECTORS_MAGIC, dimensions, len(rows)) + flat


def decode_vectors(blob: bytes) -> SectionVectors:
    if len(blob) < _HEADER.size:
        raise PackageFormatError("vectors.bin is truncated (no header)")
    magic, dimensions, count = _HEADER.unpack_from(blob)
    if magic != VECTORS_MAGIC:
        raise PackageFormatError("vectors.bin has an unknown magic number")
    if len(blob) != _HEADER.size + 4 * dimensions * count:
        raise PackageFormatError("vectors.bin length does not match its header")
    values = little_endian_view(memoryview(blob)[_HEADER.size :], "f")
    return SectionVectors(dimensions, count, values)
