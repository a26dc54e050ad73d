"""Retrieval quality on BEIR collections: BM25 alone, vector alone, always-RRF and the cascade.

Reads ../shared/data/<name> at run time (never copied). Section vectors come from the local
vector cache (fill it with bench/embed_collection.py; missing ones are embedded, slowly).

    python bench/retrieval_quality.py scifact --split test
    python bench/retrieval_quality.py faquad-ir pira-pt
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from router.adapters.local.e5_embedder import E5Embedder
from router.adapters.local.vector_index import LocalVectorIndex
from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import BeirCollection, load_beir
from router.compile.embedding import embed_sections
from router.compile.indexer import BuildConfig, compile_documents
from router.compile.vector_cache import VectorCache
from router.config import RetrievalBudget, RouterConfig
from router.contract import QueryRequest
from router.package.reader import KnowledgePackage, load_package
from router.pipeline import CascadeServices, run_cascade
from router.vectors.records import section_records

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LANGUAGE = {"scifact": "english", "cranfield": "english", "cisi": "english"}
DEPTH = 100


class CachedQueryEmbedder:
    """e5 query embeddings through the vector cache (benchmarks re-run often)."""

    def __init__(self, e5: E5Embedder) -> None:
        self.e5 = e5
        self.model_id = e5.model_id
        self.dimensions = e5.dimensions
        self.cache = VectorCache(e5.model_id, e5.dimensions)

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        rows = self.cache.embed(kind, list(texts), lambda batch: self.e5.encode(batch, kind))
        return [list(map(float, row)) for row in np.asarray(rows)]


def build(collection: BeirCollection, scoring: str, e5: E5Embedder | None) -> KnowledgePackage:
    language = LANGUAGE.get(collection.name, "portuguese")
    config = BuildConfig(analyzer=AnalyzerConfig(language=language), scoring=scoring)
    embeddings = embed_sections(collection.documents, e5) if e5 else None
    compiled = compile_documents(collection.documents, config, embeddings=embeddings)
    files = compiled.files()
    return load_package(files["manifest.json"], files.__getitem__)


def variants(base: RouterConfig) -> dict[str, RouterConfig]:
    only = MappingProxyType
    return {
        "bm25": dataclasses.replace(base, vector_fallback=False),
        "vector": dataclasses.replace(
            base, always_vector=True, source_weights=only({"vector": 1.0})
        ),
        "rrf": dataclasses.replace(
            base, always_vector=True, source_weights=only({"bm25": 1.0, "vector": 1.0})
        ),
        "cascade": base,
    }


async def run(
    package: KnowledgePackage,
    collection: BeirCollection,
    config: RouterConfig,
    services: CascadeServices,
) -> tuple[dict[str, dict[str, float]], float, float]:
    run_: dict[str, dict[str, float]] = {}
    vector_queries = 0
    started = time.perf_counter()
    for query_id, text in collection.queries.items():
        request = QueryRequest(query=text[:2000], top_k=DEPTH)
        response = await run_cascade(package, request, config, services, today="2026-06-15")
        vector_queries += response.metadata.fallback_triggered
        ranked: dict[str, float] = {}
        for rank, result in enumerate(response.results, start=1):
            ranked.setdefault(result.doc_id, 1.0 / rank)
        run_[query_id] = ranked or {"__none__": 0.0}
    elapsed = time.perf_counter() - started
    return run_, vector_queries / len(collection.queries), elapsed / len(collection.queries)


def evaluate(qrels: dict[str, dict[str, int]], run_: dict[str, dict[str, float]]) -> dict[str, Any]:
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    return ranx_evaluate(Qrels(qrels), Run(run_), ["ndcg@10", "recall@100"])  # type: ignore[no-any-return]


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
            overrides[name] = float(value)
    return overrides


def base_config(overrides: dict[str, Any]) -> RouterConfig:
    config = RouterConfig(
        bm25_candidates=DEPTH,
        vector_top_k=DEPTH,
        abstain_below=0.0,  # ranking quality is measured on every query; abstention elsewhere
        min_coverage=0.0,
        budget=RetrievalBudget(max_documents=DEPTH, max_vector_results=DEPTH, max_latency_ms=1e9),
    )
    return dataclasses.replace(config, **overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("collections", nargs="+")
    parser.add_argument("--split", default="test")
    parser.add_argument("--scoring", default="bm25f")
    parser.add_argument("--only", nargs="*", default=None, help="variants to run")
    parser.add_argument("--no-vectors", action="store_true")
    parser.add_argument("--set", action="append", default=[], help="RouterConfig field[.key]=float")
    args = parser.parse_args()
    overrides = parse_overrides(args.set)
    e5 = None if args.no_vectors else E5Embedder()
    for name in args.collections:
        collection = load_beir(DATA / name, split=args.split)
        package = build(collection, args.scoring, e5)
        services = CascadeServices()
        if e5 is not None:
            index = LocalVectorIndex(e5.dimensions)
            index.upsert_many(section_records(package))
            services = CascadeServices(embedder=CachedQueryEmbedder(e5), vector_index=index)
        for variant, config in variants(base_config(overrides)).items():
            if args.only and variant not in args.only:
                continue
            if e5 is None and variant != "bm25":
                continue
            run_, vector_share, per_query = asyncio.run(run(package, collection, config, services))
            scores = evaluate(collection.qrels, run_)
            print(
                f"{name:10s} {args.split:5s} {args.scoring:6s} {variant:8s} "
                f"nDCG@10 {scores['ndcg@10']:.4f}  recall@100 {scores['recall@100']:.4f}  "
                f"vector on {vector_share:6.1%} of queries  {per_query * 1000:6.1f} ms/query",
                flush=True,
            )


if __name__ == "__main__":
    main()
