"""Encoder and decoder of ``docs.bin``: the per-document columns every query reads resident.

Why columns (index format 3, docs/adr/0010 §4): the filters (validity window, deprecation), the
trust ordering, the UI scope of deictic questions and the section → document map run on every
query and over every document, before anything is ranked; as decoded ``Document`` objects they
were most of the resident set (≈ 160 MiB at 100k sections). As columns they are read in place;
the rest of a document (title, facts, sections' headings and links) is its record
(``router.package.stores.records``), fetched only for the documents a response shows.

Each column is as narrow as its values allow (1, 2 or 4 bytes): 12 bytes a document in the
usual case (days within 179 years of each other, under 65,535 distinct scopes), 28 before —
at 1M sections, 5.6 of the shared partition's 11.2 MB.

Layout, little-endian, D documents of one partition:

    magic    b"KRDOCS02"            8 bytes
    header   uint32 D, uint32 S     S: the JSON string table's byte length
             int32 B                day base: a bound is stored as its ordinal − B
             6 bytes                the typecodes ('B', 'H' or 'I') of the six columns below
             2 bytes                zero
    first    uint32[D + 1]          partition-local first section of each document; first[D] =
                                    the partition's section count (a document's sections are
                                    contiguous)
    from     days[D]                validFrom − B (≥ 1), 0 = open
    until    days[D]                validUntil − B, the typecode's largest value = open (from and
                                    until share one typecode, whose largest bound is at most
                                    its largest value − 2, so a day clamped into range compares
                                    like the day itself)
    trust    [D]                    index of its trust level in the string table
    deprec   [D]                    1 when deprecated (trust or status), else 0
    page     [D]                    index of its folded ``scope.page`` ("" = none)
    tab      [D]                    index of its folded ``scope.tab`` ("" = none)
             each column padded with zeros to a multiple of 4 bytes
    strings  UTF-8 JSON list        the string table; strings[0] = ""
"""

from __future__ import annotations

import datetime as dt
import json
import struct
import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, cached_property
from itertools import islice
from operator import le
from typing import cast

from router.analysis.text import fold
from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.format.arrays import header_fields, little_endian_bytes, little_endian_view

__all__ = ["DOCS_NAME", "DocColumns", "day_number", "decode_columns", "encode_columns"]

DOCS_NAME = "docs.bin"

_MAGIC = b"KRDOCS02"
_HEADER = struct.Struct("<8sIIi6s2x")
_COLUMNS = ("from", "until", "trust", "deprecated", "page", "tab")
_LARGEST = {"B": 0xFF, "H": 0xFFFF, "I": 0xFFFFFFFF}
_WIDTH = {"B": 1, "H": 2, "I": 4}


def day_number(day: str) -> int:
    """An ISO date as the ordinal ``docs.bin`` stores (comparisons keep their order)."""
    return dt.date.fromisoformat(day[:10]).toordinal()


