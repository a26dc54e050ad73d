"""What head pages cost in ranking quality on real text, at a million sections' proportions.

Benchmark, not a test (docs/adr/0029). On a BEIR collection of a few thousand documents no list
reaches the production head size (32,768 postings), so pages never come into play and quality is
trivially unchanged. This script scales every size to the collection as a million sections
would have them (head lists, head sizes, pages and the whole-list budget times documents / 1M),
compiles it, and scores BM25 only twice: every list read whole, and long lists past the scaled
budget read as their pages; no shard is kept between queries (a cold isolate). Reads
../shared/data/<name> at run time.

    python bench/page_quality.py                  # scifact
    python bench/page_quality.py cisi cranfield faquad-ir pira-pt
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from kr.beir_eval import (
    DEFAULT_DEPTH,
    BeirRun,
    detect_language,
    evaluate_collection,
    load_collection,
)
from router.analysis.analyzer import AnalyzerConfig
from router.compile.indexer import BuildConfig, compile_documents
from router.config import DEFAULT_MAX_WHOLE_LONG_POSTINGS, RetrievalBudget
from router.package.format import shards as shard_format
from router.package.reader import load_package
from router.package.stores.budget import ReaderBudget

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
MILLION = 1_000_000


def scaled(value: int, documents: int) -> int:
    """``value`` (a size at a million sections) at ``documents`` sections, at least 2."""
    return max(2, round(value * documents / MILLION))


def measure(name: str, page_scale: float = 1.0, budget_scale: float = 1.0) -> dict[str, Any]:
    collection = load_collection(DATA / name)
    documents = len(collection.documents)
    sizes = {
        "HEAD_MIN_POSTINGS": scaled(shard_format.HEAD_MIN_POSTINGS, documents),
        "HEAD_POSTINGS": scaled(shard_format.HEAD_POSTINGS, documents),
        "HEAD_PAGE_POSTINGS": scaled(
            min(shard_format.HEAD_POSTINGS, int(shard_format.HEAD_PAGE_POSTINGS * page_scale)),
            documents,
        ),
        "SHARD_POSTINGS": scaled(shard_format.SHARD_POSTINGS, documents),
    }
    originals = {key: getattr(shard_format, key) for key in sizes}
    try:
        for key, value in sizes.items():
            setattr(shard_format, key, value)
        config = BuildConfig(analyzer=AnalyzerConfig(language=detect_language(collection)))
        files = dict(compile_documents(collection.documents, config).files())
    finally:
        for key, value in originals.items():
            setattr(shard_format, key, value)
    whole_budget = scaled(int(DEFAULT_MAX_WHOLE_LONG_POSTINGS * budget_scale), documents)
    row: dict[str, Any] = {"collection": name, "documents": documents, **sizes}
    row["whole_budget"] = whole_budget
    for label, budget in (("whole", 10**12), ("pages", whole_budget)):
        retrieval = RetrievalBudget(
            max_documents=DEFAULT_DEPTH,
            max_vector_results=DEFAULT_DEPTH,
            max_whole_long_postings=budget,
        )
        # a package of its own that keeps no shard between queries: every query reads its
        # lists as a cold isolate would (a whole shard held would be used instead of its page)
        package = load_package(
            files["manifest.json"], files.__getitem__, budget=ReaderBudget(shard_bytes=0)
        )
        run = BeirRun(collection, package, None, "bm25", {"budget": retrieval})
        overall = asyncio.run(evaluate_collection(run)).overall
        row[f"{label}_ndcg@10"] = overall["ndcg@10"]
        row[f"{label}_recall@100"] = overall["recall@100"]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("collections", nargs="*", default=["scifact"])
    parser.add_argument(
        "--page-scale", type=float, default=1.0, help="pages this many times the production one"
    )
    parser.add_argument(
        "--budget-scale", type=float, default=1.0, help="a whole-list budget this many times"
    )
    args = parser.parse_args()
    print(
        "| collection | docs | head lists from | page | whole budget | nDCG@10 whole | "
        "nDCG@10 pages | Δ | recall@100 whole | recall@100 pages |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in args.collections:
        r = measure(name, args.page_scale, args.budget_scale)
        delta = r["pages_ndcg@10"] - r["whole_ndcg@10"]
        print(
            f"| {name} | {r['documents']:,} | {r['HEAD_MIN_POSTINGS']} | "
            f"{r['HEAD_PAGE_POSTINGS']} | {r['whole_budget']} | {r['whole_ndcg@10']:.4f} | "
            f"{r['pages_ndcg@10']:.4f} | {delta:+.4f} | {r['whole_recall@100']:.4f} | "
            f"{r['pages_recall@100']:.4f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
