"""Little-endian typed arrays, the one way every binary artifact stores numbers.

Why one place: postings, vectors and the text index are all arrays of 4-byte numbers read with
``memoryview.cast`` (no parsing loop, no copy) on little-endian machines — every platform the
Worker and the compiler run on — and byte-swapped copies elsewhere.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from struct import Struct
from typing import Any

from router.errors import PackageFormatError

__all__ = ["SortedKeys", "header_fields", "little_endian_bytes", "little_endian_view"]


def little_endian_bytes(typecode: str, values: Iterable[Any]) -> bytes:
    """``values`` as a little-endian array of ``typecode`` ("I" uint32, "f" float32)."""
    encoded = array(typecode, values)
    if sys.byteorder != "little":
        encoded.byteswap()
    return encoded.tobytes()


def little_endian_view(view: memoryview, typecode: str) -> Sequence[Any]:
    """The numbers of a little-endian byte range: a zero-copy cast, or a swapped copy."""
    if sys.byteorder == "little":
        cast: Sequence[Any] = view.cast(typecode)  # type: ignore[call-overload]
        return cast
    swapped = array(typecode, view.tobytes())
    swapped.byteswap()
    return swapped


def header_fields(
    blob: bytes | memoryview, header: Struct, magic: bytes, what: str
) -> tuple[Any, ...]:
    """The numbers after a binary artifact's magic; a short blob or another magic refuses it."""
    if len(blob) < header.size:
        raise PackageFormatError(f"{what} is truncated")
    found, *fields = header.unpack_from(blob)
    if found != magic:
        raise PackageFormatError(f"{what} has magic {found!r}, expected {magic!r}")
    return tuple(fields)


class SortedKeys:
    """``count`` sorted byte keys read by ``key_at(i)`` (slices of a blob): every compiled table
    finds a key by bisection through this one class."""

    __slots__ = ("_count", "key_at")

    def __init__(self, key_at: Callable[[int], bytes], count: int) -> None:
        self.key_at = key_at
        self._count = count

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> bytes:
        return self.key_at(index)

    def find(self, wanted: bytes, lo: int = 0, hi: int | None = None) -> int | None:
        """The index of ``wanted`` (searched among keys ``lo`` to ``hi``), or None when it is
        not a key."""
        hi = self._count if hi is None else hi
        at = bisect_left(self, wanted, lo, hi)  # type: ignore[call-overload]
        return at if at < hi and self.key_at(at) == wanted else None

    def prefix_span(self, first: int) -> tuple[int, int]:
        """The indexes [lo, hi) of the keys whose first byte is ``first``."""
        lo = bisect_left(self, bytes((first,)))  # type: ignore[call-overload]
        if first == 255:
            return lo, self._count
        return lo, bisect_left(self, bytes((first + 1,)), lo)  # type: ignore[call-overload]

    def last_at_most(self, wanted: bytes) -> int:
        """The last index whose key is ≤ ``wanted`` (0 when every key is greater)."""
        return max(0, bisect_right(self, wanted) - 1)  # type: ignore[call-overload]