def encode_columns(documents: Sequence[Document]) -> bytes:
    """``docs.bin`` of one partition's documents, in order."""
    strings: dict[str, int] = {"": 0}

    def string(value: str) -> int:
        return strings.setdefault(value, len(strings))

    first = [0]
    starts: list[int | None] = []
    ends: list[int | None] = []
    columns: dict[str, list[int]] = {name: [] for name in _COLUMNS}
    for doc in documents:
        first.append(first[-1] + len(doc.sections))
        starts.append(day_number(doc.valid_from) if doc.valid_from else None)
        ends.append(day_number(doc.valid_until) if doc.valid_until else None)
        columns["trust"].append(string(doc.trust))
        columns["deprecated"].append(int(doc.deprecated))
        columns["page"].append(string(fold(doc.scope.get("page", ""))))
        columns["tab"].append(string(fold(doc.scope.get("tab", ""))))
    bounds = [day for day in (*starts, *ends) if day is not None]
    base = min(bounds) - 1 if bounds else 0
    days = _narrowest(max(bounds, default=base) - base + 2)
    open_until = _LARGEST[days]
    columns["from"] = [0 if day is None else day - base for day in starts]
    columns["until"] = [open_until if day is None else day - base for day in ends]
    codes = {
        name: days if name in ("from", "until") else _narrowest(max(columns[name], default=0))
        for name in _COLUMNS
    }
    table = json.dumps(list(strings), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    typecodes = "".join(codes[name] for name in _COLUMNS).encode("ascii")
    parts = [_HEADER.pack(_MAGIC, len(documents), len(table), base, typecodes)]
    parts.append(little_endian_bytes("I", first))
    for name in _COLUMNS:
        parts.append(_padded(little_endian_bytes(codes[name], columns[name])))
    return b"".join([*parts, table])


def _narrowest(largest: int) -> str:
    """The narrowest typecode that holds 0..largest."""
    return next(code for code in ("B", "H", "I") if largest <= _LARGEST[code])


def _padded(raw: bytes) -> bytes:
    return raw + bytes(-len(raw) % 4)


@dataclass(frozen=True)
class DocColumns:
    """The columns of one partition's documents, read in place from ``docs.bin``."""

    first: Sequence[int]  # D + 1 entries
    valid_from: Sequence[int]  # day − day_base, 0 = open
    valid_until: Sequence[int]  # day − day_base, open_until = open
    trust_ids: Sequence[int]
    deprecated: Sequence[int]
    page_ids: Sequence[int]
    tab_ids: Sequence[int]
    strings: list[str]
    day_base: int = 0
    open_until: int = _LARGEST["I"]

    @property
    def documents(self) -> int:
        return len(self.valid_from)

    @property
    def sections(self) -> int:
        return self.first[-1]

    def trust(self, doc: int) -> str:
        return self.strings[self.trust_ids[doc]]

    @cached_property
    def _string_ids(self) -> dict[str, int]:
        return {value: index for index, value in enumerate(self.strings)}

    def in_scope(self, page: str, tab: str | None) -> list[int]:
        """Documents whose folded page (and tab, when given) scope equals these folded ones."""
        page_id = self._string_ids.get(page)
        if not page or page_id is None:
            return []
        found = [d for d, p in enumerate(self.page_ids) if p == page_id]
        if tab is None:
            return found
        tab_id = self._string_ids.get(tab)
        return [d for d in found if self.tab_ids[d] == tab_id]

    def visible(self, day: int, include_deprecated: bool) -> bytes:
        """One byte per document, 1 when it may be shown on ``day`` (an ordinal; bounds
        inclusive).

        Why no loop over the documents: at a million sections that loop was 100 ms of a cold
        Worker's first query, and again for every new day asked. The day columns are split into
        byte planes (most significant first); ``bytes.translate`` compares a plane with the
        day's byte, and the per-document flags (one byte each, 0 or 1) are combined as the
        bits of big integers, so the work runs in C."""
        count = self.documents
        if not count:  # an empty partition (a delta that only removes documents)
            return b""
        day = min(max(day - self.day_base, 0), self.open_until - 1)
        every = int.from_bytes(b"\x01" * count, "little")
        starts_after, _ = _compare(self.valid_from, day, every)
        ends_after, ends_on = _compare(self.valid_until, day, every)
        shown = (ends_after | ends_on) & ~starts_after
        if not include_deprecated:
            shown &= ~int.from_bytes(_column_bytes(self.deprecated).translate(_NONZERO), "little")
        return shown.to_bytes(count, "little")


_NONZERO = bytes([0] + [1] * 255)  # translate table: any nonzero byte → 1


@cache
def _byte_test(digit: int) -> tuple[bytes, bytes]:
    """Translate tables for one byte value: (1 where a byte is greater, 1 where equal)."""
    return bytes(int(b > digit) for b in range(256)), bytes(int(b == digit) for b in range(256))


def _column_bytes(column: Sequence[int]) -> bytes:
    """A column's little-endian bytes (its memoryview's own, or a swapped copy's)."""
    if isinstance(column, memoryview):
        return column.tobytes()
    copy = array(cast(array, column).typecode, column)
    if sys.byteorder != "little":
        copy.byteswap()
    return copy.tobytes()


def _compare(column: Sequence[int], value: int, every: int) -> tuple[int, int]:
    """Per document, whether its value is greater than ``value`` and whether it is equal, as
    the low bits of the bytes of two integers (see ``DocColumns.visible``)."""
    raw = _column_bytes(column)
    width = len(raw) // max(1, len(column))
    greater, equal = 0, every
    for plane, digit in zip(
        (raw[k::width] for k in reversed(range(width))), value.to_bytes(width, "big"), strict=True
    ):
        above, same = _byte_test(digit)
        greater |= equal & int.from_bytes(plane.translate(above), "little")
        equal &= int.from_bytes(plane.translate(same), "little")
    return greater, equal


def decode_columns(blob: bytes) -> DocColumns:
    """The columns of ``docs.bin``; a wrong magic, length or string table refuses the package."""
    documents, table_bytes, base, typecodes = header_fields(blob, _HEADER, _MAGIC, DOCS_NAME)
    codes = typecodes.decode("ascii", "replace")
    if len(codes) != len(_COLUMNS) or any(code not in _WIDTH for code in codes):
        raise PackageFormatError(f"{DOCS_NAME} has unknown column types {typecodes!r}")
    if codes[0] != codes[1]:
        raise PackageFormatError(f"{DOCS_NAME}: its validity columns differ in width")
    sizes = [4 * (documents + 1)] + [_padded_size(_WIDTH[c] * documents) for c in codes]
    numbers = sum(sizes)
    if len(blob) != _HEADER.size + numbers + table_bytes:
        raise PackageFormatError(f"{DOCS_NAME} is {len(blob)} bytes, its header disagrees")
    view = memoryview(blob)[_HEADER.size : _HEADER.size + numbers]
    first = little_endian_view(view[: sizes[0]], "I")
    columns = []
    at = sizes[0]
    for code, size in zip(codes, sizes[1:], strict=True):
        columns.append(little_endian_view(view[at : at + _WIDTH[code] * documents], code))
        at += size
    try:
        strings = json.loads(bytes(blob[_HEADER.size + numbers :]).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise PackageFormatError(f"{DOCS_NAME}: its string table is malformed: {exc}") from exc
    if (
        not isinstance(strings, list)
        or not strings
        or strings[0] != ""
        or not all(isinstance(s, str) for s in strings)
        or first[0] != 0
        or not all(map(le, first, islice(first, 1, None)))  # C-level: 40 ms → few at 1M
        or any(max(c, default=0) >= len(strings) for c in (columns[2], columns[4], columns[5]))
    ):
        raise PackageFormatError(f"{DOCS_NAME} has inconsistent columns")
    valid_from, valid_until, trust_ids, deprecated, page_ids, tab_ids = columns
    return DocColumns(
        first,
        valid_from,
        valid_until,
        trust_ids,
        deprecated,
        page_ids,
        tab_ids,
        strings,
        base,
        _LARGEST[codes[1]],
    )


def _padded_size(size: int) -> int:
    return size + (-size % 4)
