"""A knowledge version that cannot be loaded (a missing, corrupt or garbage R2 object) never
gives a 500: the last good version serves — after a restart too, from
``knowledge:previous-version`` —, ``/v1/health`` says which version serves, which one is
active and what failed, the refused version is retried with backoff (never on every request),
and health recovers as soon as the active version loads again or another is activated."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import AuthConfig, Authenticator
from router.compile.build import BuildResult
from router.ops.activation import activate
from router.ops.publish import publish_package
from router.package.version.layout import package_key
from router.ports import PREVIOUS_VERSION_KEY
from router.service import MAX_REFUSED_RETRY_S, REFUSED_RETRY_S, KnowledgeService
from tests.common import ALFA, CountedStore
from tests.faults.common import Clock

APR = {"query": "O que é APR?"}

BREAKS = {
    "corrupt bundle": ("shared.partition.bin", lambda data: data[:-1] + bytes([data[-1] ^ 1])),
    "truncated bundle": ("shared.partition.bin", lambda data: data[: len(data) // 2]),
    "missing bundle": ("shared.partition.bin", None),
    "garbage manifest": ("manifest.json", lambda data: b"\x00{not json" * 50),
    "missing manifest": ("manifest.json", None),
}
"""How an R2 object of the active version is broken: its bytes changed, or the object gone."""


def _break(root: Path, version: str, name: str, change: object) -> bytes:
    """Break one object of ``version`` in the local R2 folder; its original bytes."""
    path = root / "r2" / package_key(version, name)
    original = path.read_bytes()
    if change is None:
        path.unlink()
    else:
        path.write_bytes(change(original))  # type: ignore[operator]
    return original


def _publish_newer(state: LocalState, newer: BuildResult) -> str:
    asyncio.run(publish_package(newer.package.files(), state.blobs, state.kv, state.relational))
    return newer.package.knowledge_version


def _restart(state: LocalState, clock: Clock) -> tuple[KnowledgeService, TestClient, CountedStore]:
    """A fresh process over the state folder: nothing loaded, blob reads counted."""
    blobs = CountedStore[bytes](state.blobs)
    service = KnowledgeService(kv=state.kv, blobs=blobs, clock=clock)
    return service, TestClient(create_app(service)), blobs


@pytest.mark.parametrize("how", list(BREAKS))
def test_a_restart_on_a_broken_active_version_serves_the_previous_one_until_repaired(
    state: LocalState, built: BuildResult, newer: BuildResult, how: str
) -> None:
    good = built.package.knowledge_version
    active = _publish_newer(state, newer)
    assert asyncio.run(state.kv.get(PREVIOUS_VERSION_KEY)) == good
    name, change = BREAKS[how]
    original = _break(state.root, active, name, change)
    clock = Clock()
    _, client, blobs = _restart(state, clock)

    answer = client.post("/v1/query", json=APR)
    assert answer.status_code == 200, answer.json()
    assert answer.json()["knowledge_version"] == good
    assert answer.json()["results"][0]["doc_id"] == "apr"
    health = client.get("/v1/health")
    assert health.status_code == 200
    assert health.json()["status"] == "degraded"
    assert health.json()["knowledge_version"] == good and health.json()["active_version"] == active
    problem = health.json()["last_load_error"]
    assert active in problem and f"serving {good}" in problem

    manifest = package_key(active, "manifest.json")
    tried = blobs.reads.count(manifest)
    for _ in range(3):  # backoff: the broken version is not read again on every request
        assert client.post("/v1/query", json=APR).json()["knowledge_version"] == good
        client.get("/v1/health")
    assert blobs.reads.count(manifest) == tried
    clock.now += REFUSED_RETRY_S + 1  # retried, still broken: the wait doubles
    assert client.post("/v1/query", json=APR).json()["knowledge_version"] == good
    assert blobs.reads.count(manifest) == tried + 1
    clock.now += REFUSED_RETRY_S + 1
    client.get("/v1/health")
    assert blobs.reads.count(manifest) == tried + 1

    (state.root / "r2" / package_key(active, name)).write_bytes(original)  # repaired
    clock.now += MAX_REFUSED_RETRY_S
    health = client.get("/v1/health").json()
    assert health["status"] == "ok" and health["last_load_error"] is None
    assert health["knowledge_version"] == active == health["active_version"]
    assert client.post("/v1/query", json=APR).json()["knowledge_version"] == active


def test_with_the_previous_version_broken_too_it_is_a_503_until_repaired(
    state: LocalState, built: BuildResult, newer: BuildResult
) -> None:
    good = built.package.knowledge_version
    active = _publish_newer(state, newer)
    broken = [_break(state.root, v, "shared.partition.bin", None) for v in (active, good)]
    clock = Clock()
    _, client, blobs = _restart(state, clock)
    for response in (client.post("/v1/query", json=APR), client.get("/v1/health")):
        assert response.status_code == 503
        assert response.json()["error"]["code"] == "package_format"
        assert active in response.json()["error"]["message"]
    reads = len(blobs.reads)
    for _ in range(3):  # not tried again on every request either
        assert client.post("/v1/query", json=APR).status_code == 503
    assert len(blobs.reads) == reads
    (state.root / "r2" / package_key(good, "shared.partition.bin")).write_bytes(broken[1])
    clock.now += REFUSED_RETRY_S + 1
    health = client.get("/v1/health").json()
    assert health["knowledge_version"] == good and health["status"] == "degraded"


def test_a_rollback_while_a_version_is_refused_makes_health_ok_again(
    state: LocalState, built: BuildResult, newer: BuildResult
) -> None:
    """Serving A, B activated and refused (degraded); rolling back to A: health says ok at once,
    not the old error until a restart."""
    good = built.package.knowledge_version
    clock = Clock()
    _, client, _ = _restart(state, clock)
    assert client.get("/v1/health").json()["status"] == "ok"
    active = _publish_newer(state, newer)
    _break(state.root, active, "shared.partition.bin", None)
    health = client.get("/v1/health").json()
    assert health["status"] == "degraded" and health["knowledge_version"] == good
    asyncio.run(activate(state.kv, good))  # the rollback
    health = client.get("/v1/health").json()
    assert health["status"] == "ok" and health["last_load_error"] is None
    assert health["active_version"] == health["knowledge_version"] == good


@pytest.mark.parametrize("how", ["corrupt", "missing"])
def test_a_broken_lazily_read_object_fails_only_its_request_with_a_json_503(
    state: LocalState, how: str
) -> None:
    """Texts and a tenant's partition are read at query time: a broken one fails the request
    that needs it with a JSON 503 (never a 500); the package stays loaded, health stays 200,
    and other callers are served."""
    keys = SqliteKeyStore(state.relational.path)
    key = keys.create(ALFA)[0]
    service = KnowledgeService(kv=state.kv, blobs=state.blobs)
    auth = Authenticator(AuthConfig(), keys)
    client = TestClient(create_app(service, auth=auth), raise_server_exceptions=False)
    assert client.post("/v1/query", json=APR).status_code == 200  # the shared partition loaded
    version = asyncio.run(service.package()).version
    tenant_bundles = [
        path for path in (state.root / "r2" / "packages" / version).glob("t-*.partition.bin")
    ]
    texts = sorted((state.root / "r2" / "packages" / "_objects").glob("shared.texts-*.bin"))
    assert tenant_bundles and texts
    for path in [*tenant_bundles, *texts]:
        if how == "missing":
            path.unlink()
        else:
            path.write_bytes(path.read_bytes()[::-1])
    asked = [
        client.post("/v1/query", json={"query": "Cartão Verde andaime"}),
        client.post(
            "/v1/query",
            json={"query": "Cartão Verde andaime"},
            headers={"Authorization": f"Bearer {key}"},
        ),
    ]
    for reply in asked:
        assert reply.status_code in (200, 503), reply.text
        if reply.status_code == 503:
            assert set(reply.json()["error"]) == {"code", "message"}
    assert asked[1].status_code == 503  # the tenant's partition cannot be read
    assert asked[1].json()["error"]["code"] in ("package_format", "package_integrity")
    health = client.get("/v1/health")
    assert health.status_code == 200 and health.json()["knowledge_version"] == version
