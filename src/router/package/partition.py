"""One decoded partition of a package, and how its resident files are decoded and checked.

Why a module of its own: the per-tenant view (``package.view``) reads partitions and the package
reader (``package.reader``) makes them; with the type in the reader, the view imported the reader
and the reader the view (an import circle). Index format 3: docs/adr/0010, docs/index-format.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from router.errors import PackageFormatError
from router.package.format.amendments import AMENDMENTS_NAME, Amendments, decode_amendments
from router.package.format.bundle import BUNDLE_NAME, decode_bundle
from router.package.format.doc_columns import DOCS_NAME, DocColumns, decode_columns
from router.package.format.exact import EXACT_NAME, decode_exact_directory
from router.package.format.graph import GRAPH_NAME, decode_graph_directory
from router.package.format.records import RECORDS_INDEX_NAME, RECORDS_STEM
from router.package.format.shards import decode_directory
from router.package.format.string_map import StringMap, decode_string_map
from router.package.format.texts import TEXTS_INDEX_NAME, decode_text_index
from router.package.format.vectors import SectionVectors, decode_vectors
from router.package.format.vocabulary import VOCABULARY_NAME, decode_vocabulary_directory
from router.package.format.words import WORDS_NAME, decode_word_directory
from router.package.stores.exact import ExactTables, PartitionExact
from router.package.stores.graph import GraphTables, PartitionGraph
from router.package.stores.records import DocumentRecords, RecordCache, RowReader
from router.package.stores.shards import ChunkIntoFetcher, PartitionShards, ShardCache
from router.package.stores.texts import (
    ChunkCache,
    ChunkFetcher,
    SectionTexts,
)
from router.package.stores.vocabulary import PartitionVocabulary, VocabularyChunks
from router.package.stores.words import PartitionWords, WordTables
from router.package.version.manifest import VECTORS_NAME, Manifest
from router.package.version.partitions import (
    PARTITION_FILES,
    PartitionEntry,
    partition_file,
)

__all__ = ["Partition", "SharedCaches", "decode_partition"]


@dataclass
class Partition:
    """One decoded partition: its document columns, terms, lookup tables, and the stores of its
    records, texts and posting shards (read per query)."""

    entry: PartitionEntry
    columns: DocColumns  # per document: first section, validity, trust, deprecation, scope
    records: DocumentRecords  # documents and their sections' headings, links, flags (lazy)
    vocabulary: PartitionVocabulary  # terms, their df and keyword phrases: directory (lazy)
    postings: PartitionShards  # the resident directory; shards read per query
    exact: PartitionExact  # exact keys (ids, titles, aliases, facts, section ids): directory
    graph: PartitionGraph  # edges that start or end in this partition: directory (lazy)
    lexicon: StringMap  # accent-free word → stem of its accented spelling
    words: PartitionWords  # typo repair: corpus words and sound keys: directory (lazy)
    texts: SectionTexts
    synonyms: list[list[str]]
    vectors: SectionVectors | None = None
    amendments: Amendments | None = None  # a delta partition: what it hides and redirects
    derived: dict[str, Any] = field(default_factory=dict)  # per-partition layers of indexes

    @property
    def key(self) -> str:
        return self.entry.key

    @property
    def first_section(self) -> int:
        return self.entry.first_section

    @property
    def doc_count(self) -> int:
        return self.columns.documents

    @property
    def section_count(self) -> int:
        return self.columns.sections


@dataclass(frozen=True)
class SharedCaches:
    """What the partitions of one package share: the isolate's caches (one budget each, however
    many tenants the package has) and the row store records are read from first."""

    shards: ShardCache
    chunks: ChunkCache
    records: RecordCache
    exact: ExactTables
    vocabulary: VocabularyChunks
    graph: GraphTables
    words: WordTables
    rows: RowReader | None
    shards_into: ChunkIntoFetcher | None  # reads a large shard into the arena


def decode_partition(
    manifest: Manifest,
    entry: PartitionEntry,
    blobs: dict[str, bytes],
    read_chunk: ChunkFetcher,
    shared: SharedCaches,
) -> Partition:
    """One partition's files, checked against each other and against the manifest."""
    files = _bundle_files(entry, blobs)
    directory = decode_directory(files["postings.bin"])
    terms = decode_vocabulary_directory(files[VOCABULARY_NAME], f"{entry.key}.{VOCABULARY_NAME}")
    columns = decode_columns(files[DOCS_NAME])
    sections = columns.sections
    if (
        sections != entry.sections
        or columns.documents != entry.documents
        or directory.sections != entry.first_section + sections
        or directory.terms != terms.terms
    ):
        raise PackageFormatError(f"partition {entry.key}: postings do not match its documents")
    text_index = decode_text_index(files[TEXTS_INDEX_NAME])
    record_index = decode_text_index(files[RECORDS_INDEX_NAME], RECORDS_STEM)
    if text_index.sections != sections or record_index.sections != columns.documents:
        raise PackageFormatError(f"partition {entry.key}: texts or records do not match")

    async def read_own_chunk(name: str) -> bytes:
        return await read_chunk(partition_file(entry.key, name))

    return Partition(
        entry=entry,
        columns=columns,
        records=DocumentRecords(
            record_index, read_own_chunk, entry.key, shared.chunks, shared.records, shared.rows
        ),
        vocabulary=PartitionVocabulary(entry.key, terms, read_chunk, shared.vocabulary),
        postings=PartitionShards(
            entry.key, directory, read_chunk, shared.shards, shared.shards_into
        ),
        exact=PartitionExact(
            entry.key, decode_exact_directory(files[EXACT_NAME]), read_chunk, shared.exact
        ),
        graph=PartitionGraph(
            entry.key,
            decode_graph_directory(files[GRAPH_NAME], f"{entry.key}.{GRAPH_NAME}"),
            read_chunk,
            shared.graph,
        ),
        lexicon=decode_string_map(files["lexicon.bin"], f"{entry.key}.lexicon.bin"),
        words=PartitionWords(
            entry.key,
            decode_word_directory(files[WORDS_NAME], f"{entry.key}.{WORDS_NAME}"),
            read_chunk,
            shared.words,
        ),
        texts=SectionTexts(text_index, read_own_chunk, cache=shared.chunks, owner=entry.key),
        synonyms=_synonyms(entry, files["synonyms.json"]),
        vectors=_vectors(manifest, entry, blobs, sections),
        amendments=_amendments(entry, files),
    )


