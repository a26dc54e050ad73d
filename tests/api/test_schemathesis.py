"""A bounded schemathesis run against the app over the sample knowledge: generated requests
(valid and invalid) get no 5xx, every response conforms to the OpenAPI document — its status
documented, the error shape included —, a schema-violating request is rejected (ST201), and the
document's security says what the server does: a credential optional where anonymous access is
on (no ST401), required where it is off (a request without one is a 401: ST203, ST401). Driven
twice: hypothesis's generated cases, and schemathesis's coverage cases (each boundary, each
missing part, each undeclared method). Bounded by example count (well under a minute)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.auth import AuthConfig, Authenticator
from router.compile.build import BuildResult
from router.ops.publish import publish_package
from router.service import KnowledgeService
from tests.common import ALFA

EXAMPLES = 150  # per route: about 10 s in all


@pytest.fixture(scope="module")
def local(built: BuildResult, tmp_path_factory: pytest.TempPathFactory) -> LocalState:
    state = LocalState(tmp_path_factory.mktemp("fuzz") / "state")
    asyncio.run(publish_package(built.package.files(), state.blobs, state.kv, state.relational))
    return state


@pytest.fixture(scope="module")
def api_schema(local: LocalState) -> Any:
    """The app as ``kr serve`` starts it by default: anonymous access on."""
    app = create_app(KnowledgeService(kv=local.kv, blobs=local.blobs))
    return schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(scope="module")
def closed_schema(local: LocalState) -> tuple[Any, str]:
    """The app with anonymous access off (the Worker's default), and a key for its cases."""
    keys = SqliteKeyStore(local.relational.path)
    auth = Authenticator(AuthConfig(allow_anonymous=False), keys)
    app = create_app(KnowledgeService(kv=local.kv, blobs=local.blobs), auth=auth)
    return schemathesis.openapi.from_asgi("/openapi.json", app), keys.create(ALFA)[0]


ROUTES = [("/v1/query", "POST"), ("/v1/health", "GET"), ("/v1/metrics", "GET")]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    response_schema_conformance,
    content_type_conformance,
    negative_data_rejection,
    missing_required_header,
    ignored_auth,
    unsupported_method,
]


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


def _coverage(schema: Any, headers: dict[str, str] | None = None) -> list[int]:
    """Every coverage case of every operation, run and checked; the statuses seen."""
    seen = []
    for result in schema.get_all_operations():
        operation = result.ok()
        cases = schema.iter_coverage_cases(
            operation,
            generation_modes=list(schemathesis.GenerationMode),
            generation_config=schema.config.generation_for(operation=operation),
        )
        for case in cases:
            seen.append(case.call_and_validate(checks=CHECKS, headers=headers).status_code)
    return seen


def test_coverage_cases_with_anonymous_access_on(api_schema: Any) -> None:
    """A credential is optional: a request without one answered 200 is no ignored
    authentication (ST401) nor an accepted missing header (ST203)."""
    security = api_schema.raw_schema["paths"]["/v1/query"]["post"]["security"]
    assert {} in security
    seen = _coverage(api_schema)
    assert 200 in seen and all(status < 500 for status in seen)


def test_coverage_cases_with_anonymous_access_off(closed_schema: tuple[Any, str]) -> None:
    """A credential is required: each case is sent with a key, and schemathesis sends it
    again without one and with a forged one (ST401), and drops the header (ST203)."""
    schema, key = closed_schema
    security = schema.raw_schema["paths"]["/v1/query"]["post"]["security"]
    assert security == [{"HTTPBearer": []}]
    seen = _coverage(schema, {"Authorization": f"Bearer {key}"})
    assert 200 in seen and 401 in seen and all(status < 500 for status in seen)


def test_the_document_lists_every_error_status_with_the_error_shape(api_schema: Any) -> None:
    paths = api_schema.raw_schema["paths"]
    expected = {
        ("/v1/query", "post"): {"400", "401", "403", "405", "413", "422", "429", "503"},
        ("/v1/health", "get"): {"405", "503"},
        ("/v1/metrics", "get"): {"401", "405", "503"},
    }
    for (path, method), statuses in expected.items():
        responses = paths[path][method]["responses"]
        assert statuses | {"200"} == set(responses), path
        for status in statuses:
            schema = responses[status]["content"]["application/json"]["schema"]
            assert schema == {"$ref": "#/components/schemas/ErrorResponse"}
