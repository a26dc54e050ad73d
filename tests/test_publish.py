"""Local publishing: blobs + D1 rows + KV activation; bad packages never replace a good one."""

from __future__ import annotations

import asyncio
import re
import sqlite3
from pathlib import Path

import pytest

from router.adapters.local.journal import FileJournal
from router.adapters.local.state import LocalState, SqliteRelationalStore
from router.compile.build import BuildResult, build_knowledge
from router.contract import QueryRequest
from router.errors import IntegrityError, NoActiveVersionError, PackageFormatError, RouterError
from router.ops.publish import PublishError, PublishTarget, publish, publish_package, read_package
from router.ops.publish_plan import ACTIVATE_STEP, ROWS_STEP, VERIFY_STEP, blob_step, plan_steps
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY, BlobStore
from router.service import KnowledgeService, package_key
from tests.common import MIGRATIONS, write_doc


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


def _tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}


def _sqlite_dump(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table, sorted; ``published_at`` left out (the time of the latest
    publish, which a republish sets again by design)."""
    dump = {}
    with sqlite3.connect(path) as db:
        for table in sorted(_tables(path) - {"sqlite_sequence"}):
            cursor = db.execute(f"SELECT * FROM {table}")
            columns = [c[0] for c in cursor.description]
            kept = [i for i, name in enumerate(columns) if name != "published_at"]
            dump[table] = sorted((tuple(row[i] for i in kept) for row in cursor), key=repr)
    return dump


Rows = dict[str, list[tuple[object, ...]]]


def _state_snapshot(state: LocalState) -> tuple[dict[str, bytes], Rows, Rows]:
    """(R2 blobs by key, KV rows, D1 rows) of a local state."""
    r2 = state.root / "r2"
    blobs = {}
    for path in r2.rglob("*"):
        if path.is_file():
            blobs[path.relative_to(r2).as_posix()] = path.read_bytes()
    return blobs, _sqlite_dump(state.root / "kv.sqlite"), _sqlite_dump(state.root / "d1.sqlite")


def test_republishing_is_idempotent(state: LocalState, built: BuildResult) -> None:
    files = built.package.files()
    version = built.package.knowledge_version
    before = _state_snapshot(state)
    blobs, kv, d1 = before
    assert len(blobs) == len(files) and kv["kv"]
    assert len(d1["knowledge_documents"]) == built.package.manifest.counts["documents"]
    assert len(d1["knowledge_sections"]) == built.package.manifest.counts["sections"]

    assert asyncio.run(publish_package(files, state.blobs, state.kv, state.relational)) == version
    assert _state_snapshot(state) == before  # every blob, KV key and row as it was
    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) == version
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) is None  # not "previous = itself"


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
    key = package_key(new.knowledge_version, "shared.partition.bin")
    asyncio.run(state.blobs.put(key, b"garbage"))
    asyncio.run(state.kv.put(ACTIVE_VERSION_KEY, new.knowledge_version))
    response = asyncio.run(service.query(QueryRequest(query="O que é APR?")))
    assert response.knowledge_version == old
    assert service.last_load_error and new.knowledge_version in service.last_load_error


def test_publishing_a_damaged_package_never_activates_it(state: LocalState, tmp_path: Path) -> None:
    files = dict(_second_package(tmp_path).package.files())
    files["shared.partition.bin"] = files["shared.partition.bin"][:-10]
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


def test_migrations_are_applied_once_and_create_their_tables(tmp_path: Path) -> None:
    migrations = sorted(MIGRATIONS.glob("*.sql"))
    assert MIGRATIONS.is_absolute() and len(migrations) >= 2
    pattern = re.compile(r"CREATE TABLE\s+(?:IF NOT EXISTS\s+)?(\w+)", re.IGNORECASE)
    created = {name for m in migrations for name in pattern.findall(m.read_text())}
    assert {"knowledge_versions", "knowledge_sections", "query_log"} <= created

    (tmp_path / "none").mkdir()
    path = tmp_path / "d1.sqlite"
    store = SqliteRelationalStore(path, migrations=tmp_path / "none")  # a fresh, empty database
    assert not created & _tables(path)
    assert store.apply_migrations(MIGRATIONS) == [m.name for m in migrations]
    assert created <= _tables(path)
    assert store.apply_migrations(MIGRATIONS) == []  # recorded: never applied twice
    assert SqliteRelationalStore(path, migrations=MIGRATIONS).apply_migrations(MIGRATIONS) == []
    with sqlite3.connect(path) as db:
        names = [row[0] for row in db.execute("SELECT name FROM d1_migrations ORDER BY id")]
    assert names == [m.name for m in migrations]


class _FlakyBlobs:
    """Local blobs that fail the n-th put once (a dropped connection, say)."""

    def __init__(self, inner: BlobStore, fail_at: int) -> None:
        self.inner = inner
        self.fail_at = fail_at
        self.puts: list[str] = []

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(key)

    async def put(self, key: str, data: bytes) -> None:
        if len(self.puts) + 1 == self.fail_at:
            self.fail_at = 0
            raise RouterError("connection dropped")
        self.puts.append(key)
        await self.inner.put(key, data)


def test_publish_resumes_from_a_file_journal(tmp_path: Path) -> None:
    local = LocalState(tmp_path / "s")
    package = _second_package(tmp_path).package
    files = package.files()
    blobs = _FlakyBlobs(local.blobs, fail_at=3)
    target = PublishTarget("local-test", blobs, local.kv, local.relational)
    with pytest.raises(PublishError) as info:
        asyncio.run(publish(files, target, FileJournal(tmp_path / "journal")))
    order = [*sorted(set(files) - {"manifest.json"}), "manifest.json"]
    assert info.value.step == blob_step(order[2]) and "connection dropped" in info.value.message
    assert asyncio.run(local.kv.get(ACTIVE_VERSION_KEY)) is None

    report = asyncio.run(publish(files, target, FileJournal(tmp_path / "journal")))  # new process
    assert report.skipped == [blob_step(name) for name in order[:2]]
    assert len(blobs.puts) == len(files) and report.ran[-1] == ACTIVATE_STEP
    assert asyncio.run(local.kv.get(ACTIVE_VERSION_KEY)) == package.knowledge_version
    assert local.relational.count("documents", package.knowledge_version) == 1
    again = asyncio.run(publish(files, target, FileJournal(tmp_path / "journal")))
    assert again.nothing_to_do and len(blobs.puts) == len(files)


def test_the_plan_uploads_the_manifest_last_and_activates_last(built: BuildResult) -> None:
    files = built.package.files()
    package = read_package(files)
    steps = plan_steps(package, files, rows=True, vectors=True, activate_now=True)
    assert steps[-1] == ACTIVATE_STEP and steps[len(files) - 1] == blob_step("manifest.json")
    assert steps[len(files) : len(files) + 2] == [VERIFY_STEP, ROWS_STEP]
    staged = plan_steps(package, files, rows=False, vectors=False, activate_now=False)
    assert ACTIVATE_STEP not in staged and ROWS_STEP not in staged
