"""A key store that cannot answer (the local D1 file locked, truncated, garbage, a folder, its
table missing) gives keyed requests a quick 503 with ``Retry-After`` — never a 500, never
"authenticated", never served as anonymous — while anonymous requests are served, and keyed
requests are served again once the store is repaired."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.keys import READ_TIMEOUT_S, SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import ApiKey, AuthConfig, Authenticator
from router.auth.authenticator import KEY_STORE_RETRY_S
from router.service import KnowledgeService
from tests.common import ALFA
from tests.faults.common import DAMAGES, Clock, damaged

QUERY = {"query": "Cartão Verde andaime"}


class CountedKeys:
    """The key store, counting the lookups that reach it."""

    def __init__(self, store: SqliteKeyStore) -> None:
        self.store = store
        self.finds = 0

    async def find(self, key_id: str) -> ApiKey | None:
        self.finds += 1
        return await self.store.find(key_id)


def _ask(client: TestClient, key: str | None = None) -> tuple[int, dict, dict, float]:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    started = time.monotonic()
    reply = client.post("/v1/query", json=QUERY, headers=headers)
    return reply.status_code, reply.json(), dict(reply.headers), time.monotonic() - started


def _tenants(body: dict) -> set[str]:
    return {result["tenant"] for result in body["results"]}


def _client(service: KnowledgeService, keys: CountedKeys, clock: Clock) -> TestClient:
    return TestClient(create_app(service, auth=Authenticator(AuthConfig(), keys, clock=clock)))


@pytest.mark.parametrize("how", ["locked", *DAMAGES])
def test_a_key_store_that_cannot_answer_is_a_quick_503_until_it_is_repaired(
    state: LocalState, service: KnowledgeService, how: str
) -> None:
    d1 = state.relational.path
    keys = CountedKeys(SqliteKeyStore(d1))
    key = keys.store.create(ALFA)[0]
    clock = Clock(1_800_000_000.0)
    client = _client(service, keys, clock)
    assert ALFA in _tenants(_ask(client, key)[1])
    with damaged(d1, how):
        status, body, headers, took = _ask(client, key)
        _check_unavailable(status, body, headers)
        assert took < READ_TIMEOUT_S + 1.5  # bounded: one lock timeout at most, not 5 s
        before = keys.finds
        for _ in range(3):  # within KEY_STORE_RETRY_S: answered at once, the store not asked
            status, body, headers, took = _ask(client, key)
            _check_unavailable(status, body, headers)
            assert took < 0.5
        assert keys.finds == before
        anonymous = _ask(client)
        assert anonymous[0] == 200 and _tenants(anonymous[1]) <= {"*"}
        assert client.get("/v1/health").status_code == 200
        clock.now += KEY_STORE_RETRY_S  # asked again, still broken: still a 503
        _check_unavailable(*_ask(client, key)[:3])
        assert keys.finds == before + 1
    clock.now += KEY_STORE_RETRY_S  # repaired: served as the key's tenant again
    status, body, _, _ = _ask(client, key)
    assert status == 200 and ALFA in _tenants(body)


def test_a_key_store_without_its_table_is_a_503_too(
    state: LocalState, service: KnowledgeService, tmp_path: Path
) -> None:
    """A D1 file whose migrations were never applied (or a fresh, empty file)."""
    keys = CountedKeys(SqliteKeyStore(state.relational.path))
    key = keys.store.create(ALFA)[0]
    clock = Clock(1_800_000_000.0)
    client = _client(service, keys, clock)
    keys.store.path = tmp_path / "empty.sqlite"
    _check_unavailable(*_ask(client, key)[:3])
    keys.store.path = state.relational.path
    clock.now += KEY_STORE_RETRY_S
    status, body, _, _ = _ask(client, key)
    assert status == 200 and ALFA in _tenants(body)


def _check_unavailable(status: int, body: dict, headers: dict) -> None:
    assert status == 503, body
    assert body["error"]["code"] == "key_store_unavailable"
    assert set(body["error"]) == {"code", "message"}
    assert 1 <= int(headers["retry-after"]) <= KEY_STORE_RETRY_S + 1
