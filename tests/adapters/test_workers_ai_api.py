"""Production vectors: section vectors from Workers AI through the REST API, against a fake of it.

What a user relies on: ``kr build --embedder workers-ai:<model>`` stays within the API's limits,
survives rate limits and hiccups, fails with a clear error when the API keeps failing, pays for
each passage once (the vector cache), and makes a package whose vectors the Worker — and the
local commands — query with the same model, called the same way.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from kr.answering import package_answerer
from kr.cli import main
from kr.local import local_state, local_vector_stage
from router.adapters.cloudflare import WorkerSettings, bindings, build_service
from router.adapters.cloudflare_api import CloudflareAPIError, RetryPolicy
from router.adapters.cloudflare_api.ai import WorkersAiEncoder, workers_ai_encoder
from router.adapters.cloudflare_api.config import CloudflareAccount
from router.compile.build import build_knowledge
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.errors import RouterError
from router.ops.publish import publish_package
from router.package.reader import load_package
from router.service import KnowledgeService
from router.vectors.passages import MAX_PASSAGE_CHARS
from router.vectors.records import section_records
from tests.adapters.cloudflare_fakes import FakeKV, FakeR2, FakeVectorize, fake_env
from tests.adapters.workers_ai_fake import ACCOUNT, DIMENSIONS, TOKEN, FakeWorkersAi, serve
from tests.common import KNOWLEDGE, TODAY

BGE_M3 = "@cf/baai/bge-m3"
BGE_SMALL = "@cf/baai/bge-small-en-v1.5"
LOW_LEXICAL = "para quem ligo se alguém passar mal?"  # weak lexically: reaches the vector stage
FAST = RetryPolicy(attempts=4, base_delay_s=0.0, max_delay_s=0.0)
PATIENT = RouterConfig(budget=RetrievalBudget(max_latency_ms=60_000))  # a busy CI machine


def _encoder(
    fake: FakeWorkersAi,
    model: str = BGE_M3,
    *,
    token: str = TOKEN,
    handler: Callable[[httpx.Request], httpx.Response] | None = None,
) -> WorkersAiEncoder:
    transport = httpx.MockTransport(handler or fake.handle)
    account = CloudflareAccount(ACCOUNT, token, "https://api.cloudflare.test/client/v4")
    client = httpx.AsyncClient(transport=transport)
    return workers_ai_encoder(model, account, retry=FAST, client=client)


@pytest.fixture
def vector_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "vectors"
    monkeypatch.setattr("router.compile.vector_cache.DEFAULT_CACHE_DIR", folder)
    return folder


# ----------------------------------------------------------------------------- the API's limits


def test_batches_stay_within_the_models_limit_and_keep_the_order() -> None:
    fake = FakeWorkersAi()
    texts = [f"seção {i}: permissão de trabalho em altura" for i in range(250)]
    with _encoder(fake) as encoder:
        vectors = encoder.encode(texts, "passage")
    assert [len(call.body["text"]) for call in fake.calls] == [100, 100, 50]
    assert all(call.status == 200 for call in fake.calls)  # the fake refuses > 100 texts
    assert vectors[137] == fake.vector(texts[137]) and len(vectors) == 250


def test_long_passages_are_split_so_no_request_body_is_too_big() -> None:
    fake = FakeWorkersAi()
    texts = [f"{i} " + "análise preliminar de riscos " * 80 for i in range(120)]
    texts = [text[:MAX_PASSAGE_CHARS] for text in texts]  # the longest passage a build sends
    with _encoder(fake) as encoder:
        vectors = encoder.encode(texts, "passage")
    assert fake.requests == len(fake.calls) and all(c.status == 200 for c in fake.calls)
    assert fake.texts() == texts and len(fake.calls) > 2  # the fake answers 413 above 150 kB
    assert vectors[-1] == fake.vector(texts[-1])


# ----------------------------------------------------------------------------- failures


def test_rate_limits_and_server_errors_are_retried_then_succeed() -> None:
    fake = FakeWorkersAi()
    fake.fail(429, times=2, retry_after="0")
    fake.fail(500)
    with _encoder(fake) as encoder:
        vectors = encoder.encode(["APR", "PT"], "passage")
    assert [call.status for call in fake.calls] == [429, 429, 500, 200]
    assert vectors == [fake.vector("APR"), fake.vector("PT")]


def test_a_timeout_is_retried() -> None:
    fake = FakeWorkersAi()
    seen: list[str] = []

    def slow_once(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        if len(seen) == 1:
            raise httpx.ReadTimeout("timed out", request=request)
        return fake.handle(request)

    with _encoder(fake, handler=slow_once) as encoder:
        assert encoder.encode(["EPI"], "passage") == [fake.vector("EPI")]
    assert seen == [f"/client/v4/accounts/{ACCOUNT}/ai/run/{BGE_M3}"] * 2


def test_a_persistent_failure_is_a_router_error_naming_the_model_and_status() -> None:
    fake = FakeWorkersAi()
    fake.fail(503, times=50)
    with _encoder(fake) as encoder, pytest.raises(CloudflareAPIError) as caught:
        encoder.encode(["APR"], "passage")
    error = caught.value
    assert isinstance(error, RouterError) and error.status == 503 and error.retryable
    assert BGE_M3 in error.message and "HTTP 503" in error.message
    assert len(fake.calls) == FAST.attempts  # bounded: then it gives up


def test_a_bad_token_is_not_retried_and_never_printed() -> None:
    fake = FakeWorkersAi()
    with (
        _encoder(fake, token="wrong-s3cr3t") as encoder,
        pytest.raises(CloudflareAPIError) as caught,
    ):
        encoder.encode(["APR"], "passage")
    assert caught.value.status == 401 and fake.requests == 1
    assert "CLOUDFLARE_API_TOKEN" in caught.value.message
    assert "wrong-s3cr3t" not in caught.value.message


def test_vectors_of_the_wrong_size_are_refused() -> None:
    fake = FakeWorkersAi(dimensions_override=768)
    with _encoder(fake) as encoder, pytest.raises(CloudflareAPIError, match="1024 dimensions"):
        encoder.encode(["APR"], "passage")


def test_kr_build_without_credentials_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("CLOUDFLARE_API_TOKEN", raising=False)
    monkeypatch.delenv("CLOUDFLARE_ACCOUNT_ID", raising=False)
    monkeypatch.chdir(tmp_path)
    args = ["build", str(KNOWLEDGE), "--state", str(tmp_path / "s"), "--embedder"]
    assert main([*args, f"workers-ai:{BGE_M3}"]) == 1
    error = capsys.readouterr().err
    assert "CLOUDFLARE_API_TOKEN" in error and "CLOUDFLARE_ACCOUNT_ID" in error
    with pytest.raises(SystemExit):  # an unknown model is a usage error, listing the models
        main([*args, "workers-ai:@cf/baai/bge-huge"])
    assert BGE_SMALL in capsys.readouterr().err


# ----------------------------------------------------------------------------- kr build


@pytest.fixture
def cloudflare(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vector_cache: Path
) -> Iterator[FakeWorkersAi]:
    """The fake API on 127.0.0.1, and the environment ``kr`` reads its account from."""
    fake = FakeWorkersAi()
    with serve(fake) as base_url:
        monkeypatch.setenv("CLOUDFLARE_API_TOKEN", TOKEN)
        monkeypatch.setenv("CLOUDFLARE_ACCOUNT_ID", ACCOUNT)
        monkeypatch.setenv("CLOUDFLARE_API_BASE_URL", base_url)
        monkeypatch.chdir(tmp_path)
        yield fake


def _build(kb: Path, tmp_path: Path, model: str, *extra: str) -> dict[str, Any]:
    """``kr build kb --embedder workers-ai:model --out``; the written manifest."""
    out = tmp_path / "out"
    shutil.rmtree(out, ignore_errors=True)
    state = str(tmp_path / "state")
    embedder = f"workers-ai:{model}"
    command = ["build", str(kb), "--state", state, "--embedder", embedder, "--out", str(out)]
    assert main([*command, *extra]) == 0
    [manifest] = out.glob("*/manifest.json")
    loaded: dict[str, Any] = json.loads(manifest.read_text(encoding="utf-8"))
    return loaded


def test_kr_build_embeds_each_passage_once_and_a_rebuild_only_what_changed(
    cloudflare: FakeWorkersAi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    shutil.copytree(KNOWLEDGE, kb)
    manifest = _build(kb, tmp_path, BGE_M3)
    assert manifest["embedding"] == {"model": BGE_M3, "dimensions": 1024}
    first = cloudflare.texts()
    assert len(first) == len(set(first)) > 300  # every section, each once
    assert all("pooling" not in call.body for call in cloudflare.calls)

    cloudflare.calls.clear()
    _build(kb, tmp_path, BGE_M3, "--no-activate")  # nothing changed: nothing to pay for
    assert cloudflare.calls == []

    page = kb / "apr" / "apr.md"
    page.write_text(page.read_text(encoding="utf-8") + "\nRevisada em 2026.\n", encoding="utf-8")
    _build(kb, tmp_path, BGE_M3, "--no-activate")
    [changed] = cloudflare.texts()
    assert "Revisada em 2026." in changed

    cloudflare.calls.clear()  # the cache is per model: another model embeds everything again
    manifest = _build(kb, tmp_path, BGE_SMALL, "--no-activate")
    assert manifest["embedding"] == {"model": BGE_SMALL, "dimensions": 384}
    assert len(cloudflare.texts()) == len(first)
    assert {call.body.get("pooling") for call in cloudflare.calls} == {"cls"}
    capsys.readouterr()


def test_the_build_shows_an_embed_phase_for_the_sections_not_cached(vector_cache: Path) -> None:
    fake = FakeWorkersAi()
    phases: list[tuple[str, int]] = []
    advanced: dict[str, int] = {}

    def phase(name: str, total: int) -> Callable[[int], None]:
        phases.append((name, total))
        advanced[name] = 0
        return lambda count: advanced.__setitem__(name, advanced[name] + count)

    with _encoder(fake) as encoder:
        build_knowledge(KNOWLEDGE, encoder=encoder, phases=phase)
        embed = dict(phases)["embed"]
        assert embed == len(fake.texts()) == advanced["embed"]
        phases.clear()
        build_knowledge(KNOWLEDGE, encoder=encoder, phases=phase)
    assert "embed" not in dict(phases)  # all cached: no bar, no call
    assert len(fake.texts()) == embed


# ----------------------------------------------------------------------------- the query side


def test_local_answers_embed_the_question_with_the_packages_model(
    cloudflare: FakeWorkersAi, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What the gate and ``kr eval`` run (an answerer over the package), then what ``kr query``
    and ``kr serve`` run (the local service): the package's model embeds the question through
    the API, as the Worker does through its binding, and the vector stage finds sections."""
    _build(KNOWLEDGE, tmp_path, BGE_M3)
    [folder] = (tmp_path / "out").iterdir()
    package = load_package((folder / "manifest.json").read_bytes(), _reader(folder))
    before = len(cloudflare.calls)
    answer = package_answerer(package, today=TODAY)
    response = asyncio.run(answer(QueryRequest(query=LOW_LEXICAL)))
    stage = response.trace["stages"]["vector"]
    assert stage["model"] == BGE_M3 and stage["matches"], stage
    [question] = cloudflare.calls[before:]
    assert set(question.body) == {"text"}  # bge-m3: no prefix, no pooling, as for passages
    assert question.body["text"] == [LOW_LEXICAL.rstrip("?")]

    state = local_state(tmp_path / "state")  # what `kr query` and `kr serve` answer from
    service = KnowledgeService(
        kv=state.kv,
        blobs=state.blobs,
        load_vectors_on_activation=True,
        vector_stage=local_vector_stage,
        config=PATIENT,
    )
    response = asyncio.run(service.query(QueryRequest(query="quem chamo numa emergência?")))
    stage = response.trace["stages"]["vector"]
    assert stage["model"] == BGE_M3 and stage["matches"], stage
    assert cloudflare.calls[-1].body == {"text": ["quem chamo numa emergência"]}
    capsys.readouterr()


