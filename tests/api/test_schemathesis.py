"""A bounded schemathesis run against the app over the sample knowledge: generated requests
(valid and invalid) get no 5xx, and every response conforms to the OpenAPI document — the
error shape included. Bounded by example count (well under a minute)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
)

from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.compile.build import BuildResult
from router.ops.publish import publish_package
from router.service import KnowledgeService

EXAMPLES = 150  # per route: about 10 s in all


@pytest.fixture(scope="module")
def api_schema(built: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> Any:
    local = LocalState(tmp_path_factory.mktemp("fuzz") / "state")
    asyncio.run(publish_package(built.package.files(), local.blobs, local.kv, local.relational))
    app = create_app(KnowledgeService(kv=local.kv, blobs=local.blobs))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


ROUTES = [("/v1/query", "POST"), ("/v1/health", "GET"), ("/v1/metrics", "GET")]
CHECKS = [not_a_server_error, response_schema_conformance, content_type_conformance]


@pytest.mark.parametrize(("path", "method"), ROUTES)
def test_api_conforms_to_its_schema(api_schema: Any, path: str, method: str) -> None:
    """Each route's generated cases, positive and negative (schemathesis's pytest plugin does
    not run under this pytest, so the strategy is driven by hypothesis directly)."""
    operation = api_schema[path][method]
    strategy = operation.as_strategy() | operation.as_strategy(
        generation_mode=schemathesis.GenerationMode.NEGATIVE
    )
    seen: list[int] = []

    @given(case=strategy)
    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        derandomize=True,
        database=None,
    )
    def run(case: schemathesis.Case) -> None:
        response = case.call_and_validate(checks=CHECKS)
        seen.append(response.status_code)

    run()
    assert seen and all(status < 500 for status in seen)
    if method == "POST":
        assert 200 in seen and 422 in seen  # both valid and invalid bodies reached the app
