"""A sorted string → string table searched in place: the accent lexicon and the typo vocabulary.

Why not JSON (index format 3, docs/adr/0010): decoded, a partition's word maps are one Python
string pair per word (≈ 10 MiB of objects at 100k sections, and the typo layer built from them
at first use another 5); compiled, they are two blobs and two offset arrays read with bisection,
nothing built when an isolate starts. Layout, little-endian:

    magic    b"KRSMAP01"        8 bytes
    header   uint32 entries N   4 bytes
    keys     uint32[N + 1]      byte offsets into the key blob (keys sorted, UTF-8)
    values   uint32[N + 1]      byte offsets into the value blob
    blobs    the key blob, then the value blob (UTF-8)

A multi-valued entry (a sound key's words) joins its values with ``VALUE_SEPARATOR``.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping, Sequence

from router.errors import PackageFormatError
from router.package.format.arrays import (
    SortedKeys,
    header_fields,
    little_endian_bytes,
    little_endian_view,
)

__all__ = ["VALUE_SEPARATOR", "FirstOf", "StringMap", "decode_string_map", "encode_string_map"]

VALUE_SEPARATOR = "\x1f"
_MAGIC = b"KRSMAP01"
_HEADER = struct.Struct("<8sI")


def encode_string_map(entries: Mapping[str, str]) -> bytes:
    """The table of ``entries``; same entries → same bytes."""
    keys = sorted(entries)  # code point order is UTF-8 byte order
    raw_keys = [k.encode("utf-8") for k in keys]
    raw_values = [entries[k].encode("utf-8") for k in keys]
    return b"".join(
        [
            _HEADER.pack(_MAGIC, len(keys)),
            little_endian_bytes("I", _offsets(raw_keys)),
            little_endian_bytes("I", _offsets(raw_values)),
            b"".join(raw_keys),
            b"".join(raw_values),
        ]
    )


def _offsets(items: Sequence[bytes]) -> list[int]:
    offsets = [0]
    for item in items:
        offsets.append(offsets[-1] + len(item))
    return offsets


class StringMap(Mapping[str, str]):
    """The decoded table: a read-only mapping, looked up by binary search in the key blob."""

    __slots__ = ("_blob", "_key_offsets", "_keys_at", "_spans", "_value_offsets", "_values_at")

    def __init__(
        self,
        key_offsets: Sequence[int],
        value_offsets: Sequence[int],
        blob: bytes,
        keys_at: int,
        values_at: int,
    ) -> None:
        self._key_offsets = key_offsets
        self._value_offsets = value_offsets
        self._blob = blob  # the whole file, sliced in place (a copy would hold it twice)
        self._keys_at = keys_at
        self._values_at = values_at
        self._spans: dict[int, tuple[int, int]] = {}  # first byte → its keys, once asked

    def __len__(self) -> int:
        return len(self._key_offsets) - 1

    def _key(self, index: int) -> bytes:
        at = self._keys_at
        return bytes(self._blob[at + self._key_offsets[index] : at + self._key_offsets[index + 1]])

    def _find(self, key: str) -> int | None:
        """The key's index, bisected among the keys of its first byte only: a word whose first
        letter no key has is refused without reading a key (most words of a question, in an
        English package's accent lexicon), the others bisect fewer keys."""
        wanted = key.encode("utf-8", "surrogatepass")
        if not wanted:
            return SortedKeys(self._key, len(self)).find(wanted)
        span = self._spans.get(wanted[0])
        if span is None:
            span = SortedKeys(self._key, len(self)).prefix_span(wanted[0])
            self._spans[wanted[0]] = span
        lo, hi = span
        return SortedKeys(self._key, len(self)).find(wanted, lo, hi) if lo < hi else None

    def __getitem__(self, key: str) -> str:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def get(self, key: str, default: str | None = None) -> str | None:  # type: ignore[override]
        """The value of ``key``, or ``default``: ``Mapping.get`` would raise and catch a
        ``KeyError`` for every missing word (most of a query's words miss the accent lexicon,
        each at its first stem: ≈ 1 µs apiece)."""
        index = self._find(key) if isinstance(key, str) else None
        if index is None:
            return default
        at = self._values_at
        start, end = self._value_offsets[index], self._value_offsets[index + 1]
        return bytes(self._blob[at + start : at + end]).decode("utf-8")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._find(key) is not None

    def __iter__(self) -> Iterator[str]:
        return (self._key(i).decode("utf-8") for i in range(len(self)))

    def values_of(self, key: str) -> tuple[str, ...]:
        """A multi-valued entry's values (none when the key is absent)."""
        found = self.get(key)
        return tuple(found.split(VALUE_SEPARATOR)) if found else ()

    def key_characters(self) -> set[str]:
        """Every character of every key (the typo repair's alphabet)."""
        return set(bytes(self._blob[self._keys_at : self._values_at]).decode("utf-8"))


def decode_string_map(blob: bytes, what: str) -> StringMap:
    """The table in ``blob`` (the file ``what``); a wrong magic or length refuses the package."""
    (entries,) = header_fields(blob, _HEADER, _MAGIC, what)
    start = _HEADER.size
    tables = start + 8 * (entries + 1)
    if len(blob) < tables:
        raise PackageFormatError(f"{what} is truncated")
    view = memoryview(blob)
    key_offsets = little_endian_view(view[start : start + 4 * (entries + 1)], "I")
    value_offsets = little_endian_view(view[start + 4 * (entries + 1) : tables], "I")
    keys_end = tables + key_offsets[entries]
    if (
        key_offsets[0] != 0
        or value_offsets[0] != 0
        or len(blob) != keys_end + value_offsets[entries]
    ):
        raise PackageFormatError(f"{what} has inconsistent lengths")
    return StringMap(key_offsets, value_offsets, blob, tables, keys_end)


class FirstOf(Mapping[str, str]):
    """Several maps read as one, the first holding a key winning (a tenant's lexicon under the
    shared one: the shared spellings win), without copying any."""

    __slots__ = ("_maps",)

    def __init__(self, *maps: Mapping[str, str]) -> None:
        self._maps = maps

    def __getitem__(self, key: str) -> str:
        for found in self._maps:
            if key in found:
                return found[key]
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys(key for found in self._maps for key in found))

    def __len__(self) -> int:
        return sum(1 for _ in self)
