"""``router.ops.gc``: never delete what a kept version references; drop the rest."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from kr.activation import rollback
from router.adapters.local.state import LocalState
from router.errors import ConfigError
from router.ops.gc import GcError, collect, plan_gc
from router.ops.publish import publish_direct
from router.package.version.fetch import fetch_package_files
from router.package.version.layout import (
    OBJECTS_PREFIX,
    PACKAGES_PREFIX,
    package_key,
    version_prefix,
)
from router.package.version.manifest import MANIFEST_NAME
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY
from router.service import KnowledgeService, package_getter
from tests.ops.conftest import Files


def _publish_all(state: LocalState, versions: list[Files]) -> list[str]:
    return [
        asyncio.run(publish_direct(files, state.blobs, state.kv, state.relational)).version
        for files in versions
    ]


def _keys(state: LocalState) -> list[str]:
    return asyncio.run(state.blobs.list_keys(PACKAGES_PREFIX))


def _whole(state: LocalState, version: str) -> dict[str, bytes]:
    """Every file of ``version``, read and verified (lazy ones against their names)."""
    files = asyncio.run(fetch_package_files(package_getter(state.blobs, version), version))
    asyncio.run(KnowledgeService(kv=state.kv, blobs=state.blobs).load(version))
    return files


def test_gc_keeps_active_previous_and_recent_and_drops_the_rest(
    versions: list[Files], tmp_path: Path
) -> None:
    state = LocalState(tmp_path / "s")
    v1, v2, v3 = _publish_all(state, versions)
    before = set(_keys(state))
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) == v2

    plan = asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=0))
    assert (plan.kept, plan.dropped, plan.rows) == ([v3, v2], [v1], [v1])
    only_v1 = {package_key(v1, n) for n in versions[0]} - {
        package_key(v, n) for v, files in ((v2, versions[1]), (v3, versions[2])) for n in files
    }
    assert set(plan.delete_keys) == only_v1 and only_v1  # its own files and its lone objects
    assert plan.objects_kept > 10

    asyncio.run(collect(plan, state.blobs, state.relational))
    assert set(_keys(state)) == before - only_v1
    assert not (state.root / "r2" / version_prefix(v1)).exists()
    assert state.relational.count("documents", v1) == 0
    assert asyncio.run(state.relational.versions()) == [v3, v2]
    for version, files in ((v2, versions[1]), (v3, versions[2])):
        assert _whole(state, version) == files  # every kept file, byte for byte
        assert state.relational.count("documents", version) == 123
    assert asyncio.run(rollback(state.kv, state.blobs)) == (v2, v3)  # rollback still works
    assert asyncio.run(state.kv.get(ACTIVE_VERSION_KEY)) == v2

    again = asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=0))
    assert not again.dropped and not again.delete_keys  # nothing left to collect


def test_keep_n_keeps_the_most_recent_others_and_dry_run_deletes_nothing(
    versions: list[Files], tmp_path: Path
) -> None:
    state = LocalState(tmp_path / "s")
    v1, v2, v3 = _publish_all(state, versions)
    asyncio.run(state.kv.put(PREVIOUS_VERSION_KEY, v1))  # a rollback target older than v2
    plan = asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=0))
    assert (plan.kept, plan.dropped) == ([v3, v1], [v2])
    assert all(not k.startswith(OBJECTS_PREFIX) or k.endswith(".bin") for k in plan.delete_keys)
    assert asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=1)).dropped == []
    with pytest.raises(ConfigError):
        asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=-1))
    assert len(_keys(state)) == len(set(_keys(state)))  # planning deleted nothing


def test_a_damaged_kept_version_stops_the_collection(versions: list[Files], tmp_path: Path) -> None:
    state = LocalState(tmp_path / "s")
    v1, v2, _ = _publish_all(state, versions)
    asyncio.run(state.blobs.delete(package_key(v2, "shared.partition.bin")))
    before = _keys(state)
    with pytest.raises(GcError, match=f"kept version {v2}"):
        asyncio.run(plan_gc(state.blobs, state.kv, state.relational, keep=0))
    assert _keys(state) == before
    assert asyncio.run(state.blobs.get(package_key(v1, MANIFEST_NAME))) is not None
