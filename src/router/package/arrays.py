"""Little-endian typed arrays, the one way every binary artifact stores numbers.

Why one place: postings, vectors and the text index are all arrays of 4-byte numbers read with
``memoryview.cast`` (no parsing loop, no copy) on little-endian machines — every platform the
Worker and the compiler run on — and byte-swapped copies elsewhere.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["little_endian_bytes", "little_endian_view"]


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
