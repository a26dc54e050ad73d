"""The host's call recorder (``recordCalls``, read by ``bench/edge_model.py``): a query to the
real Worker comes back with every binding call it made — R2 gets and their body reads with the
same bytes, the D1 records read, the query-cache probe — and the replay models it.

Why: the edge cost model is only as good as the schedule it replays; this checks the recorder
on the real code path (a package published from inside Pyodide, the D1 batch of the publish
going through the wrapped binding)."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from router.compile.build import build_knowledge, write_package
from router.vectors.hash_embedder import HashEmbedder
from tests.common import KNOWLEDGE
from tests.pyodide.client import ROOT, PyodideHost
from tests.pyodide.fetch_wheels import ensure_wheels
from tests.pyodide.test_worker_pyodide import WORKER_VARS, apply_migrations

sys.path.insert(0, str(ROOT / "bench"))
from edge_model import replay, what


@pytest.fixture(scope="module")
def recording_worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PyodideHost]:
    if not ensure_wheels(check_only=True):
        pytest.fail("the Pyodide wheels are missing or stale: run scripts/dev.sh test")
    built = build_knowledge(KNOWLEDGE, encoder=HashEmbedder())
    package_dir = write_package(built.package, tmp_path_factory.mktemp("recording-package"))
    state = tmp_path_factory.mktemp("recording-state")
    apply_migrations(state)
    manifest = built.package.manifest
    host = PyodideHost(
        persist_to=state,
        log=state / "host.log",
        vectorize={"dimensions": int(manifest.embedding["dimensions"])},
        vars={**WORKER_VARS, "KR_ALLOW_ANONYMOUS": "on", "KR_QUERY_LOG": "off"},
        record_calls=True,
    )
    host.start()
    try:
        host.publish(package_dir)
        yield host
    finally:
        host.close()


def test_a_query_comes_back_with_its_binding_calls(recording_worker: PyodideHost) -> None:
    response = recording_worker.fetch("POST", "/v1/query", {"query": "prazo de reembolso"})
    assert response.status == 200, response.body
    schedule = response.schedule
    assert schedule is not None and schedule["end_ms"] > 0
    events = [e for e in schedule["events"] if not e.get("after_response")]
    issued = {e["id"]: e for e in events if e["kind"] == "issue"}
    settled = {e["id"]: e for e in events if e["kind"] == "settle"}
    assert issued and set(issued) >= set(settled)
    kinds = {what(e) for e in issued.values()}
    assert "kv qcache" in kinds and "d1 knowledge_records" in kinds, kinds
    gets = [e for e in issued.values() if e["cls"] == "R2Bucket" and e["op"] == "get"]
    bodies = [e for e in issued.values() if e.get("body")]
    assert gets and bodies
    for body in bodies:  # a body read returns the bytes its get announced
        get = next(g for g in gets if g["key"] == body["key"] and g["id"] < body["id"])
        assert settled[body["id"]]["bytes"] == settled[get["id"]]["bytes"] > 0
    times = [e["t"] for e in events]
    assert times == sorted(times) and all(e["cpu"] >= 0 for e in events)
    modelled = replay(schedule, "typical", colo_warm=False)
    assert modelled.round_trips >= 2 and modelled.ms > modelled.cpu_ms > 0


def test_a_repeated_question_reads_no_index(recording_worker: PyodideHost) -> None:
    again = recording_worker.fetch("POST", "/v1/query", {"query": "prazo de reembolso"})
    assert again.status == 200 and again.schedule is not None
    assert again.json()["metadata"]["cache"] != "miss"
    issued = [e for e in again.schedule["events"] if e["kind"] == "issue"]
    assert not [e for e in issued if e["cls"] in ("R2Bucket", "D1Database")], issued


QUERY_CACHE = """
from router.adapters.cloudflare.heap import wasm_heap_bytes
from router.adapters.cloudflare.service import service_from_env
service = service_from_env(env)
if OFF:
    service.kept_cache, service.cache = service.cache, None
else:
    service.cache = service.kept_cache
package = service._package
result = {"heap": wasm_heap_bytes(), "cache_bytes": package.budget.cache_bytes if package else 0}
"""


def test_a_warm_isolate_sizes_its_caches_from_its_heap_and_reads_nothing_again(
    recording_worker: PyodideHost,
) -> None:
    """With the query cache off (so the index answers), a question asked again by a warm
    isolate makes no read of the package: the caches' room comes from the wasm heap in use,
    not from fixed caps."""
    questions = ["prazo de reembolso", "O que é APR?", "validade da permissão de trabalho"]
    recording_worker.python(QUERY_CACHE.replace("OFF", "True"))
    try:
        first = [recording_worker.fetch("POST", "/v1/query", {"query": q}) for q in questions]
        again = recording_worker.fetch("POST", "/v1/query", {"query": questions[0]})
        state = recording_worker.python(QUERY_CACHE.replace("OFF", "True"))
    finally:
        recording_worker.python(QUERY_CACHE.replace("OFF", "False"))
    assert all(r.status == 200 for r in [*first, again])
    assert again.json()["metadata"]["cache"] == "off"
    assert again.json()["results"] == first[0].json()["results"]  # the same answer
    assert again.schedule is not None
    issued = [e for e in again.schedule["events"] if e["kind"] == "issue"]
    # the active version is read on every request here (KR_ACTIVE_VERSION_TTL_S=0)
    assert all(e["cls"] == "KvNamespace" and e["op"] == "get" for e in issued), issued
    assert state["heap"] > 30 * 1024 * 1024  # the wasm heap in use, read from Pyodide
    assert state["cache_bytes"] > 20 * 1024 * 1024  # its room below the limit, not the caps
