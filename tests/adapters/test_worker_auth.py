"""The Worker's credentials and CORS, read from ``env`` at request time: keys from D1, anonymous
access off unless ``KR_ALLOW_ANONYMOUS=on``, ``KR_CORS_ORIGINS``, the bounded key cache."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.adapters.cloudflare.service import (
    authenticator_from_env,
    bindings,
    cors_from_env,
    reset_service,
    service_from_env,
)
from router.api.app import create_app
from router.auth.api_keys import KEY_INSERT, KEY_REVOKE, new_key
from router.compile.build import BuildResult
from router.ops.publish import publish_package
from tests.adapters.cloudflare_fakes import FakeD1, FakeKV, FakeR2, fake_env
from tests.common import ALFA

QUESTION = {"query": "Cartão Verde andaime"}


@pytest.fixture(autouse=True)
def _fresh_isolate() -> Iterator[None]:
    reset_service()
    yield
    reset_service()


def shared_d1() -> FakeD1:
    """A fake D1 usable from the test client's thread (the app runs in another thread)."""
    db = FakeD1()
    shared = sqlite3.connect(":memory:", check_same_thread=False)
    db.connection.backup(shared)
    shared.row_factory = sqlite3.Row
    db.connection = shared
    return db


def worker_client(built: BuildResult, **variables: str) -> tuple[TestClient, FakeD1]:
    """The app as src/entry.py builds it, over fake bindings holding the sample knowledge."""
    db = shared_d1()
    env = fake_env(KNOWLEDGE_KV=FakeKV(), KNOWLEDGE_BUCKET=FakeR2(), KNOWLEDGE_DB=db, **variables)
    cf = bindings(env)
    assert cf.blobs and cf.kv and cf.relational
    asyncio.run(publish_package(built.package.files(), cf.blobs, cf.kv, cf.relational))
    app = create_app(
        lambda request: service_from_env(request.scope["env"]),
        cors=lambda scope: cors_from_env(scope["env"]),
        auth=lambda request: authenticator_from_env(request.scope["env"]),
    )

    async def with_env(scope: dict[str, Any], receive: Any, send: Any) -> None:
        await app({**scope, "env": env}, receive, send)

    return TestClient(with_env), db


def add_key(db: FakeD1, tenant: str) -> tuple[str, str]:
    plaintext, record = new_key(tenant, "2026-06-15T00:00:00Z")
    db.connection.execute(
        KEY_INSERT, (record.key_id, record.tenant, record.key_hash, record.created_at)
    )
    db.connection.commit()
    return plaintext, record.key_id


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_the_worker_refuses_anonymous_callers_by_default(built: BuildResult) -> None:
    client, db = worker_client(built)
    reply = client.post("/v1/query", json=QUESTION)
    assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")
    key, _ = add_key(db, ALFA)
    mine = client.post("/v1/query", json=QUESTION, headers=bearer(key))
    assert mine.status_code == 200
    assert mine.json()["results"][0]["doc_id"] == "construtoraAlfa.scaffolding"


def test_anonymous_access_is_a_worker_variable(built: BuildResult) -> None:
    client, _ = worker_client(built, KR_ALLOW_ANONYMOUS="on")
    reply = client.post("/v1/query", json=QUESTION)
    assert reply.status_code == 200
    assert {r["tenant"] for r in reply.json()["results"]} <= {"*"}
    assert client.post("/v1/query", json={**QUESTION, "tenant": ALFA}).status_code == 401


def test_a_revoked_key_works_at_most_for_the_key_cache_ttl(built: BuildResult) -> None:
    client, db = worker_client(built, KR_KEY_CACHE_TTL_S="0")
    key, key_id = add_key(db, ALFA)
    assert client.post("/v1/query", json=QUESTION, headers=bearer(key)).status_code == 200
    db.connection.execute(KEY_REVOKE, ("2026-06-15T01:00:00Z", key_id))
    db.connection.commit()
    assert client.post("/v1/query", json=QUESTION, headers=bearer(key)).status_code == 401


def test_valid_keys_are_cached_per_isolate_for_30_s(built: BuildResult) -> None:
    """The default bound: an isolate that saw a key valid trusts it up to 30 s (the revocation
    delay); the expiry itself is tested with a clock in tests/api/test_credentials.py."""
    client, db = worker_client(built)
    key, key_id = add_key(db, ALFA)
    assert client.post("/v1/query", json=QUESTION, headers=bearer(key)).status_code == 200
    db.connection.execute(KEY_REVOKE, ("2026-06-15T01:00:00Z", key_id))
    assert client.post("/v1/query", json=QUESTION, headers=bearer(key)).status_code == 200
    assert authenticator_from_env(fake_env()).config.key_cache_ttl_s == 30
    reset_service()  # a new isolate reads D1 again
    assert client.post("/v1/query", json=QUESTION, headers=bearer(key)).status_code == 401


def test_cors_origins_are_a_worker_variable(built: BuildResult) -> None:
    client, _ = worker_client(built, KR_ALLOW_ANONYMOUS="on", KR_CORS_ORIGINS="https://app.example")
    allowed = client.post("/v1/query", json=QUESTION, headers={"Origin": "https://app.example"})
    assert allowed.headers["access-control-allow-origin"] == "https://app.example"
    assert allowed.headers["access-control-allow-credentials"] == "true"
    other = client.post("/v1/query", json=QUESTION, headers={"Origin": "https://evil.example"})
    assert "access-control-allow-origin" not in other.headers
