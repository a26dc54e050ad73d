"""The HTTP API: query, health, OpenAPI, CORS and JSON errors for bad input."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.api.cors import CorsPolicy, cors_policy_from
from router.errors import ConfigError
from router.service import KnowledgeService


@pytest.fixture
def client(service: KnowledgeService) -> TestClient:
    return TestClient(create_app(service))


def test_query_returns_a_query_response(client: TestClient) -> None:
    reply = client.post("/v1/query", json={"query": "O que é APR?"})
    assert reply.status_code == 200
    body = reply.json()
    assert body["results"][0]["doc_id"] == "apr"
    assert body["citations"][0]["doc_id"] == "apr"
    assert body["knowledge_version"].startswith("kv-")
    assert body["confidence_level"] == "HIGH"


def test_health_names_the_active_version(client: TestClient) -> None:
    body = client.get("/v1/health").json()
    assert body["status"] == "ok" and body["knowledge_version"].startswith("kv-")


def test_openapi_lists_the_query_route(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert "/v1/query" in spec["paths"]
    assert "QueryResponse" in spec["components"]["schemas"]


def test_no_cross_origin_access_by_default(client: TestClient) -> None:
    reply = client.post("/v1/query", json={"query": "APR"}, headers={"Origin": "https://a.example"})
    assert reply.status_code == 200 and "access-control-allow-origin" not in reply.headers


def test_cors_preflight_allows_a_configured_origin_with_credentials(
    service: KnowledgeService,
) -> None:
    client = TestClient(create_app(service, cors=CorsPolicy(("https://app.example",))))
    preflight = {
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization",
    }
    reply = client.options("/v1/query", headers={"Origin": "https://app.example", **preflight})
    assert reply.status_code == 200
    assert reply.headers["access-control-allow-origin"] == "https://app.example"
    assert reply.headers["access-control-allow-credentials"] == "true"
    assert "authorization" in reply.headers["access-control-allow-headers"].lower()
    other = client.options("/v1/query", headers={"Origin": "https://evil.example", **preflight})
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers


def test_cors_any_origin_never_allows_credentials(service: KnowledgeService) -> None:
    client = TestClient(create_app(service, cors=cors_policy_from("*")))
    reply = client.post("/v1/query", json={"query": "APR"}, headers={"Origin": "https://a.example"})
    assert reply.headers["access-control-allow-origin"] == "*"
    assert "access-control-allow-credentials" not in reply.headers
    with pytest.raises(ConfigError):
        cors_policy_from("*, https://app.example")
    with pytest.raises(ConfigError):
        cors_policy_from("https://app.example/path")


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"query": ""},
        {"query": "   "},
        {"query": "x" * 5000},
        {"query": "ok", "top_k": 0},
        {"query": "ok", "date": "31/12/2026"},
        {"query": "ok", "tenant": "../etc"},
        {"query": "ok", "unknown_field": 1},
        {"query": 42},
    ],
)
def test_bad_requests_get_a_4xx_json_error(client: TestClient, payload: dict) -> None:  # type: ignore[type-arg]
    reply = client.post("/v1/query", json=payload)
    assert 400 <= reply.status_code < 500
    error = reply.json()["error"]
    assert error["code"] == "invalid_request" and error["message"]


def test_malformed_json_and_unknown_routes(client: TestClient) -> None:
    reply = client.post("/v1/query", content=b"{nope", headers={"content-type": "application/json"})
    assert reply.status_code == 422 and reply.json()["error"]["code"] == "invalid_request"
    missing = client.get("/v1/nowhere")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_no_active_version_is_a_503_json_error(tmp_path: Path) -> None:
    empty = LocalState(tmp_path / "empty")
    client = TestClient(create_app(KnowledgeService(kv=empty.kv, blobs=empty.blobs)))
    reply = client.post("/v1/query", json={"query": "O que é APR?"})
    assert reply.status_code == 503
    assert reply.json()["error"]["code"] == "no_active_version"
