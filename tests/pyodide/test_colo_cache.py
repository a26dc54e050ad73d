"""The colo's cache in the real Worker (docs/adr/0027): content-named package files are read
through ``caches.default``, so a second isolate on the same colo reads none of them from R2,
and a colo cache that fails leaves the answers as they were (from R2).

Why in Pyodide: the wrapper's whole point is which binding calls the Worker makes; the host
records them (``recordCalls``) and gives the Worker a cache that behaves like one colo's
(host.mjs, ``ColoCache``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from router.compile.build import build_knowledge, write_package
from router.vectors.hash_embedder import HashEmbedder
from tests.common import KNOWLEDGE
from tests.pyodide.client import PyodideHost
from tests.pyodide.fetch_wheels import ensure_wheels
from tests.pyodide.test_worker_pyodide import WORKER_VARS, apply_migrations

OBJECTS = "packages/_objects/"
QUESTION = {"query": "prazo de reembolso"}
NEW_ISOLATE = "from router.adapters.cloudflare import reset_service\nreset_service()\nresult = 1"


@pytest.fixture(scope="module")
def package_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not ensure_wheels(check_only=True):
        pytest.fail("the Pyodide wheels are missing or stale: run scripts/dev.sh test")
    built = build_knowledge(KNOWLEDGE, encoder=HashEmbedder())
    return write_package(built.package, tmp_path_factory.mktemp("colo-package"))


def _host(tmp: Path, package_dir: Path, colo: str) -> Iterator[PyodideHost]:
    apply_migrations(tmp)
    host = PyodideHost(
        persist_to=tmp,
        log=tmp / "host.log",
        vectorize={"dimensions": 256},
        vars={**WORKER_VARS, "KR_QUERY_LOG": "off"},
        record_calls=True,
        colo=colo,
    )
    host.start()
    try:
        host.publish(package_dir)
        yield host
    finally:
        host.close()


@pytest.fixture(scope="module")
def colo_worker(tmp_path_factory: pytest.TempPathFactory, package_dir: Path) -> Iterator[Any]:
    yield from _host(tmp_path_factory.mktemp("colo-on"), package_dir, "on")


@pytest.fixture(scope="module")
def broken_colo_worker(
    tmp_path_factory: pytest.TempPathFactory, package_dir: Path
) -> Iterator[Any]:
    yield from _host(tmp_path_factory.mktemp("colo-broken"), package_dir, "broken")


def _issued(schedule: dict[str, Any] | None) -> list[dict[str, Any]]:
    assert schedule is not None
    return [e for e in schedule["events"] if e["kind"] == "issue"]


def _object_gets(issued: list[dict[str, Any]]) -> list[str]:
    return [
        e["key"]
        for e in issued
        if e["cls"] == "R2Bucket" and e["op"] == "get" and e["key"].startswith(OBJECTS)
    ]


def test_a_second_isolate_reads_the_package_objects_from_the_colo(
    colo_worker: PyodideHost,
) -> None:
    colo_worker.command("colo_clear")  # the publish's read-back went through it too
    colo_worker.python(NEW_ISOLATE)
    first = colo_worker.fetch("POST", "/v1/query", QUESTION)
    assert first.status == 200, first.body
    read = _object_gets(_issued(first.schedule))
    assert read, "the query read no content-named file: nothing to cache"
    colo_worker.python(NEW_ISOLATE)  # the isolate's own caches are gone; the colo's are not
    # another cache key (top_k), the same index reads
    again = colo_worker.fetch("POST", "/v1/query", {**QUESTION, "top_k": 3})
    assert again.status == 200, again.body
    issued = _issued(again.schedule)
    assert not _object_gets(issued), "a content-named file was read from R2 on a warm colo"
    matched = {e["key"].split("/", 3)[3] for e in issued if e["cls"] == "Cache"}
    assert set(read) <= matched
    # the manifest is not content-named: still from R2; a built version's bundle is
    assert any(e["cls"] == "R2Bucket" and e["key"].endswith("manifest.json") for e in issued)
    bundles = [e["key"] for e in issued if e["key"].endswith(".partition.bin")]
    assert bundles and all(e["cls"] == "Cache" for e in issued if e["key"] in bundles)
    colo = colo_worker.stats()["colo"]
    assert colo["calls"]["hit"] >= len(set(read)) and colo["entries"] >= len(set(read))
    assert again.json()["results"] == first.json()["results"][:3]


def test_a_broken_colo_cache_still_answers_from_r2(
    broken_colo_worker: PyodideHost, colo_worker: PyodideHost
) -> None:
    broken = broken_colo_worker.fetch("POST", "/v1/query", {**QUESTION, "top_k": 4})
    assert broken.status == 200, broken.body
    assert _object_gets(_issued(broken.schedule))  # each cached read fell back to R2
    assert broken_colo_worker.stats()["colo"]["calls"]["match"] > 0  # the cache was asked
    working = colo_worker.fetch("POST", "/v1/query", {**QUESTION, "top_k": 4})
    assert broken.json()["results"] == working.json()["results"]
