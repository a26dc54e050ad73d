"""``kr eval`` on a BEIR-layout folder written here, and its reports; bad input is a clear error.

The metrics must be ranx's for the rankings the cascade returned: the test rebuilds the ranx run
from the per-query rankings in ``metrics.json`` and evaluates it against its own qrels.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kr.beir_eval import load_collection, plan_vectors
from kr.cli import main
from router.errors import DatasetError

DOCS = {
    "d1": ("Photosynthesis", "Chlorophyll in leaves absorbs light and plants produce sugar."),
    "d2": ("Volcano eruptions", "Magma rises through the crust and erupts as lava."),
    "d3": ("Cooling lava", "Basalt forms when lava cools quickly near the surface."),
    "d4": ("Honey bees", "Bees pollinate flowers and make honey in hives."),
    "d5": ("Ocean tides", "The gravity of the moon pulls the oceans and creates tides."),
    "d6": ("Glaciers", "Ice sheets move slowly and carve valleys."),
}
QUERIES = {
    "q1": "how do plants produce sugar from light",  # d1 first
    "q2": "magma erupts as lava",  # d2 (not judged) outranks the judged d3
    "q3": "why are quasars so bright",  # nothing in the corpus
    "q4": "where do bees keep honey",  # graded: d4 (2) found, d5 (1) not
    "q9": "an unjudged query",
}
QRELS = [("q1", "d1", 1), ("q2", "d3", 1), ("q3", "d6", 1), ("q4", "d4", 2), ("q4", "d5", 1)]


def write_beir(folder: Path) -> Path:
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": k, "title": t, "text": x} for k, (t, x) in DOCS.items()]
    (folder / "corpus.jsonl").write_text("\n".join(json.dumps(r) for r in corpus) + "\n")
    queries = [{"_id": k, "text": t} for k, t in QUERIES.items()]
    (folder / "queries.jsonl").write_text("\n".join(json.dumps(r) for r in queries) + "\n")
    rows = ["query-id\tcorpus-id\tscore", *("\t".join(map(str, r)) for r in QRELS)]
    (folder / "qrels" / "test.tsv").write_text("\n".join(rows) + "\n")
    return folder


def test_eval_on_a_beir_folder_reports_ranx_metrics(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ranx import Qrels, Run, evaluate

    folder = write_beir(tmp_path / "tiny")
    reports = tmp_path / "reports"
    args = ["eval", str(folder), "--embedder", "none", "--report-dir", str(reports), "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    saved = json.loads((reports / "metrics.json").read_text())
    assert saved["overall"] == printed["overall"]
    ranks = {q["id"]: q["rank"] for q in saved["queries"]}
    assert ranks == {"q1": 1, "q2": 2, "q3": None, "q4": 1}

    qrels: dict[str, dict[str, int]] = {}
    for query, doc, grade in QRELS:
        qrels.setdefault(query, {})[doc] = grade
    run = {
        q["id"]: {key: 1.0 / rank for rank, key in enumerate(q["ranked"], 1)} or {"none": 0.0}
        for q in saved["queries"]
    }
    names = {"hit@1": "hit_rate@1", "hit@3": "hit_rate@3", "mrr": "mrr", "ndcg@10": "ndcg@10"}
    names |= {"recall@10": "recall@10", "recall@100": "recall@100"}
    expected = evaluate(Qrels(qrels), Run(run), list(names.values()))
    for ours, theirs in names.items():
        assert printed["overall"][ours] == pytest.approx(expected[theirs]), ours
    assert printed["overall"]["hit@1"] == pytest.approx(0.5)
    assert printed["overall"]["abstention_recall"] is None  # every BEIR query is answerable
    operations = printed["operations"]
    assert operations["vector_fallback_rate"] == 0.0  # --embedder none
    assert {"normalize", "bm25", "fusion"} <= set(operations["latency_ms"]["stages"])
    assert operations["latency_ms"]["total"]["p95"] >= operations["latency_ms"]["total"]["p50"]
    for name in ("report.md", "categories.png", "latency.png", "ranks.png"):
        assert (reports / name).stat().st_size > 0, name
    markdown = (reports / "report.md").read_text()
    assert "## Ranking quality (ranx)" in markdown and "## Latency" in markdown


def test_eval_with_hash_vectors_runs_the_fallback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("router.compile.vector_cache.DEFAULT_CACHE_DIR", tmp_path / "vectors")
    folder = write_beir(tmp_path / "tiny")
    args = ["eval", str(folder), "--embedder", "hash", "--no-report", "--json", "--variant", "rrf"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["info"]["section_vectors"] == "hash-trigram-256"
    assert printed["operations"]["vector_fallback_rate"] > 0


def test_missing_vectors_fall_back_instead_of_a_long_embedding_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    collection = load_collection(write_beir(tmp_path / "tiny"))
    monkeypatch.setattr("kr.beir_eval.AUTO_EMBED_LIMIT_S", 0.0)
    plan = plan_vectors(collection, "hash", cache_root=tmp_path / "empty-cache")
    assert plan.encoder is None and plan.missing_passages == len(DOCS)
    assert plan.note is not None and "bench/embed_collection.py" in plan.note
    explicit = plan_vectors(collection, "hash", embed_missing=True, cache_root=tmp_path / "c")
    assert explicit.encoder is not None


def test_eval_input_errors_are_clear(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = write_beir(tmp_path / "tiny")
    cases = [
        (["eval", str(tmp_path / "nowhere")], "not found: pass a golden set"),
        (["eval", str(folder), "--split", "dev"], "no qrels/dev.tsv (splits available: test)"),
        (["eval", str(folder / "qrels")], "has no corpus.jsonl"),
    ]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "query": "ok"}\n{"id": "b", "query": ""}\n')
    cases.append((["eval", str(bad), "--state", str(tmp_path / "s")], "bad.jsonl:2: invalid"))
    for args, message in cases:
        assert main([*args, "--no-report"]) == 1, args
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (args, err)
    with pytest.raises(DatasetError, match=r"no 'zz'.*queries\.jsonl lacks"):
        (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nzz\td1\t1\n")
        load_collection(folder)
