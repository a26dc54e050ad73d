"""``kr publish``: the Cloudflare REST adapters and the resumable publisher, against a fake of the
Cloudflare API on 127.0.0.1, plus one publish into wrangler's real local state.

Why a fake server and not mocks: retries, dropped connections, envelopes and URL encoding only
mean something over a socket. The fake keeps R2 objects, KV values, D1 rows (an in-memory SQLite
with ``migrations/d1`` applied, foreign keys on, as D1) and Vectorize vectors; it checks the
token, the documented payload shapes (D1 ``params`` are strings, upserts are NDJSON) and can be
told to fail a request once, corrupt an object, or die mid-publish (close every connection).
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from kr.cli import main
from router.adapters.cloudflare_api import (
    CloudflareAPI,
    CloudflareAPIError,
    CloudflareSettings,
    D1Database,
    D1RelationalStore,
    KVNamespaceStore,
    R2ObjectStore,
    RetryPolicy,
    VectorizeIndex,
)
from router.adapters.cloudflare_api.d1 import batches, string_params
from router.adapters.cloudflare_api.vectorize import ndjson_lines
from router.adapters.local.journal import FileJournal
from router.adapters.wrangler_cli import render_statement, sql_literal
from router.compile.build import BuildResult, build_knowledge, write_package
from router.compile.indexer import CompiledPackage
from router.errors import ConfigError, IntegrityError, InvalidRequestError
from router.ops.publish import MemoryJournal, PublishError, PublishTarget, publish
from router.ops.publish_plan import ACTIVATE_STEP, ROWS_STEP, VERIFY_STEP, blob_step
from router.ops.publish_report import PublishReport
from router.ops.publish_rows import catalog_rows, package_catalog
from router.package.reader import load_package
from router.package.version.manifest import Manifest
from router.ports import ACTIVE_VERSION_KEY, PREVIOUS_VERSION_KEY, VectorRecord
from router.service import package_key
from router.vectors.hash_embedder import HashEmbedder
from router.vectors.records import namespace_for
from tests.common import KNOWLEDGE, MIGRATIONS, ROOT, catalog_of, write_doc

ACCOUNT = "0123456789abcdef0123456789abcdef"
TOKEN = "cf-test-token-s3cr3t"
BUCKET = "kr-packages"
KV_NAMESPACE = "f0e1d2c3b4a5968778695a4b3c2d1e0f"
DATABASE = "11111111-2222-3333-4444-555555555555"
INDEX = "kr-sections"

_ROUTES = [
    ("r2", re.compile(r"^/accounts/([^/]+)/r2/buckets/([^/]+)/objects/(.+)$")),
    ("r2_list", re.compile(r"^/accounts/([^/]+)/r2/buckets/([^/]+)/(objects)$")),
    ("kv", re.compile(r"^/accounts/([^/]+)/storage/kv/namespaces/([^/]+)/values/([^/]+)$")),
    ("d1", re.compile(r"^/accounts/([^/]+)/d1/database/([^/]+)/(query)$")),
    ("vectorize", re.compile(r"^/accounts/([^/]+)/vectorize/v2/indexes/([^/]+)/?([a-z_]*)$")),
]


@dataclass
class Failure:
    method: str
    service: str
    contains: str
    status: int
    times: int = 1
    retry_after: str | None = None


@dataclass
class FakeCloudflare:
    """State of the fake API; ``log`` holds every applied request in order."""

    dimensions: int = 256
    metric: str = "cosine"
    objects: dict[str, bytes] = field(default_factory=dict)
    kv: dict[str, str] = field(default_factory=dict)
    vectors: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: list[tuple[str, str, str]] = field(default_factory=list)
    received: int = 0
    failures: list[Failure] = field(default_factory=list)
    corrupt: set[str] = field(default_factory=set)
    die_after: int | None = None
    dead: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.db = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA foreign_keys = ON")
        for sql in sorted(MIGRATIONS.glob("*.sql")):
            self.db.executescript(sql.read_text(encoding="utf-8"))

    def fail(self, method: str, service: str, contains: str = "", status: int = 500, **kw: Any):  # type: ignore[no-untyped-def]
        self.failures.append(Failure(method, service, contains, status, **kw))

    def revive(self) -> None:
        self.dead, self.die_after = False, None

    def count(self, table: str, version: str) -> int:
        with self.lock:
            sql = f"SELECT COUNT(*) FROM knowledge_{table} WHERE version = ?"
            return int(self.db.execute(sql, (version,)).fetchone()[0])

    def writes(self) -> list[tuple[str, str, str]]:
        return [entry for entry in self.log if entry[0] in ("PUT", "POST")]


def _envelope(result: Any = None, errors: list[dict[str, Any]] | None = None) -> bytes:
    body = {"success": not errors, "errors": errors or [], "messages": [], "result": result}
    return json.dumps(body).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: FakeCloudflare

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, status: int, body: bytes, content_type: str = "application/json", **hdr: str):  # type: ignore[no-untyped-def]
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in hdr.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, code: int, message: str, **hdr: str) -> None:
        self._send(status, _envelope(None, [{"code": code, "message": message}]), **hdr)

    def do_GET(self) -> None:
        self._handle("GET")

    def do_PUT(self) -> None:
        self._handle("PUT")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_DELETE(self) -> None:
        self._handle("DELETE")

    def _handle(self, method: str) -> None:
        state = self.state
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        url = urlsplit(self.path)
        with state.lock:
            state.received += 1
            if state.dead:
                self.close_connection = True  # the "server" died: no answer at all
                return
        if self.headers.get("Authorization") != f"Bearer {TOKEN}":
            return self._error(403, 10000, "Authentication error")
        path = url.path.removeprefix("/client/v4")
        routed = [(name, m) for name, pattern in _ROUTES if (m := pattern.match(path))]
        if not routed:
            return self._error(404, 7003, f"No route for {path}")
        service, match = routed[0]
        account, resource, rest = (unquote(group) for group in match.groups())
        if account != ACCOUNT:
            return self._error(404, 7003, "Could not route to account")
        with state.lock:
            for failure in state.failures:
                if (
                    failure.times > 0
                    and failure.method == method
                    and failure.service == service
                    and failure.contains in rest + body.decode("utf-8", "replace")
                ):
                    failure.times -= 1
                    extra = {"Retry_After": failure.retry_after} if failure.retry_after else {}
                    return self._error(failure.status, 10013, "injected failure", **extra)
        handler = getattr(self, f"_{service}")
        handled = handler(method, resource, rest, body, parse_qs(url.query))
        if method in ("PUT", "POST") and handled and state.die_after is not None:
            with state.lock:
                state.die_after -= 1
                if state.die_after <= 0:
                    state.dead = True

    def _r2(self, method: str, bucket: str, key: str, body: bytes, query: Any) -> bool:
        state = self.state
        if bucket != BUCKET:
            self._error(404, 10006, "The specified bucket does not exist.")
            return False
        with state.lock:
            if method == "DELETE":
                state.objects.pop(key, None)
                state.log.append(("DELETE", "r2", key))
                self._send(200, _envelope({}))
                return True
            if method == "PUT":
                state.objects[key] = body + b"!" if key in state.corrupt else body
                state.corrupt.discard(key)
                state.log.append(("PUT", "r2", key))
                result: Any = {"key": key, "size": len(body), "etag": uuid.uuid4().hex}
                self._send(200, _envelope(result))
                return True
            state.log.append(("GET", "r2", key))
            blob = state.objects.get(key)
        if blob is None:
            self._error(404, 10007, "The specified key does not exist.")
            return False
        self._send(200, blob, "application/octet-stream")
        return True

    def _r2_list(self, method: str, bucket: str, rest: str, body: bytes, query: Any) -> bool:
        """``GET …/objects?prefix=&per_page=&cursor=``: keys in order, pages by cursor."""
        state = self.state
        if bucket != BUCKET or method != "GET":
            self._error(404, 10006, "The specified bucket does not exist.")
            return False
        prefix = query.get("prefix", [""])[0]
        per_page = int(query.get("per_page", ["1000"])[0])
        start = int(query.get("cursor", ["0"])[0])
        with state.lock:
            keys = sorted(k for k in state.objects if k.startswith(prefix))
            page = [
                {"key": k, "size": len(state.objects[k])} for k in keys[start : start + per_page]
            ]
            state.log.append(("LIST", "r2", prefix))
        more = start + per_page < len(keys)
        info = {"cursor": str(start + per_page) if more else "", "is_truncated": more}
        body_out = json.loads(_envelope(page))
        body_out["result_info"] = info
        self._send(200, json.dumps(body_out).encode())
        return True

    def _kv(self, method: str, namespace: str, key: str, body: bytes, query: Any) -> bool:
        state = self.state
        if namespace != KV_NAMESPACE:
            self._error(404, 10013, "namespace not found")
            return False
        with state.lock:
            if method == "PUT":
                state.kv[key] = body.decode("utf-8")
                state.log.append(("PUT", "kv", f"{key}={state.kv[key]}"))
                self._send(200, _envelope({}))
                return True
            state.log.append(("GET", "kv", key))
            value = state.kv.get(key)
        if value is None:
            self._error(404, 10009, "get: 'key not found'")
            return False
        self._send(200, value.encode(), "application/octet-stream")
        return True

    def _d1(self, method: str, database: str, rest: str, body: bytes, query: Any) -> bool:
        state = self.state
        if database != DATABASE or method != "POST":
            self._error(404, 7404, "database not found")
            return False
        payload = json.loads(body)
        items = payload.get("batch", [payload])
        for item in items:
            if any(p is not None and not isinstance(p, str) for p in item.get("params", [])):
                self._error(400, 7400, "params must be an array of strings")
                return False
        results = []
        with state.lock:
            try:
                state.db.execute("BEGIN")
                for item in items:
                    rows = state.db.execute(item["sql"], item.get("params", [])).fetchall()
                    results.append(
                        {"results": [dict(r) for r in rows], "success": True, "meta": {}}
                    )
                state.db.execute("COMMIT")
            except sqlite3.Error as exc:
                state.db.execute("ROLLBACK")
                self._error(400, 7500, f"{exc}: SQLITE_ERROR")
                return False
            state.log.append(("POST", "d1", str(len(items))))
        self._send(200, _envelope(results))
        return True

    def _vectorize(self, method: str, index: str, operation: str, body: bytes, query: Any) -> bool:
        state = self.state
        if index != INDEX:
            self._error(404, 40002, "vectorize.index.not_found")
            return False
        if operation == "" and method == "GET":  # the index's description
            config = {"dimensions": state.dimensions, "metric": state.metric}
            self._send(200, _envelope({"name": INDEX, "config": config}))
            return True
        if operation == "upsert":
            if self.headers.get("Content-Type") != "application/x-ndjson":
                self._error(400, 40026, "expected an application/x-ndjson body")
                return False
            lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
            if len(lines) > 1000:
                self._error(400, 40005, "too many vectors in one request")
                return False
            for line in lines:
                if len(line["values"]) != state.dimensions:
                    self._error(400, 40012, "vector dimension mismatch")
                    return False
            with state.lock:
                for line in lines:
                    state.vectors[line["id"]] = line
                state.log.append(("POST", "vectorize", str(len(lines))))
            self._send(200, _envelope({"mutationId": str(uuid.uuid4())}))
            return True
        if operation == "delete_by_ids":
            ids = json.loads(body)["ids"]
            with state.lock:
                for vector_id in ids:
                    state.vectors.pop(vector_id, None)
                state.log.append(("POST", "vectorize-delete", str(len(ids))))
            self._send(200, _envelope({"mutationId": str(uuid.uuid4())}))
            return True
        if operation == "query":
            request = json.loads(body)
            with state.lock:
                found = [
                    v
                    for v in state.vectors.values()
                    if v.get("namespace") == request.get("namespace")
                ]
            scored = sorted(
                ({"id": v["id"], "score": _cosine(v["values"], request["vector"]),
                  "metadata": v.get("metadata"), "namespace": v.get("namespace")} for v in found),
                key=lambda m: -m["score"],
            )[: request["topK"]]  # fmt: skip
            self._send(200, _envelope({"count": len(scored), "matches": scored}))
            return True
        self._error(404, 7003, f"unknown operation {operation}")
        return False


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1.0)


class _QuietServer(ThreadingHTTPServer):
    """A client that gave up (concurrent presence checks after the first error) is not an
    error of the fake: nothing is printed for a closed connection."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclass
