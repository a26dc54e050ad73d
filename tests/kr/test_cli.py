"""The ``kr`` CLI end to end on the local state."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kr.cli import main
from tests.common import GOLDEN, KNOWLEDGE, write_doc


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
