"""The OpenAI-compatible generator (the optional LLM answer) against a real local server.

Why a real server: the adapter's error mapping (refused connection, timeout, HTTP 500, bad JSON)
only means something over an actual socket; the fake runs uvicorn on 127.0.0.1 in a thread.
The stage's own rules (messages, citation checks) are in ``tests/support/test_generation.py``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from router.adapters.local.openai_generator import OpenAICompatibleGenerator
from router.contract import AgentKnowledgeContext
from router.errors import GenerationError
from router.ports import Generator
from router.support.generation import (
    build_messages,
    check_citations,
)
from tests.common import LLM_QUESTION, llm_context

API_KEY = "sk-test-secret-123"


@dataclass
class FakeLLM:
    """What the fake endpoint received, and what it answers with."""

    reply: str = "A PT vale 8 horas [workPermit.validity#prazo]."
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)


def _fake_app(state: FakeLLM) -> FastAPI:
    app = FastAPI()

    async def record(request: Request) -> None:
        state.requests.append(await request.json())
        state.headers.append(dict(request.headers))

    @app.post("/ok/v1/chat/completions")
    async def ok(request: Request) -> dict[str, Any]:
        await record(request)
        message = {"role": "assistant", "content": state.reply}
        return {"model": "fake-served-model", "choices": [{"index": 0, "message": message}]}

    @app.post("/fail/v1/chat/completions")
    async def fail(request: Request) -> Response:
        await record(request)
        echoed = request.headers.get("authorization", "")
        return PlainTextResponse(f"upstream exploded; you sent {echoed}", status_code=500)

    @app.post("/slow/v1/chat/completions")
    async def slow(request: Request) -> dict[str, Any]:
        await asyncio.sleep(1.0)
        return {"choices": [{"message": {"content": "tarde demais"}}]}

    @app.post("/badjson/v1/chat/completions")
    async def bad_json(request: Request) -> Response:
        return Response(content=b"{not json", media_type="application/json")

    @app.post("/badshape/v1/chat/completions")
    async def bad_shape(request: Request) -> Response:
        return JSONResponse({"choices": []})

    return app


@dataclass(frozen=True)
class FakeServer:
    state: FakeLLM
    port: int

    def url(self, scenario: str) -> str:
        return f"http://127.0.0.1:{self.port}/{scenario}/v1"


@pytest.fixture(scope="module")
def fake_llm() -> Iterator[FakeServer]:
    state = FakeLLM()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        _fake_app(state),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="off",
        ws="none",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("fake LLM server did not start")
        time.sleep(0.01)
    try:
        yield FakeServer(state=state, port=port)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@pytest.fixture
def fake(fake_llm: FakeServer) -> FakeServer:
    fake_llm.state.requests.clear()
    fake_llm.state.headers.clear()
    fake_llm.state.reply = FakeLLM.reply
    return fake_llm


async def _generate(generator: OpenAICompatibleGenerator, context: AgentKnowledgeContext) -> Any:
    async with generator:
        return await generator.generate(LLM_QUESTION, context)


def test_generate_posts_messages_and_parses_citations(fake: FakeServer) -> None:
    context = llm_context()
    generator = OpenAICompatibleGenerator(fake.url("ok"), "fake-model", api_key=API_KEY)
    port: Generator = generator
    assert port.model == "fake-model"

    answer = asyncio.run(_generate(generator, context))

    assert answer.text == FakeLLM.reply
    assert answer.cited_ids == ["workPermit.validity#prazo"]
    assert answer.model == "fake-served-model"
    assert check_citations(answer, context).ok
    [body] = fake.state.requests
    assert body == {
        "model": "fake-model",
        "messages": build_messages(LLM_QUESTION, context),
        "temperature": 0,
    }
    assert fake.state.headers[0]["authorization"] == f"Bearer {API_KEY}"


def test_generate_without_api_key_sends_no_auth(fake: FakeServer) -> None:
    fake.state.reply = "NÃO SEI"
    answer = asyncio.run(_generate(OpenAICompatibleGenerator(fake.url("ok"), "m"), llm_context()))
    assert answer.cited_ids == []
    assert "authorization" not in fake.state.headers[0]


def test_server_error_raises_without_leaking_key(fake: FakeServer) -> None:
    generator = OpenAICompatibleGenerator(fake.url("fail"), "m", api_key=API_KEY)
    with pytest.raises(GenerationError) as info:
        asyncio.run(_generate(generator, llm_context()))
    assert "HTTP 500" in info.value.message
    assert API_KEY not in str(info.value)
    assert info.value.code == "generation_failed" and info.value.http_status == 502


def test_connection_refused_raises() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    generator = OpenAICompatibleGenerator(f"http://127.0.0.1:{port}/v1", "m", api_key=API_KEY)
    with pytest.raises(GenerationError, match="request failed") as info:
        asyncio.run(_generate(generator, llm_context()))
    assert API_KEY not in str(info.value)


def test_timeout_raises(fake: FakeServer) -> None:
    generator = OpenAICompatibleGenerator(fake.url("slow"), "m", timeout_s=0.2)
    started = time.monotonic()
    with pytest.raises(GenerationError, match=r"timed out after 0\.2s"):
        asyncio.run(_generate(generator, llm_context()))
    assert time.monotonic() - started < 0.9


@pytest.mark.parametrize(
    ("scenario", "message"),
    [("badjson", "not valid JSON"), ("badshape", "no choices")],
)
def test_malformed_response_raises(fake: FakeServer, scenario: str, message: str) -> None:
    generator = OpenAICompatibleGenerator(fake.url(scenario), "m")
    with pytest.raises(GenerationError, match=message):
        asyncio.run(_generate(generator, llm_context()))