class FakeServer:
    state: FakeCloudflare
    port: int

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/client/v4"


@pytest.fixture
def fake() -> Iterator[FakeServer]:
    state = FakeCloudflare()
    handler = type("Handler", (_Handler,), {"state": state})
    server = _QuietServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield FakeServer(state, server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


# ----------------------------------------------------------------------------- packages


@pytest.fixture(scope="module")
def embedded() -> BuildResult:
    """The sample knowledge with (hash) section vectors."""
    return build_knowledge(KNOWLEDGE, encoder=HashEmbedder())


@pytest.fixture(scope="module")
def second(tmp_path_factory: pytest.TempPathFactory) -> CompiledPackage:
    folder = tmp_path_factory.mktemp("kb2")
    write_doc(
        folder,
        "only.md",
        "---\nsemanticId: only.doc\ntitle: Documento novo\ntenant: acme\n---\nVersão nova.\n",
    )
    return build_knowledge(folder, encoder=HashEmbedder()).package


FAST = RetryPolicy(attempts=4, base_delay_s=0.01, max_delay_s=0.05)


async def _publish(
    server: FakeServer,
    files: dict[str, bytes],
    journal: Any,
    *,
    token: str = TOKEN,
    vector_batch: int = 1000,
    activate_now: bool = True,
    dimensions: int = 256,
) -> PublishReport:
    async with CloudflareAPI(ACCOUNT, token, server.base_url, retry=FAST) as api:
        target = PublishTarget(
            name=f"cloudflare:{ACCOUNT}:test",
            blobs=R2ObjectStore(api, BUCKET),
            kv=KVNamespaceStore(api, KV_NAMESPACE),
            relational=D1RelationalStore(D1Database(api, DATABASE)),
            vectors=VectorizeIndex(api, INDEX, dimensions),
            vector_batch=vector_batch,
        )
        return await publish(files, target, journal, activate_now=activate_now)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


# ----------------------------------------------------------------------------- the publisher


def test_full_publish_stores_every_part_and_activates_last(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    package = embedded.package
    files = package.files()
    version = package.knowledge_version
    report = _run(_publish(fake, files, FileJournal(tmp_path / "journal")))

    state = fake.state
    assert report.activated and report.previous_version is None
    assert report.steps[-1] == ACTIVATE_STEP and report.ran == report.steps
    for name, blob in files.items():
        assert state.objects[package_key(version, name)] == blob  # byte-identical
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    for table, table_rows in rows.items():
        assert state.count(table, version) == len(table_rows) > 0
    stored_manifest = state.db.execute(
        "SELECT manifest, format_version FROM knowledge_versions WHERE version = ?", (version,)
    ).fetchone()
    assert stored_manifest["manifest"].encode() == files["manifest.json"]
    assert stored_manifest["format_version"] == package.manifest.format_version
    doc = state.db.execute(
        "SELECT doc_index, valid_from, typeof(doc_index) AS t FROM knowledge_documents "
        "WHERE version = ? ORDER BY doc_index LIMIT 1",
        (version,),
    ).fetchone()
    assert (doc["doc_index"], doc["t"]) == (0, "integer")  # string params, integer affinity

    loaded = load_package(files["manifest.json"], files.__getitem__)
    catalog = catalog_of(loaded)
    assert len(state.vectors) == len(catalog.sections) == report.vectors_upserted
    for index, section in enumerate(catalog.sections):
        vector = state.vectors[f"{version}:{index}"]
        tenant = catalog.documents[catalog.section_doc[index]].tenant
        assert vector["namespace"] == namespace_for(tenant)
        assert vector["metadata"]["version"] == version
        assert vector["metadata"]["section"] == section.section_id
    assert {v["namespace"] for v in state.vectors.values()} == {
        "shared",
        "t:construtora-alfa",
        "t:metalurgica-beta",
    }
    assert state.kv[ACTIVE_VERSION_KEY] == version and PREVIOUS_VERSION_KEY not in state.kv

    writes = state.writes()
    assert writes[-1] == ("PUT", "kv", f"{ACTIVE_VERSION_KEY}={version}")  # activation is last
    kinds = [service for _, service, _ in state.log]
    last_r2_put = max(i for i, e in enumerate(state.log) if e[:2] == ("PUT", "r2"))
    first_r2_get = min(i for i, e in enumerate(state.log) if e[:2] == ("GET", "r2"))
    assert last_r2_put < first_r2_get < kinds.index("d1") < kinds.index("vectorize")
    assert max(i for i, k in enumerate(kinds) if k == "vectorize") < kinds.index("kv")
    r2_puts = [key for method, service, key in state.log if (method, service) == ("PUT", "r2")]
    assert r2_puts[-1] == package_key(version, "manifest.json")  # the manifest goes last


def test_transient_failures_are_retried_and_rows_are_not_duplicated(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    files = embedded.package.files()
    version = embedded.package.knowledge_version
    state = fake.state
    state.fail("PUT", "r2", "shared.partition.bin", 500)
    state.fail("POST", "vectorize", "upsert", 429, retry_after="0")
    state.fail("PUT", "kv", ACTIVE_VERSION_KEY, 503)
    state.fail("POST", "d1", "INSERT INTO knowledge_links", 503)  # mid-way through the rows
    report = _run(_publish(fake, files, FileJournal(tmp_path / "journal")))

    assert report.activated
    assert all(failure.times == 0 for failure in state.failures)
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    for table, table_rows in rows.items():
        assert state.count(table, version) == len(table_rows)
    assert state.kv[ACTIVE_VERSION_KEY] == version
    assert state.received > len(state.log)  # the failed attempts reached the fake


@pytest.mark.parametrize("phase", ["blobs", "vectors"], ids=["during-blobs", "during-vectors"])
def test_interrupted_publish_resumes_without_redoing_finished_steps(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path, phase: str
) -> None:
    files = embedded.package.files()
    version = embedded.package.knowledge_version
    state = fake.state
    # applied writes before the server dies: 2 blobs, or every blob + the D1 rows + one batch
    die_after = 2 if phase == "blobs" else len(files) + 3
    journal = FileJournal(tmp_path / "journal")
    state.die_after = die_after  # applied writes before the server stops answering
    with pytest.raises(PublishError) as info:
        _run(_publish(fake, files, journal, vector_batch=100))
    assert "run the same command again to resume" in info.value.message
    assert ACTIVE_VERSION_KEY not in state.kv
    done_before = _run(journal.done(f"cloudflare:{ACCOUNT}:test", version))
    assert info.value.step not in done_before and ACTIVATE_STEP not in done_before
    uploaded_before = {key for m, s, key in state.log if (m, s) == ("PUT", "r2")}
    assert len(done_before) == die_after if phase == "blobs" else len(done_before) > len(files)

    state.revive()
    mark = len(state.log)
    report = _run(_publish(fake, files, journal, vector_batch=100))
    resumed = state.log[mark:]

    assert report.activated and set(report.skipped) == done_before
    reuploaded = {key for m, s, key in resumed if (m, s) == ("PUT", "r2")}
    assert not reuploaded & {package_key(version, n) for n in files if blob_step(n) in done_before}
    assert reuploaded | uploaded_before == {package_key(version, name) for name in files}
    activations = [e for e in state.log if e == ("PUT", "kv", f"{ACTIVE_VERSION_KEY}={version}")]
    assert len(activations) == 1
    if phase == "vectors":  # blobs, verify and rows were done: only the remaining vectors went out
        assert not [e for e in resumed if e[1] in ("r2", "d1")]
        batches_done = sum(1 for step in done_before if step.startswith("vectors:"))
        upserted = sum(int(n) for m, s, n in resumed if s == "vectorize")
        assert batches_done >= 1 and upserted == len(state.vectors) - 100 * batches_done
    assert len(state.vectors) == embedded.package.manifest.counts["sections"]
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    assert state.count("links", version) == len(rows["links"])


def test_rerunning_a_finished_publish_is_harmless(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    files = embedded.package.files()
    version = embedded.package.knowledge_version
    journal = FileJournal(tmp_path / "journal")
    _run(_publish(fake, files, journal))
    received = fake.state.received

    again = _run(_publish(fake, files, journal))
    assert again.nothing_to_do and not again.activated
    assert fake.state.received == received  # not one request

    fresh = _run(_publish(fake, files, MemoryJournal()))  # no journal: every step runs again
    assert fresh.activated and fresh.previous_version is None
    rows = catalog_rows(package_catalog(files, Manifest.from_bytes(files["manifest.json"])))
    for table, table_rows in rows.items():
        assert fake.state.count(table, version) == len(table_rows)
    assert len(fake.state.vectors) == embedded.package.manifest.counts["sections"]
    assert fake.state.kv[ACTIVE_VERSION_KEY] == version
    assert PREVIOUS_VERSION_KEY not in fake.state.kv


def test_client_error_is_clear_and_never_activates(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    files = embedded.package.files()
    fake.state.dimensions = 384  # the index was created for another model
    with pytest.raises(PublishError) as info:
        _run(_publish(fake, files, FileJournal(tmp_path / "journal")))
    error = info.value
    assert error.step == "vectors:0" and error.code == "publish_failed"
    assert isinstance(error.cause, CloudflareAPIError) and error.cause.status == 400
    assert "HTTP 400" in error.message and "[40012] vector dimension mismatch" in error.message
    assert f"/vectorize/v2/indexes/{INDEX}/upsert" in error.message
    assert ACTIVE_VERSION_KEY not in fake.state.kv
    assert not [e for e in fake.state.log if e[:2] == ("PUT", "kv")]
    assert fake.state.received == len(fake.state.log) + 1  # a 400 is not retried


def test_bad_token_names_the_step_and_never_leaks_the_token(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    wrong = "wrong-token-123456"
    files = embedded.package.files()
    with pytest.raises(PublishError) as info:
        _run(_publish(fake, files, MemoryJournal(), token=wrong))
    first = min(name for name in files if name != "manifest.json")  # blobs go up in name order
    assert info.value.step == blob_step(first)
    assert "HTTP 403" in info.value.message and "CLOUDFLARE_API_TOKEN" in info.value.message
    assert wrong not in info.value.message and not fake.state.objects


def test_activation_remembers_the_previous_version(
    fake: FakeServer, embedded: BuildResult, second: CompiledPackage, tmp_path: Path
) -> None:
    journal = FileJournal(tmp_path / "journal")
    first = embedded.package.knowledge_version
    _run(_publish(fake, embedded.package.files(), journal))
    report = _run(_publish(fake, second.files(), journal))
    assert report.previous_version == first
    assert fake.state.kv[ACTIVE_VERSION_KEY] == second.knowledge_version
    assert fake.state.kv[PREVIOUS_VERSION_KEY] == first
    writes = fake.state.writes()
    assert writes[-2:] == [
        ("PUT", "kv", f"{PREVIOUS_VERSION_KEY}={first}"),
        ("PUT", "kv", f"{ACTIVE_VERSION_KEY}={second.knowledge_version}"),
    ]
    namespaces = {v["namespace"] for k, v in fake.state.vectors.items() if k.startswith("kv-")}
    assert "t:acme" in namespaces


def test_no_activate_then_activate_runs_only_the_switch(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    files = embedded.package.files()
    journal = FileJournal(tmp_path / "journal")
    staged = _run(_publish(fake, files, journal, activate_now=False))
    assert not staged.activated and ACTIVE_VERSION_KEY not in fake.state.kv
    mark = len(fake.state.log)
    switched = _run(_publish(fake, files, journal))
    assert switched.ran == [ACTIVATE_STEP]
    assert [e[:2] for e in fake.state.log[mark:]] == [("GET", "kv"), ("PUT", "kv")]


def test_a_corrupted_upload_fails_verification_and_is_uploaded_again(
    fake: FakeServer, embedded: BuildResult, tmp_path: Path
) -> None:
    files = embedded.package.files()
    version = embedded.package.knowledge_version
    journal = FileJournal(tmp_path / "journal")
    fake.state.corrupt.add(package_key(version, "shared.partition.bin"))
    with pytest.raises(PublishError) as info:
        _run(_publish(fake, files, journal))
    assert info.value.step == VERIFY_STEP and isinstance(info.value.cause, IntegrityError)
    assert "shared.partition.bin" in info.value.message and ACTIVE_VERSION_KEY not in fake.state.kv
    done = _run(journal.done(f"cloudflare:{ACCOUNT}:test", version))
    tenant = next(n for n in files if n.startswith("t-") and n.endswith(".partition.bin"))
    assert blob_step("shared.partition.bin") not in done and blob_step(tenant) in done

    mark = len(fake.state.log)
    report = _run(_publish(fake, files, journal))
    again = [key for m, s, key in fake.state.log[mark:] if (m, s) == ("PUT", "r2")]
    assert again == [package_key(version, "shared.partition.bin")]
    assert report.activated and fake.state.objects[again[0]] == files["shared.partition.bin"]
    assert ROWS_STEP in report.ran


# ----------------------------------------------------------------------------- adapters


def test_vectorize_adapter_splits_upserts_and_queries_a_namespace(fake: FakeServer) -> None:
    records = [
        VectorRecord(id=f"v:{i}", values=[1.0, float(i), 0.0], namespace="t:a", metadata={"i": i})
        for i in range(5)
    ]
    fake.state.dimensions = 3

    async def scenario() -> Any:
        async with CloudflareAPI(ACCOUNT, TOKEN, fake.base_url, retry=FAST) as api:
            index = VectorizeIndex(api, INDEX, 3, batch_size=2)
            assert await index.upsert(records) == 5
            assert len(index.mutation_ids) == 3
            return await index.query([1.0, 4.0, 0.0], top_k=2, namespace="t:a")

    matches = _run(scenario())
    assert [m.id for m in matches] == ["v:4", "v:3"] and matches[0].metadata is None
    assert [e for e in fake.state.log if e[1] == "vectorize"] == [
        ("POST", "vectorize", "2"),
        ("POST", "vectorize", "2"),
        ("POST", "vectorize", "1"),
    ]
    with pytest.raises(InvalidRequestError, match="dimensions"):
        ndjson_lines([VectorRecord(id="x", values=[1.0])], 3)


def test_kv_and_r2_keys_are_url_encoded_and_missing_keys_are_none(fake: FakeServer) -> None:
    async def scenario() -> tuple[Any, ...]:
        async with CloudflareAPI(ACCOUNT, TOKEN, fake.base_url, retry=FAST) as api:
            kv = KVNamespaceStore(api, KV_NAMESPACE)
            r2 = R2ObjectStore(api, BUCKET)
            await kv.put("knowledge:a/b?c", "valor ç")
            await r2.put("packages/v 1/a#b.json", b"\x00\xff")
            return (
                await kv.get("knowledge:a/b?c"),
                await kv.get("absent"),
                await r2.get("packages/v 1/a#b.json"),
                await r2.get("absent"),
            )

    assert _run(scenario()) == ("valor ç", None, b"\x00\xff", None)
    assert fake.state.kv == {"knowledge:a/b?c": "valor ç"}
    assert set(fake.state.objects) == {"packages/v 1/a#b.json"}


def test_transport_failures_on_d1_are_not_blindly_repeated(fake: FakeServer) -> None:
    fake.state.dead = True

    async def scenario() -> None:
        async with CloudflareAPI(ACCOUNT, TOKEN, fake.base_url, retry=FAST) as api:
            await D1Database(api, DATABASE).query("SELECT 1")

    with pytest.raises(CloudflareAPIError, match="RemoteProtocolError") as info:
        _run(scenario())
    assert info.value.retryable and fake.state.received == 1  # sent once, answer lost


def test_d1_params_are_strings_and_batches_respect_limits() -> None:
    sql, params = string_params(
        "INSERT INTO t (a, b, c, d) VALUES (?, ?, ?, ?)", [1, None, "x", True]
    )
    assert sql == "INSERT INTO t (a, b, c, d) VALUES (?, NULL, ?, ?)" and params == ["1", "x", "1"]
    statements = [("INSERT INTO t (a) VALUES (?)", [str(i) * 50]) for i in range(10)]
    assert [len(b) for b in batches(statements, max_statements=4)] == [4, 4, 2]
    assert all(len(json.dumps(b)) <= 400 for b in batches(statements, max_bytes=400))
    assert render_statement("INSERT INTO t VALUES (?, ?, ?)", ["it's", None, 3]) == (
        "INSERT INTO t VALUES ('it''s', NULL, 3)"
    )
    with pytest.raises(ValueError):
        sql_literal("a\x00b")


def test_settings_precedence_placeholders_and_strict_environments(tmp_path: Path) -> None:
    toml = tmp_path / "wrangler.toml"
    toml.write_text(
        'name = "x"\naccount_id = "acc-top"\n'
        '[[kv_namespaces]]\nbinding = "KNOWLEDGE_KV"\nid = "00000000000000000000000000000001"\n'
        '[[r2_buckets]]\nbinding = "KNOWLEDGE_BUCKET"\nbucket_name = "top-bucket"\n'
        '[[d1_databases]]\nbinding = "KNOWLEDGE_DB"\ndatabase_name = "db"\n'
        'database_id = "00000000-0000-0000-0000-000000000000"\n'
        '[env.production]\n'
        '[[env.production.kv_namespaces]]\nbinding = "KNOWLEDGE_KV"\nid = "kv-prod"\n'
        '[[env.production.r2_buckets]]\nbinding = "KNOWLEDGE_BUCKET"\nbucket_name = "prod"\n'
        '[[env.production.d1_databases]]\nbinding = "KNOWLEDGE_DB"\ndatabase_id = "db-prod"\n'
        '[[env.production.vectorize]]\nbinding = "KNOWLEDGE_VECTORS"\nindex_name = "vec-prod"\n'
    )  # fmt: skip
    environ = {"CLOUDFLARE_API_TOKEN": TOKEN}
    with pytest.raises(ConfigError) as info:  # placeholders count as missing
        CloudflareSettings.resolve(wrangler_toml=toml, env=None, environ=environ)
    assert "KR_KV_NAMESPACE_ID" in info.value.message and "--d1-database-id" in info.value.message
    assert "pass --env dev or --env production" in info.value.message
    prod = CloudflareSettings.resolve(
        wrangler_toml=toml, env="production", environ=environ, options={"bucket": "opt-bucket"}
    )
    assert (prod.account_id, prod.bucket, prod.kv_namespace_id) == (
        "acc-top",
        "opt-bucket",
        "kv-prod",
    )
    assert (prod.d1_database_id, prod.vectorize_index) == ("db-prod", "vec-prod")
    with pytest.raises(ConfigError, match=r"no \[env.dev\]"):
        CloudflareSettings.resolve(wrangler_toml=toml, env="dev", environ=environ)
    with pytest.raises(ConfigError, match="CLOUDFLARE_API_TOKEN"):
        CloudflareSettings.resolve(wrangler_toml=toml, env="production", environ={})


# ----------------------------------------------------------------------------- the CLI


def _cli_env(monkeypatch: pytest.MonkeyPatch, server: FakeServer) -> None:
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", TOKEN)
    monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", ACCOUNT)
    monkeypatch.setenv("KR_R2_BUCKET", BUCKET)
    monkeypatch.setenv("KR_KV_NAMESPACE_ID", KV_NAMESPACE)
    monkeypatch.setenv("KR_D1_DATABASE_ID", DATABASE)
    monkeypatch.setenv("KR_VECTORIZE_INDEX", INDEX)


def test_cli_publishes_a_package_folder_and_a_rerun_does_nothing(
    fake: FakeServer,
    embedded: BuildResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _cli_env(monkeypatch, fake)
    monkeypatch.chdir(tmp_path)  # no wrangler.toml here: ids come from the environment
    folder = write_package(embedded.package, tmp_path / "out")
    args = ["publish", str(folder), "--state", str(tmp_path / "state"), "--api-base", fake.base_url]
    assert main(args) == 0
    out = capsys.readouterr().out
    version = embedded.package.knowledge_version
    assert "done  blob:shared.partition.bin" in out and "done  activate" in out
    assert f"knowledge version {version} active on Cloudflare account {ACCOUNT}" in out
    assert fake.state.kv[ACTIVE_VERSION_KEY] == version

    assert main(args) == 0
    assert "nothing to do" in capsys.readouterr().out
    assert main(["publish", str(tmp_path / "out"), *args[2:]]) == 0  # the --out parent works too
    capsys.readouterr()


def test_cli_publish_refuses_a_vectorize_index_of_other_dimensions_before_uploading(
    fake: FakeServer,
    embedded: BuildResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """An index made for another model (e.g. 384 for e5-small, the package is 256-d hash
    vectors; 1,024 for bge-m3) cannot take the package's vectors: said before anything moves."""
    _cli_env(monkeypatch, fake)
    monkeypatch.chdir(tmp_path)
    fake.state.dimensions = 384
    folder = write_package(embedded.package, tmp_path / "out")
    args = ["publish", str(folder), "--state", str(tmp_path / "state"), "--api-base", fake.base_url]
    assert main(args) == 1
    error = capsys.readouterr().err
    assert f"{INDEX} holds 384-dimensional vectors; this package's have 256" in error
    assert f"wrangler vectorize create {INDEX} --dimensions=256 --metric=cosine" in error
    assert fake.state.writes() == []
    fake.state.dimensions = 256
    assert main(args) == 0
    capsys.readouterr()


def test_cli_rollback_on_cloudflare_restores_the_previous_version(
    fake: FakeServer,
    embedded: BuildResult,
    second: CompiledPackage,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    _cli_env(monkeypatch, fake)
    monkeypatch.chdir(tmp_path)
    journal = FileJournal(tmp_path / "journal")
    first = embedded.package.knowledge_version
    _run(_publish(fake, embedded.package.files(), journal))
    _run(_publish(fake, second.files(), journal))
    assert main(["rollback", "--api-base", fake.base_url]) == 0
    assert fake.state.kv[ACTIVE_VERSION_KEY] == first
    assert fake.state.kv[PREVIOUS_VERSION_KEY] == second.knowledge_version
    assert f"knowledge version {first} active on Cloudflare" in capsys.readouterr().out
    assert main(["rollback", "--api-base", fake.base_url]) == 0  # and back again
    assert fake.state.kv[ACTIVE_VERSION_KEY] == second.knowledge_version


def test_cli_rollback_on_cloudflare_refuses_a_missing_previous_package(
    fake: FakeServer,
    embedded: BuildResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _cli_env(monkeypatch, fake)
    monkeypatch.chdir(tmp_path)
    _run(_publish(fake, embedded.package.files(), FileJournal(tmp_path / "journal")))
    active = embedded.package.knowledge_version
    assert main(["rollback", "--api-base", fake.base_url]) == 1  # nothing recorded before
    fake.state.kv[PREVIOUS_VERSION_KEY] = "kv-0000000000000000"  # never uploaded
    assert main(["rollback", "--api-base", fake.base_url]) == 1
    assert fake.state.kv[ACTIVE_VERSION_KEY] == active  # unchanged


def test_cli_errors_are_one_line_without_traceback(
    fake: FakeServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    state = ["--state", str(tmp_path / "state")]
    assert main(["publish", *state]) == 1
    assert "nothing to publish" in capsys.readouterr().err
    assert main(["publish", "../etc", *state]) == 1
    assert "neither a package folder nor a knowledge version" in capsys.readouterr().err
    assert main(["publish", "kv-0000", *state]) == 1
    assert "neither a package folder nor a version" in capsys.readouterr().err
    assert main(["publish", "--persist-to", str(tmp_path), *state]) == 1
    assert "--persist-to is for --local" in capsys.readouterr().err
    assert main(["publish", "--local", "--api-base", "http://x", *state]) == 1
    assert "--api-base is for remote publishing" in capsys.readouterr().err
    assert main(["build", str(KNOWLEDGE), *state, "--embedder", "none"]) == 0
    capsys.readouterr()
    monkeypatch.delenv("CLOUDFLARE_API_TOKEN", raising=False)
    assert main(["publish", *state, "--api-base", fake.base_url]) == 1
    assert "error [config_error]: cannot publish to Cloudflare, missing: CLOUDFLARE_API_TOKEN" in (
        capsys.readouterr().err
    )
    _cli_env(monkeypatch, fake)
    monkeypatch.setenv("CLOUDFLARE_API_TOKEN", "not-the-token")
    assert main(["publish", *state, "--api-base", fake.base_url]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error [publish_failed]: publishing kv-") and "HTTP 403" in err, err
    assert "Traceback" not in err and "not-the-token" not in err


# ----------------------------------------------------------------------------- wrangler --local


def _wrangler_available() -> bool:
    node = Path(sys.executable).parent / "node"
    return (ROOT / "node_modules" / ".bin" / "wrangler").exists() and (
        node.exists() or shutil.which("node") is not None
    )


def _wrangler(*args: str, persist: Path) -> bytes:
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update({"WRANGLER_SEND_METRICS": "false", "NO_COLOR": "1", "CI": "1"})
    command = [str(ROOT / "node_modules" / ".bin" / "wrangler"), *args]
    command += ["--local", "--persist-to", str(persist)]
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, timeout=180, check=True)
    return done.stdout


@pytest.mark.skipif(not _wrangler_available(), reason="wrangler or Node >= 22 not installed")
def test_cli_publish_local_writes_wranglers_state(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(ROOT)
    state = ["--state", str(tmp_path / "state")]
    persist = tmp_path / "wrangler-state"
    assert main(["build", str(KNOWLEDGE), *state, "--embedder", "hash"]) == 0
    capsys.readouterr()
    assert main(["publish", "--local", "--persist-to", str(persist), *state]) == 0
    out = capsys.readouterr().out
    assert "Vectorize has no local mode" in out and "373 section vectors" in out
    version = re.search(r"knowledge version (kv-[0-9a-f]+) active on wrangler", out)
    assert version, out
    version_id = version.group(1)

    active = _wrangler("kv", "key", "get", "--binding", "KNOWLEDGE_KV", ACTIVE_VERSION_KEY,
                       persist=persist)  # fmt: skip
    assert active.decode() == version_id
    local = FileJournal(tmp_path / "state" / "publish-journal")
    key = package_key(version_id, "shared.partition.bin")  # binary: byte-identical through --pipe
    stored = _wrangler("r2", "object", "get", f"knowledge-router-packages/{key}", "--pipe",
                       persist=persist)  # fmt: skip
    assert stored == (tmp_path / "state" / "r2" / key).read_bytes()
    counted = json.loads(
        _wrangler(
            "d1",
            "execute",
            "KNOWLEDGE_DB",
            "--json",
            "--command",
            f"SELECT count(*) AS n FROM knowledge_sections WHERE version = '{version_id}'",
            persist=persist,
        )
    )
    assert counted[0]["results"][0]["n"] == 373
    assert local.root.is_dir() and any(local.root.iterdir())

    assert main(["publish", "--local", "--persist-to", str(persist), *state]) == 0
    assert "nothing to do" in capsys.readouterr().out  # journaled: not one wrangler call


# ----------------------------------------------------------------------------- delta and gc


@pytest.fixture(scope="module")
def embedded_edit(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    """The sample knowledge with one tenant document edited (hash vectors)."""
    folder = tmp_path_factory.mktemp("kb-edit")
    shutil.copytree(KNOWLEDGE, folder, dirs_exist_ok=True)
    tenant_doc = next(
        p for p in sorted(folder.rglob("*.md")) if "tenant: construtora" in p.read_text()
    )
    tenant_doc.write_text(tenant_doc.read_text() + "\nUma linha nova sobre andaimes.\n")
    return build_knowledge(folder, encoder=HashEmbedder())


def test_delta_publish_and_gc_through_the_api(
    fake: FakeServer, embedded: BuildResult, embedded_edit: BuildResult, tmp_path: Path
) -> None:
    """The second version sends only what R2 lacks (presence by a one-key listing, no GET of
    a body); ``kr gc --keep 0`` with a third version drops the first one's files, rows and
    vectors, and the two kept versions stay whole."""
    from router.ops.gc import collect, plan_gc
    from router.package.version.content_names import is_lazy

    journal = FileJournal(tmp_path / "journal")
    first, second = embedded.package.files(), embedded_edit.package.files()
    _run(_publish(fake, first, journal))
    mark = len(fake.state.log)
    report = _run(_publish(fake, second, journal))
    v1, v2 = embedded.package.knowledge_version, report.version
    puts = [k for m, s, k in fake.state.log[mark:] if (m, s) == ("PUT", "r2")]
    expected = {n for n in second if not is_lazy(n) or n not in first}
    assert sorted(puts) == sorted(package_key(v2, n) for n in expected)
    assert report.blobs_uploaded == len(expected) and report.blobs_reused == len(second) - len(
        expected
    )
    assert report.blobs_reused > report.blobs_uploaded
    assert all(fake.state.objects[package_key(v2, n)] == b for n, b in second.items())

    third_build = build_knowledge(KNOWLEDGE)  # without vectors: a third version id
    third = third_build.package.files()
    _run(_publish(fake, third, journal))
    v3 = third_build.package.knowledge_version

    async def gc() -> Any:
        async with CloudflareAPI(ACCOUNT, TOKEN, fake.base_url, retry=FAST) as api:
            blobs = R2ObjectStore(api, BUCKET)
            rows = D1RelationalStore(D1Database(api, DATABASE))
            vectors = VectorizeIndex(api, INDEX, 0)
            kv = KVNamespaceStore(api, KV_NAMESPACE)
            plan = await plan_gc(blobs, kv, rows, 0, with_vectors=True)
            forgotten: list[str] = []

            async def forget(version: str) -> None:
                forgotten.append(version)
                await journal.discard(f"cloudflare:{ACCOUNT}:test", version)

            await collect(plan, blobs, rows, vectors, forget)
            return plan, forgotten

    plan, forgotten = _run(gc())
    assert (plan.kept, plan.dropped, forgotten) == ([v3, v2], [v1], [v1])
    assert fake.state.count("documents", v1) == 0 and fake.state.count("documents", v2) > 0
    assert not [k for k in fake.state.vectors if k.startswith(f"{v1}:")]
    assert [k for k in fake.state.vectors if k.startswith(f"{v2}:")]
    for version, files in ((v2, second), (v3, third)):
        for name, blob in files.items():
            assert fake.state.objects[package_key(version, name)] == blob
    assert not [k for k in fake.state.objects if k.startswith(f"packages/{v1}/")]
    assert not _run(journal.done(f"cloudflare:{ACCOUNT}:test", v1))
    assert _run(journal.done(f"cloudflare:{ACCOUNT}:test", v2))
