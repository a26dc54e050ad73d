"""Decoder of a knowledge package into its partitions, and the per-tenant views queries read.

Why verify on load: the blob store may hold a partial upload or a corrupted object; every
artifact is checked against the manifest's sha256 before anything is decoded, so a bad package is
refused as a whole and the previously loaded version keeps serving.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from router.errors import PackageFormatError
from router.knowledge.model import ALL_TENANTS, Document, Section
from router.lru import LruCache
from router.package.compose import compose_view
from router.package.partition import Partition, SharedCaches, decode_partition
from router.package.stores.arena import ShardArena
from router.package.stores.budget import HeapPlan, HeapRoom, ReaderBudget
from router.package.stores.records import (
    RecordCache,
    RowReader,
)
from router.package.stores.shards import ChunkIntoFetcher, ShardCache
from router.package.stores.texts import (
    ChunkCache,
    ChunkFetcher,
)
from router.package.version.content_names import verify_named
from router.package.version.manifest import Manifest
from router.package.version.partitions import (
    SHARED_PARTITION,
    partition_key,
)
from router.package.view import PackageView, VersionFacts
from router.package.view_parts import ViewPart
from router.ports import Allocate, Blob

__all__ = ["Catalog", "KnowledgePackage", "load_package"]

ArtifactFetcher = Callable[[str], bytes]


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
    shared partition and its caller's, not every tenant's. It holds tenant partitions up to
    ``budget.partition_bytes`` of resident files (one at least), dropping the least recently
    asked (read again, one round trip, by that tenant's next question): an isolate serving a
    thousand tenants must not end up holding all of them. ``fit_caches`` sizes every cache
    from the isolate's heap (``HeapRoom``)."""

    manifest: Manifest
    loaded: list[Partition | None]  # shared first, then tenants by key; None: not read (now)
    byte_size: int = 0  # bytes read into this package so far (grows with every partition read)
    budget: ReaderBudget = field(default_factory=ReaderBudget)
    # reads partitions not held yet: (the partitions, their bytes)
    fetch_later: Callable[[list[int]], Awaitable[tuple[list[Partition], int]]] | None = None
    caches: SharedCaches | None = field(default=None, repr=False)  # every partition's caches
    _room: HeapRoom | None = field(default=None, repr=False)  # set by the first ``fit_caches``
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
        while len(self._tenants) > 1 and self._tenant_bytes() > self.budget.partition_bytes:
            index = next(iter(self._tenants))
            del self._tenants[index]
            self.loaded[index] = None
            self._views.pop(self.manifest.partitions[index].key, None)

    def _tenant_bytes(self) -> int:
        """The resident bytes of the tenant partitions held (the manifest's sizes)."""
        artifacts = self.manifest.artifacts
        keys = {self.manifest.partitions[i].key for i in self._tenants}
        names = self.manifest.names_to_read(with_vectors=True, partitions=keys)
        return sum(int(artifacts[name].get("bytes", 0)) for name in names)

    @property
    def cached_bytes(self) -> int:
        """What the package's caches hold between queries, as they account it (bytes)."""
        if self.caches is None:
            return 0
        c = self.caches
        tables = {id(t): t for t in (c.exact, c.vocabulary, c.graph, c.words, c.records.texts)}
        held = sum(t.held for t in tables.values()) + c.records.decoded.held
        return c.shards.cached_bytes + c.chunks.cached_bytes + held

    def fit_caches(self, heap_bytes: int, plan: HeapPlan) -> ReaderBudget:
        """Size every cache from a reading of the isolate's heap in use (``HeapRoom``: the
        first reading, the package just loaded, sets the room below ``plan``'s ceiling; a heap
        past it later takes the overshoot back from the caches). Returns the new budget."""
        if self._room is None:
            self._room = HeapRoom(plan, heap_bytes, self.section_count)
        budget = ReaderBudget.for_headroom(self._room.room(heap_bytes))
        if budget != self.budget:
            self.resize(budget)
        return budget

    def resize(self, budget: ReaderBudget) -> None:
        """Bound every cache by ``budget`` from now on (those past it drop their oldest now)."""
        self.budget = budget
        c = self.caches
        if c is not None:
            c.shards.resize(budget.shard_bytes)
            c.chunks.resize(budget.chunk_bytes)
            c.records.resize(budget.record_bytes)
            for table in (c.exact, c.vocabulary, c.graph, c.words, c.records.texts):
                table.resize(budget.table_bytes)
        for view in self._views.values():
            view.budget = budget
        while len(self._views) > max(1, budget.views):
            self._views.popitem(last=False)
        self._asked([])

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
    # one LRU for every table's decoded chunks and the records' JSON (keys do not collide:
    # content-named files, ("record", partition, document)): one budget, spent where needed
    tables: LruCache[Any, Any] = LruCache(budget.table_bytes)
    shared = SharedCaches(
        ShardCache(budget.shard_bytes, arena),
        ChunkCache(budget.chunk_bytes),
        RecordCache(budget.record_bytes, tables),
        tables,
        tables,
        tables,
        tables,
        read_rows,
        _chunk_into_reader(fetch_chunk_into),
    )
    loaded: list[Partition | None] = [None] * len(manifest.partitions)
    for index in indices:
        entry = manifest.partitions[index]
        loaded[index] = decode_partition(manifest, entry, blobs, read_chunk, shared)

    async def fetch_later(later: list[int]) -> tuple[list[Partition], int]:
        assert fetch_partitions is not None
        names = _resident_files(manifest, later, with_vectors)
        fetched = await fetch_partitions(names)
        verified = {name: manifest.verify(name, fetched[name]) for name in names}
        decoded = [
            decode_partition(manifest, manifest.partitions[i], verified, read_chunk, shared)
            for i in later
        ]
        return decoded, sum(len(blob) for blob in verified.values())

    return KnowledgePackage(
        manifest=manifest,
        loaded=loaded,
        byte_size=sum(len(b) for b in blobs.values()) + len(manifest_blob),
        budget=budget,
        fetch_later=fetch_later if fetch_partitions is not None else None,
        caches=shared,
    )


def _resident_files(manifest: Manifest, indices: Iterable[int], with_vectors: bool) -> list[str]:
    """The resident files of the partitions at ``indices`` (bundles, and vectors if wanted)."""
    keys = {manifest.partitions[i].key for i in indices}
    return manifest.names_to_read(with_vectors=with_vectors, partitions=keys)


def _chunk_into_reader(fetch_into: ChunkIntoFetcher | None) -> ChunkIntoFetcher | None:
    """``fetch_into``, each file checked against the content digest in its name."""
    if fetch_into is None:
        return None

    async def read(name: str, allocate: Allocate) -> Blob:
        return verify_named(name, await fetch_into(name, allocate))

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