def _reader(folder: Path) -> Callable[[str], bytes]:
    return lambda name: (folder / name).read_bytes()


def _built_files(fake: FakeWorkersAi, model: str, kb: Path = KNOWLEDGE) -> dict[str, bytes]:
    with _encoder(fake, model) as encoder:
        return build_knowledge(kb, encoder=encoder).package.files()


def _worker_env(fake: FakeWorkersAi, dimensions: int) -> Any:
    return fake_env(
        KNOWLEDGE_KV=FakeKV(),
        KNOWLEDGE_BUCKET=FakeR2(),
        KNOWLEDGE_VECTORS=FakeVectorize(dimensions),
        AI=fake.binding(),
    )


def _publish(env: Any, files: dict[str, bytes]) -> None:
    """What ``kr publish`` does: the blobs, the vectors into Vectorize, then the KV switch."""
    cf = bindings(env)
    assert cf.blobs and cf.kv
    full = load_package(files["manifest.json"], files.__getitem__)
    index = cf.vector_index(full.vector_dimensions)
    assert index is not None
    asyncio.run(index.upsert(asyncio.run(section_records(full))))
    asyncio.run(publish_package(files, cf.blobs, cf.kv))


def _ask(service: Any) -> Any:
    return asyncio.run(service.query(QueryRequest(query=LOW_LEXICAL), today=TODAY))


