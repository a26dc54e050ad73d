"""Encoder and decoder of ``terms.bin``: a partition's sorted vocabulary, searched in place.

Why not a JSON list and a dict: at a million sections a partition has over a million terms, and a
Python ``str`` and a dict slot per term cost ~100 bytes each — more than the isolate can spare.
Here the terms stay one UTF-8 blob with an offsets array; ``get`` finds a term's id by binary
search over the blob (UTF-8 bytes sort as the code points the build sorted by).

    magic    b"KRTERM01"                 8 bytes
    header   uint32 terms T
    offsets  uint32[T + 1]               term t is blob[offsets[t]:offsets[t+1]]
    blob     the terms, UTF-8, sorted
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from router.errors import PackageFormatError
from router.package.format.arrays import (
    SortedKeys,
    header_fields,
    little_endian_bytes,
    little_endian_view,
)

__all__ = ["TermIndex", "decode_terms", "encode_terms"]

_MAGIC = b"KRTERM01"
_HEADER = struct.Struct("<8sI")


def encode_terms(terms: Sequence[str]) -> bytes:
    """``terms.bin`` of a sorted vocabulary."""
    encoded = [term.encode("utf-8") for term in terms]
    offsets = [0]
    for raw in encoded:
        offsets.append(offsets[-1] + len(raw))
    head = _HEADER.pack(_MAGIC, len(terms)) + little_endian_bytes("I", offsets)
    return head + b"".join(encoded)


class TermIndex:
    """Term → id (its rank in the sorted vocabulary), without a Python object per term."""

    __slots__ = ("_base", "_blob", "_offsets")

    def __init__(self, offsets: Sequence[int], blob: bytes, base: int = 0) -> None:
        self._offsets = offsets
        self._blob = blob  # the whole file: slicing a copy of its terms would hold them twice
        self._base = base  # where the terms start in it

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def _raw(self, index: int) -> bytes:
        base = self._base
        return bytes(self._blob[base + self._offsets[index] : base + self._offsets[index + 1]])

    def get(self, term: str) -> int | None:
        """The id of ``term``, or None when the partition does not index it."""
        return SortedKeys(self._raw, len(self)).find(term.encode("utf-8"))

    def __contains__(self, term: object) -> bool:
        return isinstance(term, str) and self.get(term) is not None

    def __getitem__(self, term: str) -> int:
        found = self.get(term)
        if found is None:
            raise KeyError(term)
        return found

    def key_characters(self) -> set[str]:
        """Every character of every term (the typo repair's alphabet), read from the blob."""
        return set(bytes(self._blob[self._base :]).decode("utf-8"))

    def __iter__(self) -> Iterator[str]:
        """The terms in order (decoded one at a time)."""
        return (self._raw(i).decode("utf-8") for i in range(len(self)))


def decode_terms(blob: bytes) -> TermIndex:
    """The index of ``terms.bin``; a wrong magic or length refuses the package."""
    (count,) = header_fields(blob, _HEADER, _MAGIC, "terms.bin")
    start = _HEADER.size + 4 * (count + 1)
    if len(blob) < start:
        raise PackageFormatError("terms.bin is truncated")
    offsets = little_endian_view(memoryview(blob)[_HEADER.size : start], "I")
    if offsets[0] != 0 or offsets[count] != len(blob) - start:
        raise PackageFormatError("terms.bin has inconsistent offsets")
    return TermIndex(offsets, blob, start)
