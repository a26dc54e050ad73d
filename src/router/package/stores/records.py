"""Document records: what a response shows of a document and its sections, read per query.

Why not resident (index format 3, docs/adr/0010 §3): a document's title, path, facts, metadata
and its sections' ids, headings, links and flags are needed only for the handful of documents a
response shows, cites or names in its trace, yet decoded for a whole knowledge base they were
most of the isolate's heap. So each document is one JSON record, packed in document order into
chunk files of about 4 KiB with the layout of the section texts (``records.bin`` + ``records-
<c>.bin``, ``router.package.format.texts``), and a query fetches the chunks of the documents it
needs —
concurrently, one round trip — verified against the manifest. The isolate keeps the records it
decoded recently in a small LRU (``ReaderBudget.records``); a query holds its own records for as
long as it runs, so another query's reads never evict them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any

from router.errors import PackageFormatError, RouterError
from router.knowledge.model import Document, Link, Section
from router.lru import LruCache
from router.package.format.bundle import BUNDLE_NAME, decode_bundle
from router.package.format.texts import TextIndex, decode_text_index, encode_texts
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkCache, ChunkFetcher, SectionTexts
from router.package.version.partitions import partition_file

__all__ = [
    "RECORDS_INDEX_NAME",
    "RECORDS_STEM",
    "RECORD_CHUNK_BYTES",
    "DocumentRecords",
    "RecordCache",
    "RowReader",
    "decode_record",
    "encode_records",
    "record_of",
    "records_in_files",
]

log = logging.getLogger(__name__)

RowReader = Callable[[str, list[int]], Awaitable[dict[int, str]]]
"""``read(partition, docs)``: record texts by partition-local document, from a row store (D1's
``knowledge_records``); the rows it lacks are read from the chunks."""

RECORDS_STEM = "records"
RECORDS_INDEX_NAME = f"{RECORDS_STEM}.bin"
RECORD_CHUNK_BYTES = 4 * 1024
"""Target size of a record chunk: a response needs a few dozen records scattered over the
knowledge base, about one chunk each, so small chunks keep its bytes low (≈ 4 KiB a record
read instead of 16) at the same number of reads."""


def record_of(doc: Document, flags: Sequence[Sequence[str]], metadata: Any) -> dict[str, Any]:
    """The record of one document: its fields and its sections' (not their texts);
    ``flags[i]`` are the flags of its section ``i``, ``metadata`` its JSON-safe metadata."""
    return {
        "id": doc.semantic_id,
        "title": doc.title,
        "path": doc.path,
        "description": doc.description,
        "keywords": doc.keywords,
        "aliases": doc.aliases,
        "tenant": doc.tenant,
        "trust": doc.trust,
        "status": doc.status,
        "version": doc.version,
        "created_at": doc.created_at,
        "updated_at": doc.updated_at,
        "valid_from": doc.valid_from,
        "valid_until": doc.valid_until,
        "scope": doc.scope,
        "facts": doc.facts,
        "metadata": metadata,
        "flags": doc.flags,
        "sections": [
            {
                "id": section.section_id,
                "heading": section.heading,
                "level": section.level,
                "line": section.line,
                "explicit": section.explicit_id,
                "links": [[link.target, link.label] for link in section.links],
                "flags": list(section_flags),
            }
            for section, section_flags in zip(doc.sections, flags, strict=True)
        ],
    }


def encode_records(records: Iterable[Mapping[str, Any]]) -> dict[str, bytes]:
    """``records.bin`` and its chunk files, one canonical JSON item per document (sorted keys,
    so equal content gives equal bytes), in order."""
    items = [
        json.dumps(r, ensure_ascii=False, sort_keys=True, separators=(",", ":")) for r in records
    ]
    return encode_texts(items, RECORD_CHUNK_BYTES, RECORDS_STEM)


def decode_record(item: str) -> Document:
    """A ``Document`` (section texts empty: they are read apart) from its record."""
    try:
        data = json.loads(item)
        sections = [
            Section(
                section_id=s["id"],
                heading=s["heading"],
                level=s["level"],
                text="",
                line=s["line"],
                explicit_id=s["explicit"],
                links=[Link(s["id"], target, label, s["line"]) for target, label in s["links"]],
                flags=list(s["flags"]),
            )
            for s in data["sections"]
        ]
        return Document(
            semantic_id=data["id"],
            title=data["title"],
            path=data["path"],
            description=data["description"],
            keywords=data["keywords"],
            aliases=data["aliases"],
            tenant=data["tenant"],
            trust=data["trust"],
            status=data["status"],
            version=data["version"],
            created_at=data["created_at"],
            updated_at=data["updated_at"],
            valid_from=data["valid_from"],
            valid_until=data["valid_until"],
            scope=data["scope"],
            facts=data["facts"],
            metadata=data["metadata"],
            sections=sections,
            flags=list(data.get("flags", [])),  # packages before issue 12 have none
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise PackageFormatError(f"a document record is malformed: {exc!r}") from exc


def records_in_files(files: Mapping[str, bytes], partition: str) -> list[str]:
    """Every record of one partition, as its JSON text, from a package's files (publish)."""
    bundle_name = partition_file(partition, BUNDLE_NAME)
    resident = decode_bundle(files[bundle_name], bundle_name)
    index = decode_text_index(resident[RECORDS_INDEX_NAME], RECORDS_STEM)
    records = []
    for chunk, name in enumerate(index.chunk_names()):
        try:
            records += index.chunk_texts(chunk, files[partition_file(partition, name)])
        except UnicodeDecodeError as exc:
            raise PackageFormatError(f"{partition}: a record of {name} is malformed") from exc
    return records


