"""``GET /v1/gaps``: the admin token sees every tenant's questions, a tenant's credential its own
only, no credential nothing (401), anonymous access on or off; and the Worker's scheduled
handler deletes the logged questions past the retention."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.adapters.cloudflare.service import bindings, retention_from_env
from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import AuthConfig, Authenticator
from router.ops.query_log import QueryRecorder
from router.ops.questions import ALL_TENANTS, LoggedQuestion
from router.service import KnowledgeService
from tests.adapters.cloudflare_fakes import FakeD1
from tests.common import ALFA, BETA

ADMIN = "g" * 40
UNANSWERED = "Como faço a declaração do imposto de renda?"


def _bearer(credential: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {credential}"}


@pytest.mark.parametrize("anonymous", [True, False])
def test_admin_sees_all_a_tenant_its_own_and_anonymous_nothing(
    state: LocalState, anonymous: bool
) -> None:
    keys = SqliteKeyStore(state.relational.path)
    alfa, beta = keys.create(ALFA)[0], keys.create(BETA)[0]
    recorder = QueryRecorder(state.query_log, questions=state.question_log)
    service = KnowledgeService(
        kv=state.kv, blobs=state.blobs, recorder=recorder, question_log=state.question_log
    )
    auth = Authenticator(AuthConfig(allow_anonymous=True, admin_token=ADMIN), keys)
    client = TestClient(create_app(service, auth=auth))
    for headers in ({}, _bearer(alfa), _bearer(alfa), _bearer(beta)):
        assert client.post("/v1/query", json={"query": UNANSWERED}, headers=headers).is_success
    if not anonymous:
        auth = Authenticator(AuthConfig(allow_anonymous=False, admin_token=ADMIN), keys)
        client = TestClient(create_app(service, auth=auth))

    everyone = client.get("/v1/gaps", headers=_bearer(ADMIN)).json()
    assert everyone["scope"] == "all" and everyone["questions"] == 4
    assert sorted(str(g["tenant"]) for g in everyone["groups"]) == sorted(["None", ALFA, BETA])
    own = client.get("/v1/gaps", headers=_bearer(alfa)).json()
    assert own["scope"] == ALFA and own["questions"] == 2
    assert [g["tenant"] for g in own["groups"]] == [ALFA] and own["groups"][0]["count"] == 2
    assert all(q["tenant"] == ALFA for g in own["groups"] for q in g["questions"])
    narrowed = client.get(f"/v1/gaps?tenant={BETA}", headers=_bearer(ADMIN)).json()
    assert narrowed["questions"] == 1

    other = client.get(f"/v1/gaps?tenant={BETA}", headers=_bearer(alfa))
    assert other.status_code == 403 and other.json()["error"]["code"] == "tenant_mismatch"
    for headers in ({}, _bearer("a" * 40), _bearer(ADMIN + "x"), {"Authorization": ADMIN}):
        refused = client.get("/v1/gaps", headers=headers)
        assert refused.status_code == 401, headers
    bad = client.get("/v1/gaps?since=yesterday-ish", headers=_bearer(ADMIN))
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_request"
    assert client.get("/v1/gaps?limit=0", headers=_bearer(ADMIN)).status_code == 400
    assert "/v1/gaps" not in client.get("/openapi.json").json()["paths"]


def test_without_a_question_log_gaps_is_a_503(state: LocalState) -> None:
    service = KnowledgeService(kv=state.kv, blobs=state.blobs)
    auth = Authenticator(AuthConfig(admin_token=ADMIN))
    reply = TestClient(create_app(service, auth=auth)).get("/v1/gaps", headers=_bearer(ADMIN))
    assert reply.status_code == 503


def test_the_scheduled_handler_deletes_questions_older_than_the_retention() -> None:
    now = time.time()
    env: Any = type("Env", (), {})()
    env.KNOWLEDGE_DB = FakeD1()
    env.KR_LOG_RETENTION_DAYS = "7"
    log = bindings(env).question_log
    assert log is not None

    def question(days_ago: float) -> LoggedQuestion:
        return LoggedQuestion(
            at=now - days_ago * 86400,
            tenant=None,
            caller=None,
            question=f"{days_ago} dias",
            terms=("dia",),
            outcome="nothing",
            level="NONE",
        )

    asyncio.run(log.record([question(30), question(8), question(6), question(0)]))
    report = asyncio.run(retention_from_env(env, now=now))
    assert report.retention_days == 7 and report.questions_deleted == 2 and report.error is None
    left = asyncio.run(log.read(0, now + 1, ALL_TENANTS, 0, 10))
    assert [q.question for q in left] == ["6 dias", "0 dias"]
