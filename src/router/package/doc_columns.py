"""Encoder and decoder of ``docs.bin``: the per-document columns every query reads resident.

Why columns (index format 3, docs/adr/0010 §4): the filters (validity window, deprecation), the
trust ordering, the UI scope of deictic questions and the section → document map run on every
query and over every document, before anything is ranked; as decoded ``Document`` objects they
were most of the resident set (≈ 160 MiB at 100k sections). As columns they are 28 bytes a
document, read in place; the rest of a document (title, facts, sections' headings and links) is
its record (``router.package.records``), fetched only for the documents a response shows.

Layout, little-endian, D documents of one partition:

    magic    b"KRDOCS01"            8 bytes
    header   uint32 D, uint32 S     8 bytes (S: the JSON string table's byte length)
    first    uint32[D + 1]          partition-local first section of each document; first[D] =
                                    the partition's section count (a document's sections are
                                    contiguous)
    from     uint32[D]              validFrom as a proleptic Gregorian ordinal, 0 = open
    until    uint32[D]              validUntil likewise, 0xFFFFFFFF = open
    trust    uint32[D]              index of its trust level in the string table
    deprec   uint32[D]              1 when deprecated (trust or status), else 0
    page     uint32[D]              index of its folded ``scope.page`` ("" = none)
    tab      uint32[D]              index of its folded ``scope.tab`` ("" = none)
    strings  UTF-8 JSON list        the string table; strings[0] = ""
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from router.analysis.text import fold
from router.errors import PackageFormatError
from router.knowledge.model import Document
from router.package.arrays import header_fields, little_endian_bytes, little_endian_view

__all__ = ["DOCS_NAME", "DocColumns", "day_number", "decode_columns", "encode_columns"]

DOCS_NAME = "docs.bin"
OPEN_FROM = 0
OPEN_UNTIL = 0xFFFFFFFF

_MAGIC = b"KRDOCS01"
_HEADER = struct.Struct("<8sII")
_COLUMNS = ("from", "until", "trust", "deprecated", "page", "tab")


def day_number(day: str) -> int:
    """An ISO date as the ordinal ``docs.bin`` stores (comparisons keep their order)."""
    return dt.date.fromisoformat(day[:10]).toordinal()


def encode_columns(documents: Sequence[Document]) -> bytes:
    """``docs.bin`` of one partition's documents, in order."""
    strings: dict[str, int] = {"": 0}

    def string(value: str) -> int:
        return strings.setdefault(value, len(strings))

    first = [0]
    columns: dict[str, list[int]] = {name: [] for name in _COLUMNS}
    for doc in documents:
        first.append(first[-1] + len(doc.sections))
        columns["from"].append(day_number(doc.valid_from) if doc.valid_from else OPEN_FROM)
        columns["until"].append(day_number(doc.valid_until) if doc.valid_until else OPEN_UNTIL)
        columns["trust"].append(string(doc.trust))
        columns["deprecated"].append(int(doc.deprecated))
        columns["page"].append(string(fold(doc.scope.get("page", ""))))
        columns["tab"].append(string(fold(doc.scope.get("tab", ""))))
    table = json.dumps(list(strings), ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    numbers = first + [v for name in _COLUMNS for v in columns[name]]
    header = _HEADER.pack(_MAGIC, len(documents), len(table))
    return header + little_endian_bytes("I", numbers) + table


@dataclass(frozen=True)
class DocColumns:
    """The columns of one partition's documents, read in place from ``docs.bin``."""

    first: Sequence[int]  # D + 1 entries
    valid_from: Sequence[int]
    valid_until: Sequence[int]
    trust_ids: Sequence[int]
    deprecated: Sequence[int]
    page_ids: Sequence[int]
    tab_ids: Sequence[int]
    strings: list[str]

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

    def visible(self, day: int, include_deprecated: bool) -> Iterator[bool]:
        """Whether each document may be shown on ``day`` (validity bounds inclusive)."""
        for start, end, deprecated in zip(
            self.valid_from, self.valid_until, self.deprecated, strict=True
        ):
            yield start <= day <= end and (include_deprecated or not deprecated)


def decode_columns(blob: bytes) -> DocColumns:
    """The columns of ``docs.bin``; a wrong magic, length or string table refuses the package."""
    documents, table_bytes = header_fields(blob, _HEADER, _MAGIC, DOCS_NAME)
    numbers = 4 * (documents + 1 + len(_COLUMNS) * documents)
    if len(blob) != _HEADER.size + numbers + table_bytes:
        raise PackageFormatError(f"{DOCS_NAME} is {len(blob)} bytes, its header disagrees")
    view = memoryview(blob)[_HEADER.size : _HEADER.size + numbers]
    first = little_endian_view(view[: 4 * (documents + 1)], "I")
    rest = view[4 * (documents + 1) :]
    columns = [
        little_endian_view(rest[4 * documents * i : 4 * documents * (i + 1)], "I")
        for i in range(len(_COLUMNS))
    ]
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
        or any(a > b for a, b in pairwise(first))
        or any(max(c, default=0) >= len(strings) for c in (columns[2], columns[4], columns[5]))
    ):
        raise PackageFormatError(f"{DOCS_NAME} has inconsistent columns")
    valid_from, valid_until, trust_ids, deprecated, page_ids, tab_ids = columns
    return DocColumns(
        first, valid_from, valid_until, trust_ids, deprecated, page_ids, tab_ids, strings
    )
