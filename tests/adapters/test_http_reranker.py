"""The HTTP /rerank adapter against a local fake endpoint (a small ASGI app through httpx's
ASGI transport): the request shapes (Cohere/Jina and TEI), results mapped back by index, and
every failure — HTTP errors, other shapes, bad indexes, a timeout, a refused connection — a
``RerankError`` that never shows the API key."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse

from router.adapters.http_reranker import HttpReranker
from router.errors import ConfigError, RerankError
from router.ports import Reranker

API_KEY = "rk-test-secret-42"
PASSAGES = ["a cat sat", "the dog barked at the cat", "unrelated text"]


def fake_rerank_app(received: list[dict[str, Any]]) -> FastAPI:
    """Scores a document by how many query words it holds; answers best first, like the real
    services, and only the ``top_n`` best."""
    app = FastAPI()

    def score(query: str, text: str) -> float:
        return float(sum(word in text.split() for word in query.split()))

    @app.post("/v1/rerank")
    async def cohere(request: Request) -> dict[str, Any]:
        body = await request.json()
        received.append({"body": body, "auth": request.headers.get("authorization")})
        scored = [(i, score(body["query"], d)) for i, d in enumerate(body["documents"])]
        scored.sort(key=lambda item: -item[1])
        top = scored[: body.get("top_n", len(scored))]
        return {"results": [{"index": i, "relevance_score": s} for i, s in top], "id": "x"}

    @app.post("/tei/rerank")
    async def tei(request: Request) -> list[dict[str, Any]]:
        body = await request.json()
        received.append({"body": body})
        scored = [(i, score(body["query"], t)) for i, t in enumerate(body["texts"])]
        return [{"index": i, "score": s} for i, s in sorted(scored, key=lambda x: -x[1])]

    @app.post("/short/rerank")
    async def short(request: Request) -> dict[str, Any]:
        return {"results": [{"index": 1, "relevance_score": 0.9}]}  # only the best one

    @app.post("/bad-index/rerank")
    async def bad_index(request: Request) -> dict[str, Any]:
        return {"results": [{"index": 7, "relevance_score": 0.9}]}

    @app.post("/wrong-shape/rerank")
    async def wrong_shape(request: Request) -> dict[str, Any]:
        return {"data": [0.1, 0.2]}

    @app.post("/not-json/rerank")
    async def not_json(request: Request) -> PlainTextResponse:
        return PlainTextResponse("<html>gateway</html>")

    @app.post("/down/rerank")
    async def down(request: Request) -> JSONResponse:
        return JSONResponse({"error": f"bad key {request.headers.get('authorization')}"}, 503)

    return app


def reranker(path: str, received: list[dict[str, Any]] | None = None, **kw: Any) -> HttpReranker:
    transport = httpx.ASGITransport(app=fake_rerank_app(received if received is not None else []))
    client = httpx.AsyncClient(transport=transport)
    return HttpReranker(f"http://rerank.test{path}", client=client, **kw)


def test_it_is_a_reranker_port() -> None:
    assert isinstance(reranker("/v1/rerank", model="m"), Reranker)


def test_cohere_shape_request_and_scores_mapped_back_by_index() -> None:
    received: list[dict[str, Any]] = []
    adapter = reranker("/v1/rerank", received, model="rerank-v3.5", api_key=API_KEY)
    scores = asyncio.run(adapter.rerank("the cat", PASSAGES))
    assert scores == [1.0, 2.0, 0.0]  # answered best first, returned in the passages' order
    [call] = received
    assert call["body"] == {
        "query": "the cat",
        "documents": PASSAGES,
        "top_n": 3,
        "model": "rerank-v3.5",
    }
    assert call["auth"] == f"Bearer {API_KEY}"
    assert adapter.model == "rerank-v3.5"


def test_without_a_model_or_key_neither_is_sent() -> None:
    received: list[dict[str, Any]] = []
    adapter = reranker("/v1/rerank", received)
    asyncio.run(adapter.rerank("cat", PASSAGES))
    assert "model" not in received[0]["body"] and received[0]["auth"] is None
    assert adapter.model == "cohere:http://rerank.test/v1/rerank"


def test_tei_shape() -> None:
    received: list[dict[str, Any]] = []
    adapter = reranker("/tei/rerank", received, api="tei")
    assert asyncio.run(adapter.rerank("the cat", PASSAGES)) == [1.0, 2.0, 0.0]
    assert received[0]["body"] == {"query": "the cat", "texts": PASSAGES, "truncate": True}


def test_passages_left_out_rank_below_the_scored_ones() -> None:
    scores = asyncio.run(reranker("/short/rerank").rerank("q", PASSAGES))
    assert scores == pytest.approx([-0.1, 0.9, -0.1])


def test_no_passages_no_request() -> None:
    received: list[dict[str, Any]] = []
    assert asyncio.run(reranker("/v1/rerank", received).rerank("q", [])) == []
    assert received == []


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/down/rerank", "HTTP 503"),
        ("/bad-index/rerank", "index 7 outside 0..2"),
        ("/wrong-shape/rerank", "response is not results"),
        ("/not-json/rerank", "not valid JSON"),
    ],
)
def test_failures_are_rerank_errors_without_the_key(path: str, message: str) -> None:
    with pytest.raises(RerankError, match=message) as caught:
        asyncio.run(reranker(path, api_key=API_KEY).rerank("q", PASSAGES))
    assert API_KEY not in caught.value.message and caught.value.code == "rerank_failed"


def test_a_timeout_is_a_rerank_error() -> None:
    def hang(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("no answer", request=request)

    client = httpx.AsyncClient(transport=httpx.MockTransport(hang))
    adapter = HttpReranker("http://rerank.test/rerank", client=client, timeout_s=0.25)
    with pytest.raises(RerankError, match=r"timed out after 0\.25s"):
        asyncio.run(adapter.rerank("q", PASSAGES))


def test_a_refused_connection_is_a_rerank_error() -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def ask() -> list[float]:
        async with HttpReranker(f"http://127.0.0.1:{port}/rerank", timeout_s=1.0) as adapter:
            return await adapter.rerank("q", PASSAGES)

    with pytest.raises(RerankError, match="request failed"):
        asyncio.run(ask())


def test_an_unknown_api_is_refused() -> None:
    with pytest.raises(ConfigError, match="api"):
        HttpReranker("http://rerank.test/rerank", api="openai")  # type: ignore[arg-type]
