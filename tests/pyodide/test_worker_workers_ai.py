"""The real Worker in Pyodide serves a package built with a Workers AI model (the production path):
it embeds each question through its ``AI`` binding with the manifest's model, queries Vectorize
with that 1,024-dimensional vector, and ranks as CPython does with the same vectors.

Why here too: ``tests/adapters/test_workers_ai_api.py`` covers ``kr build --embedder
workers-ai:@cf/baai/bge-m3`` against a fake REST API and the Worker's adapters in CPython; this
runs the Worker's side in the runtime it ships to (JS objects, the binding's conversions). The
section vectors are what ``kr build`` would get from that model here: the Workers AI fake's own
embedding (``fake_ai.mjs``, hashed character trigrams), ported below — the parity with CPython
fails if the port and the fake disagree.
"""

from __future__ import annotations

import asyncio
import re
import struct
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kr.golden import load_golden
from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import BuildResult, build_knowledge, write_package
from router.config import RetrievalBudget, RouterConfig
from router.ops.publish import publish_package
from router.service import KnowledgeService
from tests.common import GOLDEN, KNOWLEDGE
from tests.pyodide.client import PyodideHost, run_wrangler
from tests.pyodide.fetch_wheels import ensure_wheels

MODEL = "@cf/baai/bge-m3"
DIMENSIONS = 1024
BUDGET_MS = 60_000.0  # a loaded machine must not make either side skip the vector stage
WORKER_VARS = {
    "KR_ACTIVE_VERSION_TTL_S": "0",
    "KR_MAX_LATENCY_MS": str(BUDGET_MS),
    "KR_ALLOW_ANONYMOUS": "on",
}


def _fnv1a(text: str) -> int:
    value = 0x811C9DC5
    data = text.encode("utf-16-le")
    for (unit,) in struct.iter_unpack("<H", data):  # JS charCodeAt: UTF-16 code units
        value = ((value ^ unit) * 0x01000193) & 0xFFFFFFFF
    return value


def _fold(text: str) -> str:
    decomposed = unicodedata.normalize("NFKD", text)
    stripped = re.sub("[\u0300-\u036f]", "", decomposed).lower()
    return re.sub(r"[\W_]+", " ", stripped).strip()


class FakeModel:
    """``fake_ai.mjs``'s ``fakeEmbedding`` in Python, as a build-side ``PassageEncoder`` and a
    query-side ``Embedder`` of :data:`MODEL`."""

    model_id = MODEL
    dimensions = DIMENSIONS

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dimensions
        for word in _fold(text).split():
            padded = f" {word} "
            for i in range(len(padded) - 2):
                bucket = _fnv1a(padded[i : i + 3])
                values[bucket % self.dimensions] += 1.0 if bucket & 0x80000000 else -1.0
        length = sum(v * v for v in values) ** 0.5 or 1.0
        return [v / length for v in values]

    def encode(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return [self.vector(text) for text in texts]

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return self.encode(texts, kind)


@pytest.fixture(scope="module")
def ai_build(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    import router.compile.vector_cache as vector_cache

    folder = tmp_path_factory.mktemp("vectors")
    saved, vector_cache.DEFAULT_CACHE_DIR = vector_cache.DEFAULT_CACHE_DIR, folder
    try:
        return build_knowledge(KNOWLEDGE, encoder=FakeModel())
    finally:
        vector_cache.DEFAULT_CACHE_DIR = saved


@pytest.fixture(scope="module")
def ai_worker(
    tmp_path_factory: pytest.TempPathFactory, ai_build: BuildResult
) -> Iterator[PyodideHost]:
    if not ensure_wheels(check_only=True):
        pytest.fail("the Pyodide wheels are missing or stale: run scripts/dev.sh test")
    state = tmp_path_factory.mktemp("wrangler-state")
    migrate = ["d1", "migrations", "apply", "KNOWLEDGE_DB", "--local", "--persist-to"]
    run_wrangler([*migrate, str(state), "--env="])
    host = PyodideHost(
        persist_to=state,
        log=state / "host.log",
        vectorize={"dimensions": DIMENSIONS, "metadataIndexes": ["version"]},
        vars=WORKER_VARS,
    )
    host.start()
    try:
        report = host.publish(write_package(ai_build.package, tmp_path_factory.mktemp("pkg")))
        assert report["activated"] and report["vectors"] > 300, report
        yield host
    finally:
        host.close()


def _reference(tmp_path: Path, build: BuildResult) -> KnowledgeService:
    state = LocalState(tmp_path / "cpython-state")
    files = build.package.files()
    asyncio.run(publish_package(files, state.blobs, state.kv, state.relational))
    return KnowledgeService(
        kv=state.kv,
        blobs=state.blobs,
        load_vectors_on_activation=True,
        vector_stage=lambda _: (FakeModel(), LocalVectorIndex(DIMENSIONS)),
        config=RouterConfig(budget=RetrievalBudget(max_latency_ms=BUDGET_MS)),
    )


def _ranked(response: dict[str, Any]) -> list[str]:
    return [f"{r['doc_id']}#{r['section_id']}" for r in response["results"]]


def test_the_worker_embeds_questions_with_the_packages_workers_ai_model(
    ai_worker: PyodideHost, ai_build: BuildResult, tmp_path: Path
) -> None:
    assert ai_build.package.manifest.embedding == {"model": MODEL, "dimensions": DIMENSIONS}
    health = ai_worker.fetch("GET", "/v1/health").json()
    assert health["embedding_model"] == MODEL
    paraphrases = [g for g in load_golden(GOLDEN) if g.category == "paraphrase"]
    reference = _reference(tmp_path, ai_build)
    before = len(ai_worker.stats()["ai_calls"])
    reached, differ = 0, []
    for golden in paraphrases:
        body = golden.request.model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        if body.get("tenant"):  # a tenant needs a key (ADR 0012): shared questions only here
            continue
        response = ai_worker.fetch("POST", "/v1/query", body={**body, "query": golden.query})
        assert response.status == 200, response.body
        got = response.json()
        want = asyncio.run(reference.query(golden.request)).model_dump(mode="json")
        stage = got["trace"]["stages"]["vector"]
        if "matches" in stage:
            reached += 1
            assert stage["model"] == MODEL, stage
        if _ranked(got) != _ranked(want):
            differ.append(f"{golden.id}: worker {_ranked(got)[:3]} cpython {_ranked(want)[:3]}")
    assert reached > 0, "no paraphrase reached the vector stage"
    assert not differ, "\n".join(differ)
    calls = ai_worker.stats()["ai_calls"][before:]
    assert len(calls) == reached  # one embedding call per question that reached the stage
    assert all(c == {"model": MODEL, "kind": "embedding", "count": 1} for c in calls), calls