@pytest.mark.parametrize("model", [BGE_M3, BGE_SMALL])
def test_the_worker_queries_a_built_package_with_the_same_model_called_the_same_way(
    model: str, vector_cache: Path
) -> None:
    fake = FakeWorkersAi()
    files = _built_files(fake, model)
    build_requests = len(fake.calls)
    env = _worker_env(fake, DIMENSIONS[model])
    _publish(env, files)

    response = _ask(build_service(bindings(env), WorkerSettings(), PATIENT))  # a cold isolate
    stage = response.trace["stages"]["vector"]
    assert stage["model"] == model and stage["matches"], stage
    assert response.metadata.fallback_triggered

    def options(calls: list[Any]) -> set[str]:
        return {json.dumps({k: v for k, v in c.body.items() if k != "text"}) for c in calls}

    worker_calls = fake.calls[build_requests:]
    assert worker_calls and options(worker_calls) == options(fake.calls[:build_requests])


def test_the_first_question_after_a_new_model_is_activated_uses_that_model(
    vector_cache: Path,
) -> None:
    """A Worker serving a bge-m3 package, then a bge-large one (same 1,024 dimensions, same
    index): the question that loads the new version is embedded with the new model."""
    fake = FakeWorkersAi()
    env = _worker_env(fake, 1024)
    _publish(env, _built_files(fake, BGE_M3))
    service = build_service(bindings(env), WorkerSettings(active_version_ttl_s=0.0), PATIENT)
    assert _ask(service).trace["stages"]["vector"]["model"] == BGE_M3
    _publish(env, _built_files(fake, "@cf/baai/bge-large-en-v1.5"))
    stage = _ask(service).trace["stages"]["vector"]
    assert stage["model"] == "@cf/baai/bge-large-en-v1.5" and stage["matches"], stage
