"""Decoder of a knowledge package into its partitions, and the per-tenant views queries read.

Why verify on load: the blob store may hold a partial upload or a corrupted object; every
artifact is checked against the manifest's sha256 before anything is decoded, so a bad package is
refused as a whole and the previously loaded version keeps serving.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.errors import PackageFormatError
from router.knowledge.model import ALL_TENANTS, Document, Section
from router.package.format.amendments import AMENDMENTS_NAME, Amendments, decode_amendments
from router.package.format.bundle import BUNDLE_NAME, decode_bundle
from router.package.format.doc_columns import DOCS_NAME, DocColumns, decode_columns
from router.package.format.shards import decode_directory
from router.package.format.string_map import StringMap, decode_string_map
from router.package.format.texts import TEXTS_INDEX_NAME, decode_text_index
from router.package.format.vectors import SectionVectors, decode_vectors
from router.package.stores.arena import ShardArena
from router.package.stores.budget import ReaderBudget
from router.package.stores.exact import (
    EXACT_NAME,
    ExactTables,
    PartitionExact,
    decode_exact_directory,
)
from router.package.stores.graph import (
    GRAPH_NAME,
    GraphTables,
    PartitionGraph,
    decode_graph_directory,
)
from router.package.stores.records import (
    RECORDS_INDEX_NAME,
    RECORDS_STEM,
    DocumentRecords,
    RecordCache,
    RowReader,
)
from router.package.stores.shards import ChunkIntoFetcher, PartitionShards, ShardCache
from router.package.stores.texts import (
    ChunkCache,
    ChunkFetcher,
    SectionTexts,
)
from router.package.stores.vocabulary import (
    VOCABULARY_NAME,
    PartitionVocabulary,
    VocabularyChunks,
    decode_vocabulary_directory,
)
from router.package.stores.words import (
    WORDS_NAME,
    PartitionWords,
    WordTables,
    decode_word_directory,
)
from router.package.version.content_names import verify_named
from router.package.version.manifest import VECTORS_NAME, Manifest
from router.package.version.partitions import (
    PARTITION_FILES,
    SHARED_PARTITION,
    PartitionEntry,
    partition_file,
    partition_key,
)
from router.package.view import ExactTarget, PackageView, VersionFacts, ViewPart, compose_view
from router.ports import Allocate, Blob

__all__ = ["Catalog", "ExactTarget", "KnowledgePackage", "Partition", "load_package"]

ArtifactFetcher = Callable[[str], bytes]


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
class Catalog:
    """Every document and section of a package in package-wide numbering (publish, vector
    records, tests): read in full, which a query never does."""

    documents: list[Document]
    sections: list[Section]
    section_doc: list[int]  # global document index of each section


PartitionFetcher = Callable[[list[str]], Awaitable[dict[str, bytes]]]
"""``fetch(names)``: resident files of partitions read after the version was loaded (a tenant's
bundle on its first query), all at once; the bytes are verified against the manifest."""


@dataclass
class KnowledgePackage(VersionFacts):
    """One loaded knowledge version: its partitions, and a view per tenant for queries.

    A package loaded for serving may hold only some partitions (the shared one at least): the
    others are read on the first query that needs them (``ready``), so a cold isolate reads the
    shared partition and its caller's, not every tenant's. It holds at most
    ``budget.tenant_partitions`` tenant partitions, dropping the least recently asked (read
    again, one round trip, by that tenant's next question): an isolate serving a thousand
    tenants must not end up holding all of them."""

    manifest: Manifest
    loaded: list[Partition | None]  # shared first, then tenants by key; None: not read (now)
    byte_size: int = 0  # bytes read into this package so far (grows with every partition read)
    budget: ReaderBudget = field(default_factory=ReaderBudget)
    # reads partitions not held yet: (the partitions, their bytes)
    fetch_later: Callable[[list[int]], Awaitable[tuple[list[Partition], int]]] | None = None
    _views: OrderedDict[str | None, PackageView] = field(default_factory=OrderedDict, repr=False)
    _refused: dict[int, PackageFormatError] = field(default_factory=dict, repr=False)
    # tenant partitions read by ``ready`` (not at load), least recently asked first
    _tenants: OrderedDict[int, None] = field(default_factory=OrderedDict, repr=False)

    @property
    def partitions(self) -> list[Partition]:
        """Every partition (whole-version work: publish, vector records, diagnostics)."""
        if any(p is None for p in self.loaded):
            raise PackageFormatError(
                f"package {self.version} was loaded for serving: not every partition is read"
            )
        return [p for p in self.loaded if p is not None]

    def _view_indices(self, tenant: str | None) -> tuple[str, list[int]]:
        """The view's key and its partitions, ascending in section numbers: the shared one,
        the caller's own, then the deltas amending either (docs/adr/0020)."""
        key = partition_key(tenant) if tenant and tenant != ALL_TENANTS else SHARED_PARTITION
        entries = self.manifest.partitions
        bases = [0] + [i for i, e in enumerate(entries) if i and e.key == key and not e.amends]
        named = {entries[i].key for i in bases}
        deltas = [i for i, e in enumerate(entries) if e.amends in named]
        return key, bases + deltas

    async def ready(self, tenant: str | None) -> None:
        """Read the partitions ``tenant``'s view needs and this package does not hold yet (one
        round trip). A damaged or missing one raises ``PackageFormatError``, then and on every
        later call without reading it again (a stored object does not heal; a new version is
        a new package); a failed read (a store fault) is tried again next time."""
        chosen = self._view_indices(tenant)[1]
        missing = [i for i in chosen if self.loaded[i] is None]
        if not missing:
            self._asked(chosen)
            return
        refused = next((self._refused[i] for i in missing if i in self._refused), None)
        if refused is not None:
            raise refused
        if self.fetch_later is None:
            raise PackageFormatError(f"package {self.version}: partitions {missing} are unread")
        try:
            partitions, size = await self.fetch_later(missing)
        except PackageFormatError as exc:
            self._refused.update(dict.fromkeys(missing, exc))
            raise
        for index, partition in zip(missing, partitions, strict=True):
            self.loaded[index] = partition
        self.byte_size += size
        self._asked(chosen)

    def _asked(self, chosen: list[int]) -> None:
        """Mark the lazily read tenant partitions of a view as just asked for, and drop the
        least recently asked ones past the budget (with their composed views)."""
        for index in chosen:
            if self.fetch_later is not None and self._is_tenants(index):  # can be read again
                self._tenants[index] = None
                self._tenants.move_to_end(index)
        while len(self._tenants) > max(1, self.budget.tenant_partitions):
            index = next(iter(self._tenants))
            del self._tenants[index]
            self.loaded[index] = None
            self._views.pop(self.manifest.partitions[index].key, None)

    def _is_tenants(self, index: int) -> bool:
        """Whether partition ``index`` holds one tenant's documents (a base or its delta)."""
        return self.manifest.partitions[index].tenant != ALL_TENANTS

    def view(self, tenant: str | None) -> PackageView:
        """What ``tenant`` sees: the shared partition and its own (only the shared one for an
        anonymous caller or a tenant without documents); composed once, kept in a small LRU.
        Its partitions must have been read (``ready``)."""
        key, chosen = self._view_indices(tenant)
        found = self._views.get(key)
        if found is not None:
            self._views.move_to_end(key)
            return found
        parts = self._parts(chosen)
        shared = self.view(None) if any(self._is_tenants(i) for i in chosen) else None
        view = self._views[key] = compose_view(self.manifest, parts, shared, self.budget)
        while len(self._views) > max(1, self.budget.views):
            self._views.popitem(last=False)
        return view

    def _parts(self, chosen: list[int]) -> tuple[ViewPart, ...]:
        """The view's parts: documents numbered one after another in view order, sections as
        their partitions number them, package-wide numbers in manifest order."""
        parts = []
        first_doc = 0
        for index in chosen:
            partition = self.loaded[index]
            if partition is None:
                raise PackageFormatError(f"package {self.version}: partition {index} is unread")
            first_global = sum(e.sections for e in self.manifest.partitions[:index])
            parts.append(ViewPart(partition, first_doc, first_global))
            first_doc += partition.doc_count
        return tuple(parts)

    # -- the whole version (publish, vector records, diagnostics), in global numbering ---------

    @property
    def document_count(self) -> int:
        return sum(e.documents for e in self.manifest.partitions)

    @property
    def section_count(self) -> int:
        return sum(e.sections for e in self.manifest.partitions)

    async def read_catalog(self) -> Catalog:
        """Every record of every partition, fetched and decoded."""
        documents: list[Document] = []
        section_doc: list[int] = []
        for partition in self.partitions:
            for doc in await partition.records.read_all():
                section_doc += [len(documents)] * len(doc.sections)
                documents.append(doc)
        sections = [section for doc in documents for section in doc.sections]
        return Catalog(documents, sections, section_doc)

    @property
    def has_vectors(self) -> bool:
        """Whether every partition's section vectors were read (embedded and not left unread)."""
        return all(p is not None and p.vectors is not None for p in self.loaded)

    @property
    def vector_dimensions(self) -> int:
        return int((self.manifest.embedding or {}).get("dimensions", 0))


@dataclass(frozen=True)
class _Shared:
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


def load_package(
    manifest_blob: bytes,
    fetch: ArtifactFetcher,
    *,
    with_vectors: bool = True,
    fetch_chunk: ChunkFetcher | None = None,
    budget: ReaderBudget | None = None,
    read_rows: RowReader | None = None,
    only: Sequence[int] | None = None,
    fetch_partitions: PartitionFetcher | None = None,
    fetch_chunk_into: ChunkIntoFetcher | None = None,
) -> KnowledgePackage:
    """Verify and decode a package; ``fetch(name)`` returns an artifact's bytes.

    Every partition is verified and decoded here, so a damaged one refuses the whole version
    (the previous one keeps serving) — unless ``only`` names the partitions to read now (the
    shared one first): the others are read by ``fetch_partitions`` when a query needs them
    (``KnowledgePackage.ready``), verified then. ``with_vectors=False`` leaves ``vectors.bin``
    unread: a server whose vector index is remote (Vectorize) never needs the section vectors
    in memory.
    Section texts and posting shards are never read here: a query fetches the chunks it quotes
    and the shards of its terms, with ``fetch_chunk`` (async; e.g. an R2 read) or else with
    ``fetch``, verified on arrival. ``read_rows`` (D1's ``knowledge_records``) serves the
    document records a response needs in one query; rows it lacks come from the chunks.
    ``budget`` bounds what the package's caches keep between queries. ``fetch_chunk_into``
    (R2 in the Worker) copies a large posting shard into the package's shard arena
    (``router.package.stores.arena``) instead of returning new ``bytes``.
    """
    manifest = Manifest.from_bytes(manifest_blob)
    indices = range(len(manifest.partitions)) if only is None else only
    blobs = {
        name: manifest.verify(name, fetch(name))
        for name in _resident_files(manifest, indices, with_vectors)
    }
    read_chunk = _chunk_reader(manifest, fetch, fetch_chunk)
    budget = budget or ReaderBudget()
    arena = ShardArena(budget.arena_bytes, budget.arena_min_shard_bytes)
    shared = _Shared(
        ShardCache(budget.shard_bytes, arena),
        ChunkCache(budget.chunk_bytes),
        RecordCache(budget.records),
        ExactTables(budget.exact_tables),
        VocabularyChunks(budget.vocabulary_chunks),
        GraphTables(budget.graph_chunks),
        WordTables(budget.word_chunks),
        read_rows,
        _chunk_into_reader(fetch_chunk_into),
    )
    loaded: list[Partition | None] = [None] * len(manifest.partitions)
    for index in indices:
        entry = manifest.partitions[index]
        loaded[index] = _decode_partition(manifest, entry, blobs, read_chunk, shared)

    async def fetch_later(later: list[int]) -> tuple[list[Partition], int]:
        assert fetch_partitions is not None
        names = _resident_files(manifest, later, with_vectors)
        fetched = await fetch_partitions(names)
        verified = {name: manifest.verify(name, fetched[name]) for name in names}
        decoded = [
            _decode_partition(manifest, manifest.partitions[i], verified, read_chunk, shared)
            for i in later
        ]
        return decoded, sum(len(blob) for blob in verified.values())

    return KnowledgePackage(
        manifest=manifest,
        loaded=loaded,
        byte_size=sum(len(b) for b in blobs.values()) + len(manifest_blob),
        budget=budget,
        fetch_later=fetch_later if fetch_partitions is not None else None,
    )


def _resident_files(manifest: Manifest, indices: Iterable[int], with_vectors: bool) -> list[str]:
    """The resident files of the partitions at ``indices`` (bundles, and vectors if wanted)."""
    keys = {manifest.partitions[i].key for i in indices}
    return manifest.names_to_read(with_vectors=with_vectors, partitions=keys)


def _decode_partition(
    manifest: Manifest,
    entry: PartitionEntry,
    blobs: dict[str, bytes],
    read_chunk: ChunkFetcher,
    shared: _Shared,
) -> Partition:
    """One partition's files, checked against each other and against the manifest."""

    bundle_name = partition_file(entry.key, BUNDLE_NAME)
    files = decode_bundle(blobs[bundle_name], bundle_name)
    missing = [name for name in PARTITION_FILES if name not in files]
    if missing:
        raise PackageFormatError(f"{bundle_name} has no {', '.join(missing)}")

    def blob(name: str) -> bytes:
        return files[name]

    try:
        raw = bytes(blob("synonyms.json"))
        synonyms = [[str(term) for term in group] for group in json.loads(raw)]
    except (ValueError, TypeError, AttributeError) as exc:
        raise PackageFormatError(f"partition {entry.key}: JSON is malformed: {exc}") from exc
    lexicon = decode_string_map(blob("lexicon.bin"), f"{entry.key}.lexicon.bin")
    words = decode_word_directory(blob(WORDS_NAME), f"{entry.key}.{WORDS_NAME}")
    terms = decode_vocabulary_directory(blob(VOCABULARY_NAME), f"{entry.key}.{VOCABULARY_NAME}")
    directory = decode_directory(blob("postings.bin"))
    exact_directory = decode_exact_directory(blob(EXACT_NAME))
    columns = decode_columns(blob(DOCS_NAME))
    sections = columns.sections
    if (
        sections != entry.sections
        or columns.documents != entry.documents
        or directory.sections != entry.first_section + sections
        or directory.terms != terms.terms
    ):
        raise PackageFormatError(f"partition {entry.key}: postings do not match its documents")
    vectors_name = partition_file(entry.key, VECTORS_NAME)
    vectors = decode_vectors(blobs[vectors_name]) if vectors_name in blobs else None
    if vectors is not None and (
        vectors.count != sections
        or manifest.embedding is None
        or vectors.dimensions != int(manifest.embedding.get("dimensions", -1))
    ):
        raise PackageFormatError(f"partition {entry.key}: vectors do not match its sections")
    amendments = None
    if entry.amends is not None:
        if AMENDMENTS_NAME not in files:
            raise PackageFormatError(f"delta partition {entry.key} has no {AMENDMENTS_NAME}")
        amendments = decode_amendments(blob(AMENDMENTS_NAME), f"{entry.key}.{AMENDMENTS_NAME}")
    text_index = decode_text_index(blob(TEXTS_INDEX_NAME))
    record_index = decode_text_index(blob(RECORDS_INDEX_NAME), RECORDS_STEM)
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
        exact=PartitionExact(entry.key, exact_directory, read_chunk, shared.exact),
        graph=PartitionGraph(
            entry.key,
            decode_graph_directory(blob(GRAPH_NAME), f"{entry.key}.{GRAPH_NAME}"),
            read_chunk,
            shared.graph,
        ),
        lexicon=lexicon,
        words=PartitionWords(entry.key, words, read_chunk, shared.words),
        texts=SectionTexts(text_index, read_own_chunk, cache=shared.chunks, owner=entry.key),
        synonyms=synonyms,
        vectors=vectors,
        amendments=amendments,
    )


def _chunk_into_reader(fetch_into: ChunkIntoFetcher | None) -> ChunkIntoFetcher | None:
    """``fetch_into``, each file checked against the content digest in its name."""
    if fetch_into is None:
        return None

    async def read(name: str, allocate: Allocate) -> Blob:
        blob = await fetch_into(name, allocate)
        if isinstance(blob, memoryview):
            return verify_named(name, blob)
        return verify_named(name, blob)

    return read


def _chunk_reader(
    manifest: Manifest, fetch: ArtifactFetcher, fetch_chunk: ChunkFetcher | None
) -> ChunkFetcher:
    """Reads one lazily read file (shard, exact-key, text or record chunk) and checks it against
    the content digest in its name before anyone uses it
    (``router.package.version.content_names``)."""

    async def read(name: str) -> bytes:
        blob = await fetch_chunk(name) if fetch_chunk is not None else fetch(name)
        return verify_named(name, blob)

    return read