def _bundle_files(entry: PartitionEntry, blobs: dict[str, bytes]) -> dict[str, bytes]:
    """The resident files in the partition's bundle; one missing refuses the package."""
    bundle_name = partition_file(entry.key, BUNDLE_NAME)
    files = decode_bundle(blobs[bundle_name], bundle_name)
    missing = [name for name in PARTITION_FILES if name not in files]
    if missing:
        raise PackageFormatError(f"{bundle_name} has no {', '.join(missing)}")
    return files


def _synonyms(entry: PartitionEntry, blob: bytes) -> list[list[str]]:
    try:
        return [[str(term) for term in group] for group in json.loads(bytes(blob))]
    except (ValueError, TypeError, AttributeError) as exc:
        raise PackageFormatError(f"partition {entry.key}: JSON is malformed: {exc}") from exc


def _vectors(
    manifest: Manifest, entry: PartitionEntry, blobs: dict[str, bytes], sections: int
) -> SectionVectors | None:
    """The partition's section vectors when they were read; they must match the manifest's
    embedding and the partition's sections."""
    vectors_name = partition_file(entry.key, VECTORS_NAME)
    vectors = decode_vectors(blobs[vectors_name]) if vectors_name in blobs else None
    if vectors is not None and (
        vectors.count != sections
        or manifest.embedding is None
        or vectors.dimensions != int(manifest.embedding.get("dimensions", -1))
    ):
        raise PackageFormatError(f"partition {entry.key}: vectors do not match its sections")
    return vectors


def _amendments(entry: PartitionEntry, files: dict[str, bytes]) -> Amendments | None:
    """What a delta partition hides and redirects in its base (None for a full partition)."""
    if entry.amends is None:
        return None
    if AMENDMENTS_NAME not in files:
        raise PackageFormatError(f"delta partition {entry.key} has no {AMENDMENTS_NAME}")
    return decode_amendments(files[AMENDMENTS_NAME], f"{entry.key}.{AMENDMENTS_NAME}")
