"""The playground's files and the eval report as ``kr serve``'s app serves them: at the paths
Workers static assets use, with the headers its ``_headers`` file gives, outside the OpenAPI
document, and the report to the operator only (the admin token)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.api.app import create_app
from router.api.pages import PAGE_HEADERS, PLAYGROUND_DIR, page_files
from router.auth import AuthConfig, Authenticator, auth_config_from
from router.errors import ConfigError
from router.service import KnowledgeService
from tests.common import ALFA


def _client(
    service: KnowledgeService, report: Path | None = None, auth: Authenticator | None = None
) -> TestClient:
    return TestClient(create_app(service, auth=auth, pages=PLAYGROUND_DIR, eval_report=report))


def _headers_file() -> dict[str, str]:
    """``playground/_headers``: the headers Workers static assets add to every file."""
    lines = (PLAYGROUND_DIR / "_headers").read_text(encoding="utf-8").splitlines()
    rules = [line for line in lines if line.strip() and not line.startswith("#")]
    assert rules[0] == "/*"
    return dict(rule.strip().split(": ", 1) for rule in rules[1:])


def test_pages_are_served_where_workers_static_assets_serve_them(
    service: KnowledgeService,
) -> None:
    client = _client(service)
    index = client.get("/")
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert '<script src="/playground.js"' in index.text
    evaluation = client.get("/eval")
    assert evaluation.status_code == 200 and '<script src="/eval.js"' in evaluation.text
    script = client.get("/playground.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert client.get("/style.css").headers["content-type"].startswith("text/css")
    assert client.get("/_headers").status_code == 404  # configuration, not a file to serve
    assert client.get("/index.html").status_code == 404  # "/" only, as the asset server does
    served = {page.path for page in page_files()}
    assert served == {
        "/",
        "/eval",
        "/gaps",
        "/playground.js",
        "/eval.js",
        "/gaps.js",
        "/style.css",
        "/favicon.svg",
    }


def test_kr_serve_and_the_worker_send_the_same_page_headers(service: KnowledgeService) -> None:
    assert _headers_file() == PAGE_HEADERS
    reply = _client(service).get("/")
    for name, value in PAGE_HEADERS.items():
        assert reply.headers[name] == value
    assert "frame-ancestors 'none'" in reply.headers["content-security-policy"]


def test_pages_leave_the_api_as_it_was(service: KnowledgeService) -> None:
    client = _client(service)
    assert client.post("/v1/query", json={"query": "O que é APR?"}).json()["results"]
    assert client.get("/v1/health").json()["status"] == "ok"
    assert set(client.get("/openapi.json").json()["paths"]) == {
        "/v1/query",
        "/v1/health",
        "/v1/metrics",
    }
    missing = client.get("/nowhere")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "not_found"


def test_the_workers_app_serves_no_pages(service: KnowledgeService) -> None:
    """The Worker's static assets serve them; its app answers what is not a file."""
    client = TestClient(create_app(service))
    assert client.get("/").status_code == 404
    assert client.get("/eval/report.json").json()["error"]["code"] == "not_found"


ADMIN = "a" * 40


@pytest.mark.parametrize("anonymous", [True, False])
def test_the_report_is_the_operators_only_anonymous_access_on_or_off(
    state: LocalState, service: KnowledgeService, tmp_path: Path, anonymous: bool
) -> None:
    """It names every tenant's golden queries and private section ids: no anonymous caller and
    no tenant's key reads it, only the admin token; without one the route is off."""
    report = tmp_path / "metrics.json"
    report.write_text(json.dumps({"name": "golden", "per_category": {}}), encoding="utf-8")
    keys = SqliteKeyStore(state.relational.path)
    tenant = keys.create(ALFA)[0]
    config = AuthConfig(allow_anonymous=anonymous, admin_token=ADMIN)
    client = _client(service, report, Authenticator(config, keys))
    assert client.get("/").status_code == 200  # the page itself needs no credential
    for wrong in (None, tenant, "a" * 39, ADMIN + "a", f"Basic {ADMIN}"):
        headers = {} if wrong is None else {"Authorization": _bearer(wrong)}
        denied = client.get("/eval/report.json", headers=headers)
        assert denied.status_code == 401, wrong
        assert denied.json()["error"]["code"] == "unauthorized"
        assert "golden" not in denied.text
    allowed = client.get("/eval/report.json", headers={"Authorization": f"Bearer {ADMIN}"})
    assert allowed.status_code == 200 and allowed.json()["name"] == "golden"
    report.unlink()
    gone = client.get("/eval/report.json", headers={"Authorization": f"Bearer {ADMIN}"})
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "no_report"
    assert "kr eval" in gone.json()["error"]["message"]
    report.write_bytes(b'{"name": "gold')  # a report cut short: a fault, never a 500
    damaged = client.get("/eval/report.json", headers={"Authorization": f"Bearer {ADMIN}"})
    assert damaged.status_code == 503 and damaged.json()["error"]["code"] == "bad_report"


def test_without_an_admin_token_the_report_is_off(
    state: LocalState, service: KnowledgeService, tmp_path: Path
) -> None:
    report = tmp_path / "metrics.json"
    report.write_text(json.dumps({"name": "golden"}), encoding="utf-8")
    keys = SqliteKeyStore(state.relational.path)
    tenant = keys.create(ALFA)[0]
    for auth in (None, Authenticator(AuthConfig(allow_anonymous=False), keys)):
        client = _client(service, report, auth)
        for headers in ({}, {"Authorization": f"Bearer {tenant}"}):
            off = client.get("/eval/report.json", headers=headers)
            assert off.status_code == 403 and off.json()["error"]["code"] == "admin_required"
            assert "KR_ADMIN_TOKEN" in off.json()["error"]["message"]
    with pytest.raises(ConfigError, match="KR_ADMIN_TOKEN"):
        AuthConfig(admin_token="short")
    assert auth_config_from({"KR_ADMIN_TOKEN": ADMIN}.get, True).admin_token == ADMIN
    assert ADMIN not in repr(AuthConfig(admin_token=ADMIN))


def _bearer(credential: str) -> str:
    return credential if credential.startswith("Basic ") else f"Bearer {credential}"
