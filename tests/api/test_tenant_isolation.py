"""No credential ever receives another tenant's document: every tenant-only document, every
golden query, anonymous and each tenant's key, in results, citations, answer, context, trace and
through the query cache (the owner asks first, so its answer is cached when the others ask)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import AuthConfig, Authenticator
from router.service import KnowledgeService
from router.stages.cache import QueryCache
from tests.common import ALFA, BETA, GOLDEN, KNOWLEDGE, TODAY


def _front_matter(path: Path) -> dict[str, str]:
    head = path.read_text(encoding="utf-8").split("---")[1]
    found = {}
    for line in head.splitlines():
        match = re.match(r"^(semanticId|title|tenant):\s*(.+)$", line)
        if match:
            found[match[1]] = match[2].strip().strip('"')
    return found


def tenant_only_documents() -> list[dict[str, str]]:
    docs = [_front_matter(p) for p in sorted(KNOWLEDGE.rglob("*.md"))]
    return [d for d in docs if d.get("tenant") not in (None, "*", "'*'")]


DOCS = tenant_only_documents()


def questions() -> list[str]:
    golden = [json.loads(line)["query"] for line in GOLDEN.read_text().splitlines() if line]
    own = [q for d in DOCS for q in (d["title"], d["semanticId"])]
    return golden + own


def test_the_sample_has_tenant_only_documents_of_both_tenants() -> None:
    assert {d["tenant"] for d in DOCS} == {ALFA, BETA} and len(DOCS) >= 8


def leaks(body: dict[str, Any], query: str, tenant: str | None) -> list[str]:
    """Other tenants' documents this response shows, by id or title, anywhere in it."""
    text = json.dumps(body, ensure_ascii=False).replace(
        json.dumps(query, ensure_ascii=False)[1:-1], ""
    )
    found = [
        f"{d['semanticId']} ({d['tenant']})"
        for d in DOCS
        if d["tenant"] != tenant and (d["semanticId"] in text or d["title"] in text)
    ]
    found += [r["doc_id"] for r in body["results"] if r["tenant"] not in ("*", tenant)]
    return found


@pytest.fixture
def callers(state: LocalState) -> tuple[TestClient, dict[str | None, dict[str, str]]]:
    keys = SqliteKeyStore(state.relational.path)
    service = KnowledgeService(kv=state.kv, blobs=state.blobs, cache=QueryCache(1024, state.kv))
    auth = Authenticator(AuthConfig(allow_anonymous=True), keys)
    headers: dict[str | None, dict[str, str]] = {None: {}}
    for tenant in (ALFA, BETA):
        headers[tenant] = {"Authorization": f"Bearer {keys.create(tenant)[0]}"}
    return TestClient(create_app(service, auth=auth)), headers


def test_no_credential_receives_another_tenants_document(
    callers: tuple[TestClient, dict[str | None, dict[str, str]]],
) -> None:
    client, headers = callers
    order: list[str | None] = [ALFA, BETA, None]
    problems = []
    owned = 0
    for query in questions():
        for tenant in order:
            body = {"query": query, "date": TODAY}
            reply = client.post("/v1/query", json=body, headers=headers[tenant])
            assert reply.status_code == 200, (query, tenant, reply.text)
            found = reply.json()
            owned += any(r["tenant"] == tenant for r in found["results"])
            problems += [f"{tenant}: {query!r} → {leak}" for leak in leaks(found, query, tenant)]
        order = order[1:] + order[:1]  # each caller is first (cache filler) in turn
    assert not problems, "\n".join(problems[:20])
    assert owned >= len(DOCS)  # the tenants do receive their own documents
