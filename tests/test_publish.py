"""Local publishing: blobs + D1 rows + KV activation; bad packages never replace a good one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from tests.conftest import write_doc

from router.adapters.local.state import LocalState
from router.compile.build import BuildResult, build_knowledge
from router.contract import QueryRequest
from router.errors import IntegrityError, NoActiveVersionError, PackageFormatError
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY
from router.publisher import publish_package
from router.service import KnowledgeService, package_key


def _second_package(tmp_path: Path) -> BuildResult:
    write_doc(
        tmp_path / "kb2",
        "only.md",
        "---\nsemanticId: only.doc\ntitle: Documento novo\n---\nConteúdo da versão nova.\n",
    )
    return build_knowledge(tmp_path / "kb2")


def test_publish_writes_blobs_rows_and_activates(state: LocalState, built: BuildResult) -> None:
    version = built.package.knowledge_version
    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) == version
    for name in built.package.files():
        assert asyncio.run(state.blobs.get(package_key(version, name))) is not None
    counts = built.package.manifest.counts
    assert state.relational.count("documents", version) == counts["documents"]
    assert state.relational.count("sections", version) == counts["sections"]
    assert state.relational.count("links", version) > 0


def test_republishing_is_idempotent(state: LocalState, built: BuildResult) -> None:
    files = built.package.files()
    asyncio.run(publish_package(files, state.blobs, state.kv, state.relational))
    version = built.package.knowledge_version
    assert (
        state.relational.count("documents", version) == built.package.manifest.counts["documents"]
    )


def test_activation_switches_versions_and_remembers_the_previous(
    state: LocalState, service: KnowledgeService, built: BuildResult, tmp_path: Path
) -> None:
    old = built.package.knowledge_version
    before = asyncio.run(service.query(QueryRequest(query="Documento novo")))
    assert before.knowledge_version == old
    new = _second_package(tmp_path).package
    asyncio.run(publish_package(new.files(), state.blobs, state.kv, state.relational))
    after = asyncio.run(service.query(QueryRequest(query="Documento novo")))
    assert after.knowledge_version == new.knowledge_version
    assert after.results[0].doc_id == "only.doc"
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) == old


def test_corrupt_new_version_is_refused_and_the_old_one_keeps_serving(
    state: LocalState, service: KnowledgeService, built: BuildResult, tmp_path: Path
) -> None:
    old = built.package.knowledge_version
    assert asyncio.run(service.package()).version == old
    new = _second_package(tmp_path).package
    asyncio.run(publish_package(new.files(), state.blobs, state.kv, activate_now=False))
    key = package_key(new.knowledge_version, "postings.bin")
    asyncio.run(state.blobs.put(key, b"garbage"))
    asyncio.run(state.kv.put(ACTIVE_VERSION_KEY, new.knowledge_version))
    response = asyncio.run(service.query(QueryRequest(query="O que é APR?")))
    assert response.knowledge_version == old
    assert service.last_load_error and new.knowledge_version in service.last_load_error


def test_publishing_a_damaged_package_never_activates_it(state: LocalState, tmp_path: Path) -> None:
    files = dict(_second_package(tmp_path).package.files())
    files["catalog.json"] = files["catalog.json"][:-10]
    before = asyncio.run(state.kv.get(ACTIVE_VERSION_KEY))
    with pytest.raises(IntegrityError):
        asyncio.run(publish_package(files, state.blobs, state.kv, state.relational))
    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) == before


def test_missing_artifact_and_missing_version_are_errors(tmp_path: Path) -> None:
    empty = LocalState(tmp_path / "empty")
    service = KnowledgeService(kv=empty.kv, blobs=empty.blobs)
    with pytest.raises(NoActiveVersionError):
        asyncio.run(service.package())
    asyncio.run(empty.kv.put(ACTIVE_VERSION_KEY, "kv-doesnotexist"))
    with pytest.raises(PackageFormatError):
        asyncio.run(service.package())


def test_migrations_are_applied_once(tmp_path: Path) -> None:
    local = LocalState(tmp_path / "s")
    assert local.relational.apply_migrations(Path("migrations/d1")) == []
