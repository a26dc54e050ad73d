"""Retrieval quality and latency with and without each offline reranker (docs/adr/0015).

Benchmark, not a test. Reads ../shared/data/<name> at run time (never copied) and the golden
set; compiles each collection in memory as ``kr eval FOLDER`` does (kr.beir_eval), with e5
section vectors when the vector cache holds them (else the lexical cascade, with a note), and
runs the product cascade — the reranker only where confidence is not HIGH — once per reranker:

- ``none``: no rerank stage (the baseline);
- ``local``: the lexical reranker (``router.rerankers.lexical``), pure Python;
- ``e5``: cosine of the question and each passage with multilingual-e5-small
  (``router.rerankers.embedding``), passages from the vector cache (slow when not cached:
  ~3 passages/s on two cores, so it is skipped for a collection whose passages are not cached,
  unless ``--embed-missing``).

Workers AI's bge-reranker-base, an HTTP /rerank endpoint and the LLM listwise reranker need a
network service and cannot run here.

Quality: nDCG@10, recall@10, recall@100 (ranx), 100 results per query, latency budget lifted
(kr.beir_eval). Latency: a second pass as served (adaptive top-K, no cache, budget lifted): the
whole query p50/p95, the rerank stage's own p50/p95 where it ran, and how often it ran.

    python bench/rerank.py                                   # scifact faquad-ir pira-pt golden
    python bench/rerank.py scifact --rerankers none local --limit 100
    python bench/rerank.py faquad-ir --set rerank_weight=0.5 --set always_rerank=1
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

from kr.answering import CachedQueryEmbedder, eval_config, package_answerer
from kr.beir_eval import (
    BeirRun,
    beir_queries,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
)
from kr.evaluation import evaluate, percentiles
from kr.golden import DEFAULT_GOLDEN, load_golden
from retrieval_quality import DATA, parse_overrides
from router.analysis.analyzer import AnalyzerConfig
from router.compile.build import build_knowledge
from router.compile.indexer import BuildConfig
from router.config import RouterConfig
from router.contract import MAX_QUERY_CHARS, QueryRequest
from router.package.reader import KnowledgePackage, load_package
from router.ports import Reranker
from router.rerankers.embedding import EmbeddingReranker
from router.rerankers.lexical import LexicalReranker

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_SETS = ("scifact", "faquad-ir", "pira-pt", "golden")
RERANKERS = ("none", "local", "e5")
GOLDEN_TODAY = "2026-06-15"


def make_reranker(name: str, encoder: Any) -> Reranker | None:
    """The reranker ``name`` (e5: the collection's encoder, else the local e5 model)."""
    if name == "none":
        return None
    if name == "local":
        return LexicalReranker()
    return EmbeddingReranker(CachedQueryEmbedder(encoder or e5_encoder()))


def e5_encoder() -> Any:
    from router.adapters.local.e5_embedder import E5Embedder

    return E5Embedder()


async def served(
    package: KnowledgePackage,
    questions: list[QueryRequest],
    overrides: dict[str, Any],
    encoder: Any,
    reranker: Reranker | None,
    today: str | None = None,
) -> dict[str, Any]:
    """Latency as served: adaptive top-K, no cache, budget lifted; the rerank stage apart."""
    config = eval_config(dataclasses.replace(RouterConfig(), **overrides))
    answer = package_answerer(
        package,
        config,
        encoder=encoder,
        use_vectors=encoder is not None,
        cache=False,
        today=today,
        reranker=reranker,
    )
    total, stage, moved = [], [], 0
    for request in questions:
        response = await answer(request)
        total.append(response.metadata.latency_ms)
        rerank = response.trace["stages"].get("rerank", {})
        if "skipped" not in rerank and "degraded" not in rerank:
            stage.append(rerank["ms"])
            moved += rerank["moved"] > 0
    p_total, p_stage = percentiles(total), percentiles(stage) if stage else {}
    return {
        "p50_ms": p_total["p50"],
        "p95_ms": p_total["p95"],
        "rerank_share": len(stage) / len(questions),
        "moved_share": moved / len(questions),
        "rerank_p50_ms": p_stage.get("p50", 0.0),
        "rerank_p95_ms": p_stage.get("p95", 0.0),
    }


def beir_rows(args: argparse.Namespace, name: str) -> list[dict[str, Any]]:
    collection = load_collection(DATA / name, args.split)
    plan = plan_vectors(collection, args.embedder)
    if plan.note:
        print(f"  note: {plan.note}", flush=True)
    language = detect_language(collection)
    config = BuildConfig(analyzer=AnalyzerConfig(language=language))
    package, _ = compile_collection(collection, config, plan.encoder)
    queries = beir_queries(collection)
    if args.limit:
        queries = sorted(queries, key=lambda q: q.id)[: args.limit]
    overrides = parse_overrides(args.set)
    encoder = plan.encoder
    rows = []
    for name_r in args.rerankers:
        if name_r == "e5" and encoder is None and not args.embed_missing:
            print(f"  {name} e5: skipped (passage vectors not cached)", flush=True)
            continue
        reranker = make_reranker(name_r, encoder)
        run = BeirRun(collection, package, encoder, "cascade", overrides, reranker)
        started = time.perf_counter()
        report = asyncio.run(evaluate_collection(run, queries=queries))
        requests = [QueryRequest(query=q.query[:MAX_QUERY_CHARS]) for q in queries]
        latency = asyncio.run(served(package, requests, overrides, encoder, reranker))
        o = report.overall
        row = {
            "set": name,
            "reranker": name_r,
            "queries": o["n"],
            "ndcg@10": o["ndcg@10"],
            "recall@10": o["recall@10"],
            "recall@100": o["recall@100"],
            "vectors": plan.label,
            **latency,
        }
        rows.append(row)
        print(
            f"  {name:10s} {name_r:6s} nDCG@10 {row['ndcg@10']:.4f} R@10 {row['recall@10']:.4f} "
            f"R@100 {row['recall@100']:.4f} reranked {row['rerank_share']:6.1%} "
            f"p50 {row['p50_ms']:.2f} ms rerank p50 {row['rerank_p50_ms']:.2f} "
            f"p95 {row['rerank_p95_ms']:.2f} ({time.perf_counter() - started:.0f} s)",
            flush=True,
        )
    return rows


def golden_rows(args: argparse.Namespace) -> list[dict[str, Any]]:
    encoder = e5_encoder() if args.embedder == "e5" else None
    built = build_knowledge(ROOT / "knowledge", encoder=encoder)
    files = built.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    queries = load_golden(ROOT / DEFAULT_GOLDEN)
    overrides = parse_overrides(args.set)
    config = eval_config(dataclasses.replace(RouterConfig(), **overrides))
    rows = []
    for name_r in args.rerankers:
        reranker = make_reranker(name_r, encoder)
        answer = package_answerer(
            package, config, encoder=encoder, today=GOLDEN_TODAY, reranker=reranker
        )
        report = asyncio.run(evaluate(queries, answer, name="golden"))
        requests = [q.request for q in queries]
        latency = asyncio.run(
            served(package, requests, overrides, encoder, reranker, today=GOLDEN_TODAY)
        )
        o = report.overall
        row = {
            "set": "golden",
            "reranker": name_r,
            "queries": o["n"],
            "ndcg@10": o["ndcg@10"],
            "hit@1": o["hit@1"],
            "hit@3": o["hit@3"],
            "mrr": o["mrr"],
            "abstention_acc": o["abstention_acc"],
            "vectors": encoder.model_id if encoder is not None else "none",
            **latency,
        }
        rows.append(row)
        print(
            f"  golden     {name_r:6s} hit@1 {row['hit@1']:.3f} hit@3 {row['hit@3']:.3f} "
            f"MRR {row['mrr']:.3f} nDCG@10 {row['ndcg@10']:.4f} "
            f"reranked {row['rerank_share']:6.1%} p50 {row['p50_ms']:.2f} ms "
            f"rerank p50 {row['rerank_p50_ms']:.2f} p95 {row['rerank_p95_ms']:.2f}",
            flush=True,
        )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| set | reranker | queries | nDCG@10 | Δ | recall@10 | hit@1 (golden) | reranked | "
        "moved | served p50 / p95 ms | rerank stage p50 / p95 ms |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r["set"]: r for r in rows if r["reranker"] == "none"}
    for r in rows:
        ref = base.get(r["set"])
        delta = f"{r['ndcg@10'] - ref['ndcg@10']:+.4f}" if ref else "–"
        recall = f"{r['recall@10']:.4f}" if "recall@10" in r else "–"
        hit = f"{r['hit@1']:.3f}" if "hit@1" in r else "–"
        lines.append(
            f"| {r['set']} | {r['reranker']} | {r['queries']} | {r['ndcg@10']:.4f} | {delta} | "
            f"{recall} | {hit} | {r['rerank_share']:.1%} | {r['moved_share']:.1%} | "
            f"{r['p50_ms']:.2f} / {r['p95_ms']:.2f} | "
            f"{r['rerank_p50_ms']:.2f} / {r['rerank_p95_ms']:.2f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("sets", nargs="*", default=list(DEFAULT_SETS))
    parser.add_argument("--rerankers", nargs="+", choices=RERANKERS, default=list(RERANKERS))
    parser.add_argument("--split", default="test")
    parser.add_argument("--limit", type=int, default=0, help="first N judged queries by id")
    parser.add_argument("--embedder", choices=("e5", "none"), default="e5")
    parser.add_argument("--embed-missing", action="store_true", help="e5 reranker: embed them")
    parser.add_argument("--set", action="append", default=[], help="RouterConfig field=float")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.sets:
        print(f"{name}:", flush=True)
        rows += golden_rows(args) if name == "golden" else beir_rows(args, name)
    print()
    print(markdown(rows))
    print(f"\nmean served p50 over sets: {statistics.fmean(r['p50_ms'] for r in rows):.2f} ms")


if __name__ == "__main__":
    main()
