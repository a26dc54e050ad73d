"""The ``kr`` CLI end to end on the local state."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kr.cli import main
from router.vectors.hash_embedder import HASH_MODEL_ID
from tests.common import GOLDEN, KNOWLEDGE, write_doc

LOW_LEXICAL = "para quem ligo se alguém passar mal?"  # weak: reaches the vector fallback


def test_build_then_query_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "hash"]) == 0
    assert "active" in capsys.readouterr().out
    assert main(["query", "O que é APR?", "--state", state, "--json"]) == 0
    response = json.loads(capsys.readouterr().out)
    assert response["results"][0]["doc_id"] == "apr"
    assert response["citations"]
    assert main(["query", "Qual a capital da França?", "--state", state, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["abstained"] is True


def test_build_reports_file_and_line_and_strict_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kb = tmp_path / "kb"
    write_doc(kb, "ok.md", "---\nsemanticId: ok\ntitle: Ok\n---\nTexto.\n")
    write_doc(kb, "bad.md", "---\nsemanticId: ok..x\ntitle: Bad\n---\n")
    state = str(tmp_path / "state")
    assert main(["build", str(kb), "--state", state, "--embedder", "none"]) == 0
    assert "bad.md:2: malformed semanticId" in capsys.readouterr().err
    assert main(["build", str(kb), "--state", state, "--strict", "--embedder", "none"]) == 2


def test_query_without_a_build_is_a_clear_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["query", "APR", "--state", str(tmp_path / "none")]) == 1
    assert "no_active_version" in capsys.readouterr().err


def test_eval_prints_the_metrics(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = str(tmp_path / "state")
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "hash"]) == 0
    capsys.readouterr()
    reports = tmp_path / "reports"
    args = ["eval", str(GOLDEN), "--state", state, "--json", "--report-dir", str(reports)]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    metrics = printed["overall"]
    rows = [json.loads(line) for line in GOLDEN.read_text(encoding="utf-8").splitlines()]
    assert metrics["n"] == len(rows)
    assert metrics["judged"] == sum(1 for row in rows if row["expected"])
    assert sum(c["n"] for c in printed["per_category"].values()) == len(rows)
    # measured values (hash vectors, 2026-12): hit@1 0.80, hit@3 0.81, mrr 0.81, nDCG@10 0.77
    assert 0.7 <= metrics["hit@1"] <= metrics["hit@3"] <= 1.0
    assert metrics["hit@1"] <= metrics["mrr"] <= 1.0
    assert 0.7 <= metrics["ndcg@10"] <= 1.0 and 0.7 <= metrics["recall@10"] <= 1.0
    assert metrics["intent_acc"] == 1.0 and metrics["forbidden_leaks"] == 0
    assert 0.5 <= metrics["abstention_recall"] <= 1.0
    assert 0.0 < metrics["abstention_precision"] <= 1.0
    assert printed["per_category"]["exact_id"]["hit@1"] == 1.0
    saved = json.loads((reports / "metrics.json").read_text(encoding="utf-8"))
    assert saved["overall"] == metrics and len(saved["per_category"]) > 5
    assert (reports / "report.md").is_file() and (reports / "categories.png").is_file()


def test_serve_queries_a_newly_activated_package_with_its_own_embedding_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``kr serve`` picks the vector stage per loaded package, like the Worker: a package built
    with another embedding model, activated while the server runs, is queried with its model."""
    import uvicorn

    state = str(tmp_path / "state")
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "none"]) == 0
    apps: list[Any] = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **_: apps.append(app))
    assert main(["serve", "--state", state]) == 0
    client = TestClient(apps[0])

    def vector_stage() -> dict[str, Any]:
        response = client.post("/v1/query", json={"query": LOW_LEXICAL})
        assert response.status_code == 200, response.text
        stage: dict[str, Any] = response.json()["trace"]["stages"]["vector"]
        return stage

    assert vector_stage()["skipped"] == "no embedder or vector index configured"
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "hash", "--force"]) == 0
    assert client.get("/v1/health").json()["embedding_model"] == HASH_MODEL_ID
    stage = vector_stage()
    if stage.get("skipped") != "latency budget spent":  # a loaded machine may skip the stage
        assert stage.get("model") == HASH_MODEL_ID and stage["matches"], stage
    assert main(["build", str(KNOWLEDGE), "--state", state, "--embedder", "none", "--force"]) == 0
    assert vector_stage()["skipped"] == "no embedder or vector index configured"
    capsys.readouterr()
