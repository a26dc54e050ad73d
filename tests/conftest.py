"""Shared fixtures: the sample knowledge compiled once (with and without section vectors), a
published local state, a service.

Constants and helpers live in :mod:`tests.common`; only fixtures belong here."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from router.adapters.local.state import LocalState
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.build import BuildResult, build_knowledge
from router.compile.corpus import load_knowledge
from router.compile.embedding import embed_sections
from router.compile.indexer import BuildConfig, CompiledPackage, compile_documents
from router.contract import QueryRequest, QueryResponse
from router.ops.publish import publish_package
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import run_query
from router.service import KnowledgeService
from router.sync import run_sync
from router.vectors.hash_embedder import HashEmbedder
from router.vectors.records import section_records
from tests.common import KNOWLEDGE, TODAY


@pytest.fixture(scope="session")
def built() -> BuildResult:
    return build_knowledge(KNOWLEDGE)


@pytest.fixture(scope="session")
def package(built: BuildResult) -> KnowledgePackage:
    files = built.package.files()
    return load_package(files["manifest.json"], files.__getitem__)


@pytest.fixture
def ask(package: KnowledgePackage):  # type: ignore[no-untyped-def]
    def _ask(query: str, **context: object) -> QueryResponse:
        return run_query(package, QueryRequest(query=query, **context), today=TODAY)  # type: ignore[arg-type]

    return _ask


@pytest.fixture
def state(tmp_path: Path, built: BuildResult) -> Iterator[LocalState]:
    local = LocalState(tmp_path / "state")
    asyncio.run(publish_package(built.package.files(), local.blobs, local.kv, local.relational))
    yield local
    shutil.rmtree(tmp_path / "state", ignore_errors=True)


@pytest.fixture
def service(state: LocalState) -> KnowledgeService:
    return KnowledgeService(kv=state.kv, blobs=state.blobs)


@pytest.fixture(scope="session")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> CompiledPackage:
    """The sample knowledge compiled with hash-trigram section vectors (cache in a temp dir)."""
    corpus = load_knowledge(KNOWLEDGE)
    embeddings = embed_sections(
        corpus.documents, HashEmbedder(), cache_root=tmp_path_factory.mktemp("vcache")
    )
    return compile_documents(corpus.documents, BuildConfig(), corpus.synonyms, {}, embeddings)


@pytest.fixture(scope="session")
def vpackage(compiled: CompiledPackage) -> KnowledgePackage:
    """``compiled`` loaded: the package the vector stage can run on."""
    files = compiled.files()
    return load_package(files["manifest.json"], files.__getitem__)


@pytest.fixture(scope="session")
def vindex(vpackage: KnowledgePackage) -> LocalVectorIndex:
    """An in-process vector index holding ``vpackage``'s section vectors (read-only in tests)."""
    index = LocalVectorIndex(HashEmbedder.dimensions)
    index.upsert_many(run_sync(section_records(vpackage)))
    return index
