"""Each caller's share of serving time: a busy caller waits or gets 429, the others do not."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kr.commands.serve import local_shares
from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.api.fair_share import CallerShares, RateLimitedError, ShareConfig, share_config_from
from router.auth import AuthConfig, Authenticator
from router.errors import ConfigError
from router.service import KnowledgeService
from tests.common import ALFA, BETA


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_caller_within_its_burst_is_admitted_at_once_and_pays_its_debt_over_time() -> None:
    clock = Clock()
    shares = CallerShares(ShareConfig(ms_per_s=100, burst_ms=500, max_wait_s=0), clock)
    asyncio.run(shares.admit("a"))
    shares.settle("a", 500)
    asyncio.run(shares.admit("a"))  # debt 500 = the burst: still admitted
    shares.settle("a", 300)
    with pytest.raises(RateLimitedError) as refused:
        asyncio.run(shares.admit("a"))  # 800 > 500, and no wait is allowed
    assert refused.value.http_status == 429
    assert refused.value.retry_after_s == pytest.approx(3.0)  # 300 ms over at 100 ms a second
    asyncio.run(shares.admit("b"))  # another caller is untouched
    clock.now += 3.0
    assert shares.debt_ms("a") == pytest.approx(500)
    asyncio.run(shares.admit("a"))


def test_a_caller_over_its_burst_waits_for_its_debt_when_the_wait_is_short() -> None:
    shares = CallerShares(ShareConfig(ms_per_s=1000, burst_ms=0, max_wait_s=1.0))

    async def second_request() -> float:
        await shares.admit("a")
        shares.settle("a", 150)
        started = asyncio.get_running_loop().time()
        await shares.admit("a")
        return asyncio.get_running_loop().time() - started

    waited = asyncio.run(second_request())
    assert waited >= 0.1  # 150 ms of debt at 1,000 ms/s: asleep about 0.15 s, not refused


def test_open_requests_of_one_caller_are_bounded() -> None:
    shares = CallerShares(ShareConfig(max_in_flight=2))

    async def three_at_once() -> None:
        await shares.admit("a")
        await shares.admit("a")
        with pytest.raises(RateLimitedError):
            await shares.admit("a")
        await shares.admit("b")
        shares.settle("a", 1)
        await shares.admit("a")

    asyncio.run(three_at_once())


def test_the_share_config_checks_itself_and_reads_its_names() -> None:
    with pytest.raises(ConfigError):
        ShareConfig(ms_per_s=-1)
    with pytest.raises(ConfigError):
        share_config_from({"KR_CALLER_MS_PER_S": "fast"}.get)
    config = share_config_from({"KR_CALLER_MS_PER_S": "0", "KR_CALLER_BURST_MS": "50"}.get)
    assert not config.enabled and config.burst_ms == 50
    assert local_shares(ms_per_s=40).config.ms_per_s == 40
    off = CallerShares(ShareConfig(ms_per_s=0))
    for _ in range(10):
        asyncio.run(off.admit("a"))
        off.settle("a", 10_000)


# --- through the API --------------------------------------------------------------------------


def tight_client(service: KnowledgeService, keys: SqliteKeyStore, **app: Any) -> TestClient:
    """Any request puts its caller over: one request, then 429 until its debt is paid."""
    shares = CallerShares(ShareConfig(ms_per_s=0.001, burst_ms=0, max_wait_s=0))
    auth = Authenticator(AuthConfig(allow_anonymous=True), keys)
    return TestClient(create_app(service, auth=auth, shares=shares, **app))


def ask(client: TestClient, key: str | None = None, address: str | None = None) -> Any:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    if address:
        headers["x-client-ip"] = address
    return client.post("/v1/query", json={"query": "Cartão Verde andaime"}, headers=headers)


@pytest.fixture
def keys(state: LocalState) -> SqliteKeyStore:
    return SqliteKeyStore(state.relational.path)


def test_a_caller_over_its_share_gets_429_with_retry_after_and_others_are_served(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    client = tight_client(service, keys)
    alfa, _ = keys.create(ALFA)
    beta, _ = keys.create(BETA)
    assert ask(client, alfa).status_code == 200
    refused = ask(client, alfa)
    assert refused.status_code == 429
    assert refused.json()["error"]["code"] == "rate_limited"
    assert int(refused.headers["retry-after"]) >= 1
    assert ask(client, beta).status_code == 200  # another credential has its own share
    assert ask(client).status_code == 200  # and so does an anonymous caller


def test_anonymous_callers_are_told_apart_only_by_a_header_the_platform_sets(
    service: KnowledgeService, keys: SqliteKeyStore
) -> None:
    behind_proxy = tight_client(service, keys, client_ip_header="x-client-ip")
    assert ask(behind_proxy, address="203.0.113.1").status_code == 200
    assert ask(behind_proxy, address="203.0.113.1").status_code == 429
    assert ask(behind_proxy, address="203.0.113.2").status_code == 200
    direct = tight_client(service, keys)  # no trusted header: a forged one changes nothing
    assert ask(direct, address="203.0.113.1").status_code == 200
    assert ask(direct, address="203.0.113.9").status_code == 429


def test_the_openapi_document_lists_429(service: KnowledgeService, keys: SqliteKeyStore) -> None:
    spec = tight_client(service, keys).get("/openapi.json").json()
    responses = spec["paths"]["/v1/query"]["post"]["responses"]
    assert "429" in responses


def test_a_caller_sending_one_request_at_a_time_is_slowed_never_refused() -> None:
    shares = CallerShares(ShareConfig(ms_per_s=100, burst_ms=0, max_wait_s=0.01))
    for _ in range(5):
        asyncio.run(shares.admit("a"))  # waits at most 10 ms (its sleep is real)
        shares.settle("a", 5_000)  # a slow first request (package load) is charged 1 ms
    assert shares.debt_ms("a") <= 5
