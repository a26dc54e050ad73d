"""Fixtures of the browser tests: a real ``kr serve`` over the sample knowledge (one per session),
with an API key per tenant and a golden-set report, and one headless Chromium per module.

Why a subprocess: the page must work against what ``kr serve`` really serves (its routes, its
credential rules, uvicorn), not a test client. Why Debian's Chromium and these flags: the
machines have no network and no Playwright browser download; ``scripts/dev.sh test`` installs
``/usr/bin/chromium`` and Playwright (PyPI) drives it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from kr.golden import load_golden
from kr.outcomes import request_context
from router.adapters.local.keys import SqliteKeyStore
from router.adapters.local.state import LocalState
from router.compile.build import BuildResult
from router.ops.publish import publish_package
from tests.common import ALFA, BETA, GOLDEN, ROOT

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",  # the closed network refuses Chromium's own requests
    "--disable-component-update",
    "--disable-sync",
]
REPORT = ROOT / "reports" / "golden" / "metrics.json"
FAILING = ("q010", "q061")  # "O que é APR?"; a construtora-alfa question
START_TIMEOUT_S = 60.0
EXPECT_TIMEOUT_MS = 10_000


ADMIN_TOKEN = "operator-" + "0123456789abcdef" * 2
"""``kr serve``'s ``KR_ADMIN_TOKEN``: the credential of the golden-set report."""


@dataclass(frozen=True)
class Server:
    """A running ``kr serve``: its base URL, a key per tenant, its admin token and the report
    it serves."""

    url: str
    keys: dict[str, str]
    report: dict[str, Any]
    admin: str = ADMIN_TOKEN


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"kr serve exited: {log.read_text(errors='replace')[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=2) as reply:
                if reply.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.2)
    raise RuntimeError(f"kr serve did not answer in {START_TIMEOUT_S} s: {log.read_text()[-2000:]}")


def eval_report() -> dict[str, Any]:
    """The committed golden-set report, its failures replaced by two golden queries the test
    knows the answers of (one of them a tenant's), in the rows ``kr eval`` writes."""
    report: dict[str, Any] = json.loads(REPORT.read_text(encoding="utf-8"))
    golden = {q.id: q for q in load_golden(GOLDEN)}
    rows = []
    for query_id in FAILING:
        query = golden[query_id]
        rows.append(
            {
                "id": query.id,
                "category": query.category,
                "query": query.query,
                "expected": query.expected,
                "rank": 2,
                "got": ["some.other#section (v1)"],
                "abstained": False,
                "should_abstain": query.abstain,
                "intent_ok": True,
                "leaks": 0,
                "path": "bm25",
                "context": request_context(query),
            }
        )
    report["failures"] = rows
    return report


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory, built: BuildResult) -> Iterator[Server]:
    """``kr serve`` on a free loopback port over the sample knowledge (anonymous access on,
    as by default), with a key for each tenant and the golden report at /eval/report.json
    (behind ``KR_ADMIN_TOKEN``)."""
    folder = tmp_path_factory.mktemp("served")
    state = LocalState(folder / "state")
    files = built.package.files()
    asyncio.run(publish_package(files, state.blobs, state.kv, state.relational))
    store = SqliteKeyStore(state.relational.path)
    keys = {tenant: store.create(tenant)[0] for tenant in (ALFA, BETA)}
    report = eval_report()
    report_path = folder / "metrics.json"
    report_path.write_text(json.dumps(report, ensure_ascii=False), encoding="utf-8")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KR_", "CLOUDFLARE_"))}
    env["KR_ADMIN_TOKEN"] = ADMIN_TOKEN
    log = folder / "serve.log"
    command = [sys.executable, "-m", "kr.cli", "serve", "--state", str(state.root)]
    command += ["--port", str(port), "--eval-report", str(report_path)]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(url, process, log)
        yield Server(url, keys, report)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Debian Chromium per module (Playwright's own browsers are never fetched)."""
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: scripts/dev.sh test installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh context per test (its own sessionStorage), desktop size; JS errors fail the test."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    yield tab
    context.close()
    assert not errors, errors
