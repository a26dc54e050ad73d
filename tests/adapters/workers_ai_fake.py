"""A fake of Workers AI's text-embedding models, reachable three ways: an httpx ``MockTransport``,
a real HTTP server on 127.0.0.1 (for ``kr`` commands, through ``CLOUDFLARE_API_BASE_URL``) and a
Worker ``AI`` binding. One core answers all three, so the build (REST) and the Worker (binding)
meet the same model.

It behaves like ``POST /client/v4/accounts/{account}/ai/run/{model}``: the bearer token is
checked (401), unknown models and accounts are 404s, the documented schema is enforced — ``text``
an array of 1..100 non-empty strings (400 otherwise, Cloudflare's code 5006), ``pooling`` only
``mean``/``cls`` and only for models that take it — and a body over ``MAX_BODY_BYTES`` is a 413.
Vectors are deterministic: hashed character trigrams (texts sharing words land close, so the
vector stage finds real neighbours) in the model's dimensions, and a different vector for each
pooling (as the real models give), so a query embedded with another pooling than its passages
would not match them. ``fail(status, times)`` makes the next calls fail.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx

from router.vectors.hash_embedder import HashEmbedder

__all__ = [
    "ACCOUNT",
    "MAX_BODY_BYTES",
    "TOKEN",
    "FakeWorkersAi",
    "serve",
]

ACCOUNT = "0123456789abcdef0123456789abcdef"
TOKEN = "cf-ai-test-token-s3cr3t"
MAX_BODY_BYTES = 150_000
"""The fake's own bound on a request body: Cloudflare documents none for these models, but a
hundred 2,000-character passages (200 kB) are more than an API should be sent in one call."""
DIMENSIONS = {
    "@cf/baai/bge-m3": 1024,
    "@cf/baai/bge-small-en-v1.5": 384,
    "@cf/baai/bge-base-en-v1.5": 768,
    "@cf/baai/bge-large-en-v1.5": 1024,
}
TAKES_POOLING = {model for model in DIMENSIONS if model.endswith("-en-v1.5")}
PREFIX = "/client/v4/accounts/"


@dataclass
class Call:
    """One request that reached a model: its model and body (failed ones too)."""

    model: str
    body: dict[str, Any]
    status: int


@dataclass
class FakeWorkersAi:
    dimensions_override: int | None = None  # answer vectors of this size (a broken model)
    calls: list[Call] = field(default_factory=list)
    requests: int = 0  # HTTP requests received, refused ones included
    failures: list[tuple[int, str | None]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what tests ask ------------------------------------------------------------------------

    def fail(self, status: int, times: int = 1, retry_after: str | None = None) -> None:
        """The next ``times`` calls answer ``status`` (with ``Retry-After`` if given)."""
        self.failures += [(status, retry_after)] * times

    def vector(self, text: str, model: str = "@cf/baai/bge-m3", pooling: str | None = None) -> Any:
        """The vector the fake gives ``text``: trigram hashes; ``cls`` pooling rotates it (a
        different, equally good space)."""
        hashed = HashEmbedder()
        hashed.dimensions = self.dimensions_override or DIMENSIONS[model]
        values = hashed.vector(text)
        return values[1:] + values[:1] if pooling == "cls" else values

    def texts(self, status: int = 200) -> list[str]:
        """Every text embedded by a call that answered ``status``, in order."""
        return [text for call in self.calls if call.status == status for text in call.body["text"]]

    def successful(self) -> list[Call]:
        return [call for call in self.calls if call.status == 200]

    # --- the core -------------------------------------------------------------------------------

    def answer(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], str | None]:
        """(status, result or Cloudflare error, Retry-After) of one embedding call."""
        status, payload, retry_after = self._answer(model, body)
        with self.lock:
            self.calls.append(Call(model, body, status))
        return status, payload, retry_after

    def _answer(self, model: str, body: dict[str, Any]) -> tuple[int, dict[str, Any], str | None]:
        if model not in DIMENSIONS:
            return 404, _error(5007, f"No such model {model}"), None
        with self.lock:
            if self.failures:
                status, retry_after = self.failures.pop(0)
                return status, _error(3040, "Capacity temporarily exceeded"), retry_after
        problem = _schema_problem(model, body)
        if problem:
            return 400, _error(5006, problem), None
        pooling = body.get("pooling")
        data = [self.vector(text, model, pooling) for text in body["text"]]
        shape = [len(data), len(data[0])]
        return 200, {"shape": shape, "data": data, "pooling": pooling or "mean"}, None

    # --- the three ways in ----------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        """An httpx ``MockTransport`` handler."""
        status, payload, headers = self.http(
            request.method, request.url.path, request.headers.get("authorization"), request.content
        )
        return httpx.Response(status, json=payload, headers=headers)

    def http(
        self, method: str, path: str, authorization: str | None, content: bytes
    ) -> tuple[int, dict[str, Any], dict[str, str]]:
        """The REST endpoint: (status, JSON envelope, headers)."""
        with self.lock:
            self.requests += 1
        if authorization != f"Bearer {TOKEN}":
            return 401, _envelope(None, _error(10000, "Authentication error")), {}
        account, _, rest = unquote(path).removeprefix(PREFIX).partition("/")
        if not path.startswith(PREFIX) or account != ACCOUNT or not rest.startswith("ai/run/"):
            return 404, _envelope(None, _error(7003, "Could not route")), {}
        if method != "POST":
            return 405, _envelope(None, _error(10405, "Method not allowed")), {}
        if len(content) > MAX_BODY_BYTES:
            return 413, _envelope(None, _error(10413, "Request entity too large")), {}
        try:
            body = json.loads(content)
        except ValueError:
            return 400, _envelope(None, _error(5006, "body is not JSON")), {}
        status, payload, retry_after = self.answer(rest.removeprefix("ai/run/"), body)
        headers = {"Retry-After": retry_after} if retry_after else {}
        if status != 200:
            return status, _envelope(None, payload), headers
        return 200, _envelope(payload, None), headers

    def binding(self) -> Any:
        """A Worker ``AI`` binding over the same models."""
        return _Binding(self)


class _Binding:
    def __init__(self, fake: FakeWorkersAi) -> None:
        self.fake = fake

    async def run(self, model: str, inputs: dict[str, Any]) -> dict[str, Any]:
        status, payload, _ = self.fake.answer(model, inputs)
        if status != 200:
            raise RuntimeError(f"AiError: {payload}")
        return payload


def _error(code: int, message: str) -> dict[str, Any]:
    return {"code": code, "message": message}


def _envelope(result: Any, error: dict[str, Any] | None) -> dict[str, Any]:
    errors = [error] if error else []
    return {"result": result, "success": not errors, "errors": errors, "messages": []}


def _schema_problem(model: str, body: Any) -> str | None:
    """What the model's input schema refuses in ``body``, or None."""
    if not isinstance(body, dict) or set(body) - {"text", "pooling"}:
        return "Type mismatch of '/', 'object' not in allowed keys"
    texts = body.get("text")
    if not isinstance(texts, list) or not texts:
        return "Required property '/text' is an array of at least 1 item"
    if len(texts) > 100:
        return f"Length of '/text' must be <= 100, got {len(texts)}"
    if not all(isinstance(text, str) and text for text in texts):
        return "Every '/text' item must be a non-empty string"
    pooling = body.get("pooling")
    if pooling is not None and (model not in TAKES_POOLING or pooling not in ("mean", "cls")):
        return f"'/pooling' {pooling!r} not accepted by {model}"
    return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    fake: FakeWorkersAi

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_POST(self) -> None:
        content = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = urlsplit(self.path).path
        status, payload, headers = self.fake.http(
            "POST", path, self.headers.get("Authorization"), content
        )
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@contextmanager
def serve(fake: FakeWorkersAi) -> Iterator[str]:
    """Serve ``fake`` on 127.0.0.1; yields its API base URL (``.../client/v4``)."""
    handler = type("Handler", (_Handler,), {"fake": fake})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/client/v4"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
