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
