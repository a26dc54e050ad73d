"""Retrieval quality and latency on BEIR collections: the cascade vs BM25 only vs always hybrid.

Benchmark, not a test. Reads ../shared/data/<name> at run time (never copied). The logic is
kr.beir_eval's, the same as ``kr eval FOLDER --variant V``; this script runs the variants side by
side on one compiled package and prints ratios against BM25 only. Section vectors come from the
vector cache (bench/embed_collection.py fills it); when they are not cached the vector variants
are skipped with a note, unless --embed-missing.

    python bench/retrieval_quality.py                      # scifact faquad-ir pira-pt
    python bench/retrieval_quality.py faquad-ir --variants bm25 cascade --set rrf_k=30
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import statistics
from pathlib import Path
from types import MappingProxyType
from typing import Any

from kr.answering import eval_config, package_answerer
from kr.beir_eval import (
    VARIANTS,
    BeirRun,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    plan_vectors,
    variant_config,
)
from kr.evaluation import percentiles
from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BuildConfig
from router.config import RouterConfig
from router.contract import MAX_QUERY_CHARS, QueryRequest

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
DEFAULT_COLLECTIONS = ("scifact", "faquad-ir", "pira-pt")
DEFAULT_VARIANTS = ("bm25", "cascade", "rrf", "vector")


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``field=float`` or ``mapping_field.KEY=float``, e.g. ``vector_weight_by_level.LOW=0.5``."""
    overrides: dict[str, Any] = {}
    defaults = RouterConfig()
    for item in items:
        name, value = item.split("=", 1)
        if "." in name:
            name, key = name.split(".", 1)
            mapping = dict(overrides.get(name) or getattr(defaults, name))
            mapping[key] = float(value)
            overrides[name] = MappingProxyType(mapping)
        else:
            overrides[name] = type(getattr(defaults, name))(float(value))
    return overrides


def measure(args: argparse.Namespace, name: str) -> list[dict[str, Any]]:
    collection = load_collection(DATA / name, args.split)
    plan = plan_vectors(collection, args.embedder, embed_missing=args.embed_missing)
    if plan.note:
        print(f"  note: {plan.note}", flush=True)
    language = detect_language(collection)
    config = BuildConfig(analyzer=AnalyzerConfig(language=language), scoring=args.scoring)
    package, facts = compile_collection(collection, config, plan.encoder)
    rows = []
    for variant in args.variants:
        if variant not in ("bm25", "cascade") and plan.encoder is None:
            print(f"  {name} {variant}: skipped (no section vectors)", flush=True)
            continue
        overrides = parse_overrides(args.set)
        run = BeirRun(collection, package, plan.encoder, variant, overrides)
        report = asyncio.run(evaluate_collection(run))
        overall, ops = report.overall, report.operations
        latency = asyncio.run(served_latency(run))
        rows.append(
            {
                "collection": name,
                "variant": variant,
                "queries": overall["n"],
                "ndcg@10": overall["ndcg@10"],
                "recall@100": overall["recall@100"],
                "vector_share": ops["vector_fallback_rate"],
                "mean_ms": statistics.fmean(latency),
                "p50_ms": percentiles(latency)["p50"],
                "p95_ms": percentiles(latency)["p95"],
                "depth100_p50_ms": ops["latency_ms"]["total"]["p50"],
                "vectors": plan.label,
                "docs": facts["documents"],
            }
        )
        row = rows[-1]
        print(
            f"  {name:10s} {variant:8s} nDCG@10 {row['ndcg@10']:.4f}  recall@100 "
            f"{row['recall@100']:.4f}  vector on {row['vector_share']:6.1%}  "
            f"served p50 {row['p50_ms']:6.2f} ms  p95 {row['p95_ms']:6.2f} ms  "
            f"(100 deep: p50 {row['depth100_p50_ms']:6.2f} ms)",
            flush=True,
        )
    return rows


async def served_latency(run: BeirRun) -> list[float]:
    """Milliseconds per query as served: adaptive top-K (3/8/15), no cache, budget lifted.

    Why a second pass: quality is measured 100 results deep (recall@100), and building the
    context of 100 results costs more than all retrieval stages together; a served query asks
    for the adaptive K, which is what the SLOs are about."""
    served = dataclasses.replace(RouterConfig(), **dict(run.overrides))
    config = variant_config(run.variant, eval_config(served))
    answer = package_answerer(
        run.package, config, encoder=run.encoder, use_vectors=run.encoder is not None, cache=False
    )
    times = []
    for query_id in run.collection.qrels:
        text = run.collection.queries[query_id][:MAX_QUERY_CHARS]
        response = await answer(QueryRequest(query=text))
        times.append(response.metadata.latency_ms)
    return times


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table, ratios against BM25 only of the same collection."""
    lines = [
        "| collection | variant | nDCG@10 | Δ vs BM25 | recall@100 | vector on | served p50 ms "
        "| served p95 ms | p50 × BM25 |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r["collection"]: r for r in rows if r["variant"] == "bm25"}
    for r in rows:
        ref = base.get(r["collection"])
        delta = f"{r['ndcg@10'] - ref['ndcg@10']:+.4f}" if ref else "–"
        ratio = f"{r['p50_ms'] / ref['p50_ms']:.2f}" if ref and ref["p50_ms"] else "–"
        lines.append(
            f"| {r['collection']} | {r['variant']} | {r['ndcg@10']:.4f} | {delta} | "
            f"{r['recall@100']:.4f} | {r['vector_share']:.1%} | {r['p50_ms']:.2f} | "
            f"{r['p95_ms']:.2f} | {ratio} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("collections", nargs="*", default=list(DEFAULT_COLLECTIONS))
    parser.add_argument("--split", default="test")
    parser.add_argument("--scoring", default="bm25f")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=DEFAULT_VARIANTS)
    parser.add_argument("--embedder", choices=("e5", "hash", "none"), default="e5")
    parser.add_argument("--embed-missing", action="store_true", help="embed uncached vectors")
    parser.add_argument("--set", action="append", default=[], help="RouterConfig field[.key]=float")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    for name in args.collections:
        print(f"{name}:", flush=True)
        rows += measure(args, name)
    print()
    print(markdown(rows))


if __name__ == "__main__":
    main()
