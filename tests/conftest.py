"""Shared fixtures: the sample knowledge compiled once, a published local state, a service.

Constants and helpers live in :mod:`tests.common`; only fixtures belong here."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from router.adapters.local.state import LocalState
from router.compile.build import BuildResult, build_knowledge
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import run_query
from router.publisher import publish_package
from router.service import KnowledgeService
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
