"""Delta publish: content-named files are stored once and shared; a new version uploads only
what the store lacks; an interrupted delta resumes; verification still covers every blob;
packages of the per-version layout still load."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kr.activation import rollback
from router.adapters.local.journal import FileJournal
from router.adapters.local.state import LocalState
from router.contract import QueryRequest
from router.errors import IntegrityError, RouterError
from router.ops.publish import PublishError, PublishTarget, publish, publish_direct
from router.ops.publish_plan import blob_step
from router.package.version.content_names import is_lazy
from router.package.version.fetch import fetch_package_files
from router.package.version.layout import OBJECTS_PREFIX, legacy_key, package_key
from router.package.version.manifest import MANIFEST_NAME
from router.ports import ACTIVE_VERSION_KEY, BlobStore
from router.service import KnowledgeService, package_getter
from tests.ops.conftest import Files


class CountingBlobs:
    """A blob store that records its puts, and can fail the n-th one or lie about presence."""

    def __init__(self, inner: LocalState, fail_at: int = 0, absent: str = "") -> None:
        self.inner = inner.blobs
        self.fail_at = fail_at
        self.absent = absent  # a key whose size is reported although it is not stored
        self.puts: list[str] = []

    async def get(self, key: str) -> bytes | None:
        return await self.inner.get(key)

    async def size(self, key: str) -> int | None:
        if key == self.absent:
            self.absent = ""
            size = await self.inner.size(key)
            await self.inner.delete(key)  # gone between the presence check and verification
            return size
        return await self.inner.size(key)

    async def put(self, key: str, data: bytes) -> None:
        if self.fail_at and len(self.puts) + 1 == self.fail_at:
            self.fail_at = 0
            raise RouterError("connection dropped")
        self.puts.append(key)
        await self.inner.put(key, data)


def _delta(old: Files, new: Files) -> set[str]:
    """What a delta publish of ``new`` over ``old`` must upload: every resident file, and the
    content-named files ``old`` does not have."""
    return {n for n in new if not is_lazy(n) or n not in old}


def _serves(state: LocalState, version: str, blobs: BlobStore | None = None) -> None:
    """Every file of ``version`` is readable and verified, and it answers a question."""
    get = package_getter(blobs or state.blobs, version)
    files = asyncio.run(fetch_package_files(get, version))
    service = KnowledgeService(kv=state.kv, blobs=blobs or state.blobs)
    package = asyncio.run(service.load(version))
    assert package.version == version and len(files) > 10


def test_a_one_document_change_uploads_only_the_changed_files(
    versions: list[Files], tmp_path: Path
) -> None:
    first, second = versions[0], versions[1]
    state = LocalState(tmp_path / "s")
    counting = CountingBlobs(state)
    full = asyncio.run(publish_direct(first, counting, state.kv, state.relational))
    assert full.blobs_uploaded == len(first) and full.blobs_reused == 0
    assert full.bytes_uploaded == sum(map(len, first.values()))
    assert all(k.startswith(OBJECTS_PREFIX) for k in counting.puts if is_lazy(k.split("/")[-1]))

    counting.puts.clear()
    delta = asyncio.run(publish_direct(second, counting, state.kv, state.relational))
    expected = _delta(first, second)
    version = delta.version
    assert sorted(counting.puts) == sorted(package_key(version, n) for n in expected)
    assert delta.blobs_uploaded == len(expected) and delta.blobs_reused == len(second) - len(
        expected
    )
    assert delta.bytes_uploaded == sum(len(second[n]) for n in expected)
    assert delta.bytes_reused == sum(len(b) for n, b in second.items() if n not in expected)
    assert delta.blobs_uploaded * 4 < len(second)  # the shared partition is untouched
    assert delta.bytes_uploaded * 4 < delta.bytes_reused
    assert "already there" in delta.blob_summary()

    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) == version
    _serves(state, version)
    _serves(state, full.version)  # the old version is intact (rollback material)
    answer = asyncio.run(
        KnowledgeService(kv=state.kv, blobs=state.blobs).query(
            QueryRequest(query="bombas hidráulicas", tenant="acme")
        )
    )
    assert answer.results and answer.results[0].doc_id == "acme.n1"


def test_an_interrupted_delta_publish_resumes(versions: list[Files], tmp_path: Path) -> None:
    first, second = versions[0], versions[1]
    state2 = LocalState(tmp_path / "s2")
    before = asyncio.run(publish_direct(first, state2.blobs, state2.kv, state2.relational))
    counting = CountingBlobs(state2, fail_at=2)
    target = PublishTarget("local-test", counting, state2.kv, state2.relational)
    journal = FileJournal(tmp_path / "journal")
    with pytest.raises(PublishError):
        asyncio.run(publish(second, target, journal))
    assert asyncio.run(state2.kv.get(ACTIVE_VERSION_KEY)) == before.version
    assert len(counting.puts) == 1  # one upload went through, then the connection dropped
    report = asyncio.run(publish(second, target, FileJournal(tmp_path / "journal")))
    expected = _delta(first, second)
    assert report.activated and len(counting.puts) == len(expected)  # none uploaded twice
    assert sorted(counting.puts) == sorted(package_key(report.version, n) for n in expected)
    assert report.blobs_uploaded == len(expected) - 1  # the first one was journaled
    _serves(state2, report.version)
    again = asyncio.run(publish(second, target, FileJournal(tmp_path / "journal")))
    assert again.nothing_to_do


def test_a_reused_blob_that_vanished_fails_verification_and_is_uploaded_next(
    versions: list[Files], tmp_path: Path
) -> None:
    first, second = versions[0], versions[1]
    state = LocalState(tmp_path / "s")
    asyncio.run(publish_direct(first, state.blobs, state.kv, state.relational))
    shared = sorted(n for n in second if is_lazy(n) and n in first)[0]
    key = package_key("any", shared)
    counting = CountingBlobs(state, absent=key)  # says "present", then the object is gone
    target = PublishTarget("local-test", counting, state.kv, state.relational)
    journal = FileJournal(tmp_path / "journal")
    with pytest.raises(PublishError) as info:
        asyncio.run(publish(second, target, journal))
    assert isinstance(info.value.cause, IntegrityError) and shared in info.value.message
    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) != info.value.version

    report = asyncio.run(publish(second, target, journal))
    assert report.activated and counting.puts[-1] == key and report.ran[0] == blob_step(shared)
    _serves(state, report.version)


def test_a_package_of_the_per_version_layout_still_loads_and_rolls_back(
    versions: list[Files], tmp_path: Path
) -> None:
    """Published before shared objects: every file under packages/<version>/. It serves, a
    new version publishes beside it in the new layout, and a rollback returns to it."""
    first, second = versions[0], versions[1]
    state = LocalState(tmp_path / "s")
    old = asyncio.run(publish_direct(first, state.blobs, state.kv, activate_now=False)).version
    for key in asyncio.run(state.blobs.list_keys(OBJECTS_PREFIX)):  # move them to the old place
        name = key.removeprefix(OBJECTS_PREFIX)
        asyncio.run(
            state.blobs.put(legacy_key(old, name), asyncio.run(state.blobs.get(key)) or b"")
        )
        asyncio.run(state.blobs.delete(key))
    assert not asyncio.run(state.blobs.list_keys(OBJECTS_PREFIX))
    asyncio.run(state.kv.put(ACTIVE_VERSION_KEY, old))
    _serves(state, old)

    new = asyncio.run(publish_direct(second, state.blobs, state.kv, state.relational))
    assert new.blobs_reused == 0  # nothing was at the shared keys yet
    _serves(state, new.version)
    assert asyncio.run(rollback(state.kv, state.blobs)) == (old, new.version)
    assert asyncio.run(state.blobs.get(package_key(old, MANIFEST_NAME))) is not None
