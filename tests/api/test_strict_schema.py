"""Strict requests: no coercion, bounded fields and body (413 before parsing), the real error
shape in OpenAPI, ``Allow`` on 405."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from router.api.app import create_app
from router.api.limits import MAX_BODY_BYTES
from router.contract import MAX_PROFILE_BYTES, MAX_PROFILE_KEYS
from router.service import KnowledgeService


@pytest.fixture
def client(service: KnowledgeService) -> TestClient:
    return TestClient(create_app(service))


@pytest.mark.parametrize(
    "fields",
    [
        {"top_k": "5"},
        {"top_k": True},
        {"top_k": 5.0},
        {"include_deprecated": "true"},
        {"include_deprecated": 1},
        {"generate": "yes"},
        {"page": 12},
        {"conversation_id": 7},
        {"date": 1781481600},
        {"date": "2026-06-15T00:00:00"},
        {"user_profile": {str(i): i for i in range(MAX_PROFILE_KEYS + 1)}},
        {"user_profile": {"bio": "x" * MAX_PROFILE_BYTES}},
        {"user_profile": []},
        {"context": "x" * 2001},
        {"conversation_id": "x" * 201},
    ],
)
def test_no_coercion_and_bounded_fields(client: TestClient, fields: dict[str, Any]) -> None:
    reply = client.post("/v1/query", json={"query": "O que é APR?", **fields})
    assert reply.status_code == 422, reply.text
    assert reply.json()["error"]["code"] == "invalid_request"


def test_well_typed_fields_still_pass(client: TestClient) -> None:
    body = {
        "query": "O que é APR?",
        "top_k": 5,
        "include_deprecated": False,
        "date": "2026-06-15",
        "user_profile": {str(i): "v" for i in range(MAX_PROFILE_KEYS)},
    }
    assert client.post("/v1/query", json=body).status_code == 200


def test_a_large_body_is_413_before_parsing(client: TestClient) -> None:
    body = json.dumps({"query": "APR", "user_profile": {"x": "y" * MAX_BODY_BYTES}})
    reply = client.post("/v1/query", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 413
    assert reply.json()["error"]["code"] == "payload_too_large"


def test_a_streamed_body_is_counted_without_a_content_length(client: TestClient) -> None:
    def chunks() -> Iterator[bytes]:
        yield b'{"query": "APR", "context": "'
        for _ in range(100):
            yield b"x" * 1024
        yield b'"}'

    reply = client.post("/v1/query", content=chunks(), headers={"content-type": "application/json"})
    assert "content-length" not in {k.lower() for k in reply.request.headers}
    assert reply.status_code == 413


def test_a_body_just_under_the_limit_reaches_the_schema(client: TestClient) -> None:
    body = json.dumps({"query": "APR", "context": "x" * (MAX_BODY_BYTES - 100)})
    reply = client.post("/v1/query", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 422  # the context's own bound, not the body's


def test_openapi_documents_the_real_error_shape(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    responses = spec["paths"]["/v1/query"]["post"]["responses"]
    for status in ("401", "403", "413", "422"):
        schema = responses[status]["content"]["application/json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/ErrorResponse"}
    schemas = spec["components"]["schemas"]
    assert "HTTPValidationError" not in schemas
    assert schemas["ErrorResponse"]["properties"]["error"] == {
        "$ref": "#/components/schemas/ErrorBody"
    }
    assert (
        schemas["QueryRequest"]["properties"]["user_profile"]["maxProperties"] == MAX_PROFILE_KEYS
    )
    assert spec["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("TRACE", "/v1/query", "POST"),
        ("DELETE", "/v1/health", "GET"),
        ("PUT", "/v1/metrics", "GET"),
    ],
)
def test_405_names_the_allowed_methods(
    client: TestClient, method: str, path: str, allowed: str
) -> None:
    reply = client.request(method, path)
    assert reply.status_code == 405 and reply.headers["allow"] == allowed
    assert reply.json()["error"]["code"] == "method_not_allowed"


@pytest.mark.parametrize(
    "body",
    [
        b'{"query": "\xff\xfe"}',  # not UTF-8
        b"[" * 2000 + b"]" * 2000,  # nested past the parser's depth
        b'{"query": "APR", "top_k": ' + b"9" * 5000 + b"}",  # past the integer digit limit
    ],
    ids=["invalid-utf8", "deep-nesting", "huge-integer"],
)
def test_a_body_the_parser_refuses_is_a_documented_400(client: TestClient, body: bytes) -> None:
    reply = client.post("/v1/query", content=body, headers={"content-type": "application/json"})
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "http_error"
    responses = client.get("/openapi.json").json()["paths"]["/v1/query"]["post"]["responses"]
    schema = responses["400"]["content"]["application/json"]["schema"]
    assert schema == {"$ref": "#/components/schemas/ErrorResponse"}
