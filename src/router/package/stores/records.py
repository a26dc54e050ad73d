"""Document records: what a response shows of a document and its sections, read per query.

Why not resident (index format 3, docs/adr/0010 §3): a document's title, path, facts, metadata
and its sections' ids, headings, links and flags are needed only for the handful of documents a
response shows, cites or names in its trace, yet decoded for a whole knowledge base they were
most of the isolate's heap. So each document is one JSON record, packed in document order into
chunk files of about 4 KiB (``router.package.format.records``), and a query fetches the chunks
of the documents it needs — concurrently, one round trip — verified against the manifest. The
isolate keeps the records it read recently (``RecordCache``: the most recent decoded, more of
them as their JSON); a query holds its own records for as long as it runs, so another query's
reads never evict them.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from router.errors import PackageFormatError, RouterError
from router.knowledge.model import Document
from router.lru import LruCache
from router.package.format.records import decode_record
from router.package.format.texts import TextIndex
from router.package.stores.cost import ReadCost
from router.package.stores.texts import ChunkCache, ChunkFetcher, SectionTexts

__all__ = [
    "DECODED_PER_BYTE",
    "TEXT_OVERHEAD",
    "DocumentRecords",
    "RecordCache",
    "RowReader",
]

log = logging.getLogger(__name__)

RowReader = Callable[[str, list[int]], Awaitable[dict[int, str]]]
"""``read(partition, docs)``: record texts by partition-local document, from a row store (D1's
``knowledge_records``); the rows it lacks are read from the chunks."""


DECODED_PER_BYTE = 2.6
"""Bytes a decoded ``Document`` holds per byte of its JSON record, in the Worker (3,000 records
of the 100k bench corpus, Pyodide 314, tracemalloc: 2.56; CPython's 64-bit objects take 4.8)."""
TEXT_OVERHEAD = 64
"""Bytes a record's JSON held as a ``str`` takes beyond its characters (the object's header)."""

RecordKey = tuple[str, int]  # (partition, partition-local document)


class RecordCache:
    """The records of one package (every partition) the isolate keeps between queries: the most
    recently used decoded (``decoded``, each weighing ``DECODED_PER_BYTE`` times its JSON), and
    more of them as their JSON (``texts``, their bytes). Why two: a decoded record takes 2.6
    times its JSON in the Worker, so the same bytes hold 2.6 times as many records as text, and
    decoding one again (≈ 0.1 ms in CPython) costs far less than reading it again (a round
    trip to D1 or R2)."""

    def __init__(self, decoded_bytes: int, texts: LruCache[Any, Any] | None = None) -> None:
        self.decoded: LruCache[RecordKey, Document] = LruCache(decoded_bytes)
        # the package's tables' LRU (``ReaderBudget.table_bytes``), or one of its own
        self.texts: LruCache[Any, Any] = texts if texts is not None else LruCache(decoded_bytes)

    def get(self, key: RecordKey) -> Document | None:
        """The record, decoded (again, from its JSON, when only that is held), or None."""
        found = self.decoded.get(key)
        if found is not None:
            return found
        text = self.texts.get(("record", *key))
        if text is None:
            return None
        found = decode_record(text)  # verified and decoded once already: it decodes again
        self.decoded.put(key, found, int(len(text) * DECODED_PER_BYTE))
        return found

    def put(self, key: RecordKey, record: Document, text: str) -> None:
        """Keep a record just read, decoded and as its JSON ``text``."""
        self.texts.put(("record", *key), text, len(text) + TEXT_OVERHEAD)
        self.decoded.put(key, record, int(len(text) * DECODED_PER_BYTE))

    def resize(self, decoded_bytes: int) -> None:
        """A new bound of the decoded records (their JSON is bounded by the tables' LRU)."""
        self.decoded.resize(decoded_bytes)


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
        from_rows, texts = await self._read_rows(missing)
        found.update(from_rows)
        row_bytes = sum(len(texts[d].encode("utf-8")) for d in from_rows)
        missing = [d for d in missing if d not in from_rows]
        cost = ReadCost(0, 0, 0, 0)
        if missing:  # no row store, or it failed or lacked rows: the verified chunks
            items, cost = await self._chunks.load(missing)
            found.update((doc, decode_record(item)) for doc, item in items.items())
            texts.update(items)
        for doc in from_rows.keys() | set(missing):
            self._decoded.put((self._owner, doc), found[doc], texts[doc])
        return found, ReadCost(
            len(wanted),
            cost.chunks_fetched,
            cost.bytes_fetched + row_bytes,
            cost.round_trips + (1 if self._rows is not None else 0),
        )

    async def _read_rows(self, docs: list[int]) -> tuple[dict[int, Document], dict[int, str]]:
        """The documents the row store gives (none without one) and each one's row (its JSON);
        a failed read or a malformed row is logged and left to the chunks."""
        if self._rows is None:
            return {}, {}
        try:
            rows = await self._rows(self._owner, docs)
        except RouterError as exc:
            log.warning("record rows of %s unreadable, reading chunks: %s", self._owner, exc)
            return {}, {}
        found: dict[int, Document] = {}
        for doc in docs:
            item = rows.get(doc)
            if item is None:
                continue
            try:
                found[doc] = decode_record(item)
            except PackageFormatError as exc:
                log.warning("record %s/%d malformed, reading its chunk: %s", self._owner, doc, exc)
        return found, {d: rows[d] for d in found}