RecordCache = LruCache[tuple[str, int], Document]
"""Decoded documents of one package (every partition), by (partition, document)."""


class DocumentRecords:
    """One partition's document index → ``Document``, for the documents asked for, through the
    package's chunk cache and its cache of decoded documents."""

    def __init__(
        self,
        index: TextIndex,
        fetch: ChunkFetcher,
        owner: str,
        chunks: ChunkCache,
        decoded: RecordCache,
        rows: RowReader | None = None,
    ) -> None:
        self.index = index
        self._fetch = fetch
        self._owner = owner
        self._chunks = SectionTexts(index, fetch, cache=chunks, owner=owner)
        self._decoded = decoded
        self._rows = rows

    async def read_all(self) -> list[Document]:
        """Every document, its chunks read one after the other and not cached (publish and
        diagnostics read a whole version; a query never does)."""
        documents = []
        for chunk, name in enumerate(self.index.chunk_names()):
            items = self.index.chunk_texts(chunk, await self._fetch(name))
            documents += [decode_record(item) for item in items]
        return documents

    async def load(self, docs: Iterable[int]) -> tuple[dict[int, Document], ReadCost]:
        """The documents ``docs`` (partition-local indices) and what reading them cost."""
        wanted = sorted(set(docs))
        found: dict[int, Document] = {}
        for doc in wanted:
            held = self._decoded.get((self._owner, doc))
            if held is not None:
                found[doc] = held
        missing = [d for d in wanted if d not in found]
        if not missing:
            return found, ReadCost(len(wanted), 0, 0, 0)
        from_rows, row_bytes = await self._read_rows(missing)
        found.update(from_rows)
        missing = [d for d in missing if d not in from_rows]
        cost = ReadCost(0, 0, 0, 0)
        if missing:  # no row store, or it failed or lacked rows: the verified chunks
            items, cost = await self._chunks.load(missing)
            found.update((doc, decode_record(item)) for doc, item in items.items())
        for doc in from_rows.keys() | set(missing):
            self._decoded.put((self._owner, doc), found[doc])
        return found, ReadCost(
            len(wanted),
            cost.chunks_fetched,
            cost.bytes_fetched + row_bytes,
            cost.round_trips + (1 if self._rows is not None else 0),
        )

    async def _read_rows(self, docs: list[int]) -> tuple[dict[int, Document], int]:
        """The documents the row store gives (none without one); a failed read or a malformed
        row is logged and left to the chunks."""
        if self._rows is None:
            return {}, 0
        try:
            rows = await self._rows(self._owner, docs)
        except RouterError as exc:
            log.warning("record rows of %s unreadable, reading chunks: %s", self._owner, exc)
            return {}, 0
        found: dict[int, Document] = {}
        for doc in docs:
            item = rows.get(doc)
            if item is None:
                continue
            try:
                found[doc] = decode_record(item)
            except PackageFormatError as exc:
                log.warning("record %s/%d malformed, reading its chunk: %s", self._owner, doc, exc)
        return found, sum(len(rows[d].encode("utf-8")) for d in found)
