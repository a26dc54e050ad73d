#!/usr/bin/env python3
"""Benchmark (not a test): query throughput of the compiled pure-Python scorers (the pruned one the
Worker serves, and exhaustive scoring, the former path) and of the numpy scorer CPython serves
(the same ranking) vs bm25s vs rank_bm25 on SciFact, side by side in one run (interleaved
rounds, ratios printed); index build time per 1,000 documents and package bytes per million
postings on every collection in ../shared/data; p50/p95 latency of the cascade stages on the
sample knowledge. Prints ratios; machines are noisy, so compare within one run only.

usage: python bench/bm25_throughput.py [--data ../shared/data] [--repeat 3]
"""

from __future__ import annotations

import argparse
import heapq
import statistics
import sys
import time
from pathlib import Path

from router.analysis.analyzer import AnalyzerConfig
from router.compile.beir import load_beir
from router.compile.build import build_knowledge
from router.compile.fields import section_fields
from router.compile.indexer import BuildConfig, compile_documents
from router.contract import QueryRequest
from router.package.reader import load_package
from router.package.version.listing import postings_bytes
from router.pipeline import run_query
from router.ranking.bm25 import max_impact, query_lists, top_k, weighted_scores
from router.ranking.numpy_backend import PostingArrays, numpy_terms_top_k, numpy_top_k
from router.ranking.pruning import weighted_top_k
from router.ranking.score_bounds import LONG_LIST_FRACTION, ScoreBounds
from router.sync import run_sync

ROOT = Path(__file__).resolve().parents[1]
K = 10


def _rate(label: str, queries: int, seconds: float) -> float:
    rate = queries / seconds
    print(f"  {label:<38} {rate:>9.0f} q/s")
    return rate


def index_builds(data: Path) -> None:
    """Build cost and size of the product's package (BM25F, no vectors) per collection."""
    print("index build (analyzer + bm25s + package, BM25F, no vectors), one run each:")
    print(
        f"  {'collection':<11} {'docs':>6} {'build s':>8} {'s / 1k docs':>11} "
        f"{'postings':>9} {'package MB':>10} {'MB / M postings':>15} {'postings.bin / M':>16}"
    )
    for folder in sorted(p for p in data.iterdir() if (p / "corpus.jsonl").is_file()):
        collection = load_beir(folder)
        language = "portuguese" if folder.name in ("faquad-ir", "pira-pt") else "english"
        started = time.perf_counter()
        compiled = compile_documents(
            collection.documents, BuildConfig(analyzer=AnalyzerConfig(language=language))
        )
        build_s = time.perf_counter() - started
        files = compiled.files()
        size = sum(len(b) for b in files.values())
        postings = compiled.manifest.counts["postings"]
        docs = len(collection.documents)
        stored = postings_bytes(files)  # directories and shards
        print(
            f"  {folder.name:<11} {docs:>6} {build_s:>8.2f} {1000 * build_s / docs:>11.2f} "
            f"{postings:>9} {size / 1e6:>10.2f} {size / postings:>15.2f} "
            f"{stored / postings:>16.2f}"
        )
    print("  (MB per million postings = bytes per posting)")


def scorer_throughput(data: Path, repeat: int) -> None:
    collection = load_beir(data)
    started = time.perf_counter()
    # per-field layout: its body block alone is plain BM25, the thing bm25s and rank_bm25 compute
    compiled = compile_documents(
        collection.documents,
        BuildConfig(analyzer=AnalyzerConfig(language="english"), scoring="fields"),
    )
    build_s = time.perf_counter() - started
    files = compiled.files()
    package = load_package(files["manifest.json"], files.__getitem__).view(None)
    queries = list(collection.queries.values())
    tokenized = [package.analyzer.terms(q) for q in queries]
    size = sum(len(b) for b in files.values())
    print(f"SciFact: {len(collection.documents)} docs, {len(queries)} test queries")
    print(
        f"  build {build_s:.1f} s ({1000 * build_s / len(collection.documents):.2f} s per 1k docs)"
    )
    print(f"  package {size / 1e6:.1f} MB, {compiled.manifest.counts['postings']} postings")

    directory = package.parts[0].partition.postings.directory
    weights = {"body": 1.0}
    # every term and shard held (warm isolate): the timed loops measure scoring, not fetching
    vocabulary = run_sync(package.parts[0].partition.vocabulary.read_all())
    asked = {t for tokens in tokenized for t in tokens}
    found, _ = run_sync(package.load_terms(asked.union(vocabulary)))
    package = package.with_terms(found)
    run_sync(package.load_postings(asked))
    warm = ScoreBounds()  # the served path keeps one per package (derived at first use)

    # Every scorer finds the query's lists inside the timed loop, as the served path does: the
    # pure ones through ``query_lists`` (term lookup, IDF per query), numpy through the view's
    # plans (``numpy_terms_top_k``, what the lexical stage calls in CPython).
    def pruned(k: int, bounds: ScoreBounds = warm) -> None:
        for tokens in tokenized:
            weighted_top_k(query_lists(package, tokens, weights, "lucene"), k, bounds=bounds)

    arrays = PostingArrays()  # the served CPython path keeps one per package, like ``warm``

    def with_numpy(k: int) -> None:  # the lexical stage's: lists found through the view's plans
        for tokens in tokenized:
            numpy_terms_top_k(package, tokens, weights, "lucene", k, bounds=warm, arrays=arrays)

    def exhaustive(k: int) -> None:
        for tokens in tokenized:
            top_k(weighted_scores(query_lists(package, tokens, weights, "lucene")), k)

    queries_ids = [query_lists(package, tokens, weights, "lucene") for tokens in tokenized]

    import bm25s
    import numpy as np

    corpus_tokens = [
        package.analyzer.terms(section_fields(d, d.sections[0], True)["body"])
        for d in collection.documents
    ]
    reference = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    reference.index(corpus_tokens, show_progress=False)
    known = [[t for t in tokens if t in reference.vocab_dict] or [""] for tokens in tokenized]

    def numpy_bm25s(k: int) -> None:
        for tokens in known:
            scores = reference.get_scores(tokens)
            top = np.argpartition(-scores, k)[:k]
            top[np.argsort(-scores[top])]

    from rank_bm25 import BM25Okapi

    okapi = BM25Okapi(corpus_tokens, k1=1.5, b=0.75)
    sample = tokenized[:60]  # rank_bm25 is slow: a sample, rate scaled

    def rank_bm25(k: int) -> None:
        for tokens in sample:
            scores = okapi.get_scores(tokens)
            np.argsort(-scores)[:k]

    # the first pass of the pruned scorer over a fresh memo: per-section bounds get built
    started = time.perf_counter()
    pruned(K, ScoreBounds())
    cold = len(queries_ids) / (time.perf_counter() - started)
    # and of the numpy scorer over a fresh memo: every list gets decoded into numpy
    started = time.perf_counter()
    for tokens in tokenized:
        numpy_top_k(query_lists(package, tokens, weights, "lucene"), K, arrays=PostingArrays())
    cold_numpy = len(queries_ids) / (time.perf_counter() - started)

    for k in (K, 50):  # the numpy scorer's ranking is the pruned one's, floats included
        for query in queries_ids:
            fast, pure = numpy_top_k(query, k, arrays=arrays), weighted_top_k(query, k)
            assert (fast.ranked, fast.truncated) == (pure.ranked, pure.truncated)

    scorers = {
        "pruned pure-Python scorer (ours, new)": (pruned, len(queries_ids)),
        "exhaustive pure-Python scorer (ours, old)": (exhaustive, len(queries_ids)),
        "numpy scorer (ours, CPython)": (with_numpy, len(queries_ids)),
        "bm25s (numpy)": (numpy_bm25s, len(known)),
        "rank_bm25 (BM25Okapi, 60-query sample)": (rank_bm25, len(sample)),
    }
    for k in (K, 50):
        rates = _interleaved(scorers, k, repeat, skip=() if k == K else ("rank_bm25",))
        print(
            f"top-{k} retrieval, pre-tokenized queries, one thread (best of {repeat}, interleaved):"
        )
        base = rates["bm25s (numpy)"]
        for label, rate in rates.items():
            print(f"  {label:<42} {rate:>9.0f} q/s   × bm25s {rate / base:5.2f}")
        new, old = (
            rates["pruned pure-Python scorer (ours, new)"],
            rates["exhaustive pure-Python scorer (ours, old)"],
        )
        fast = rates["numpy scorer (ours, CPython)"]
        print(f"  ratio numpy / bm25s = {fast / base:.2f}   numpy / new = {fast / new:.2f}")
        print(f"  ratio new / bm25s = {new / base:.2f}   new / old = {new / old:.2f}", end="")
        if "rank_bm25 (BM25Okapi, 60-query sample)" in rates:
            print(
                f"   new / rank_bm25 = {new / rates['rank_bm25 (BM25Okapi, 60-query sample)']:.1f}"
            )
        else:
            print()
    print(f"  pruned, first pass with a fresh memo (bounds built): {cold:.0f} q/s at top-{K}")
    print(
        f"  numpy, a fresh memo per query (lists decoded each time): {cold_numpy:.0f} q/s "
        f"at top-{K}; warm memo: {arrays.cached_bytes / 1e6:.1f} MB"
    )
    _pruning_figures(
        directory, queries_ids, warm, [package.document_frequency(t) for t in vocabulary]
    )


def _interleaved(scorers, k, repeat, skip=()):  # type: ignore[no-untyped-def]
    """q/s of each scorer, best of ``repeat`` rounds that run every scorer once, in turn."""
    best: dict[str, float] = {}
    for _ in range(repeat):
        for label, (fn, n) in scorers.items():
            if any(label.startswith(s) for s in skip):
                continue
            started = time.perf_counter()
            fn(k)
            best[label] = max(best.get(label, 0.0), n / (time.perf_counter() - started))
    return best


def _pruning_figures(directory, queries_ids, bounds, df) -> None:  # type: ignore[no-untyped-def]
    """Postings read a query: pruned, exhaustive, and an oracle MaxScore that knows the final k-th
    score in advance (the fewest postings a reading by decreasing list bound can get away with,
    whatever the layout of the lists); and what storing the per-section bounds of long lists at
    build time (a format change: no cold first pass) would take."""
    for k in (K, 50):
        read = total = oracle = 0
        for query in queries_ids:
            read += weighted_top_k(query, k, bounds=bounds).postings
            sizes = {(id(p), t): p.indptr[t + 1] - p.indptr[t] for p, t, _ in query}
            total += sum(sizes.values())
            scores = weighted_scores(query)
            best = heapq.nlargest(k, scores.values())
            theta = best[-1] if len(best) == k else 0.0
            lists = sorted(
                (max_impact(p, t, bounds.maxima) * w, sizes[id(p), t]) for p, t, w in query
            )
            left = 0.0
            for ub, size in lists:  # lowest bounds first: those can stay unread while under theta
                if left + ub >= theta:
                    break
                left += ub
                oracle += size
        n = len(queries_ids)
        print(
            f"  top-{k}: postings read a query {read / n:.0f} pruned vs {total / n:.0f} exhaustive"
            f" (an oracle knowing the final k-th score: {(total - oracle) / n:.0f})"
        )
    sections = directory.sections
    floor = max(1, sections // LONG_LIST_FRACTION)
    long_lists = sum(1 for n in df if n >= floor)
    print(
        f"  build-time per-section bounds for every long list (>= {floor} postings): "
        f"{long_lists} lists x {sections} B = {long_lists * sections / 1e6:.1f} MB"
    )


def stage_latency(repeat: int) -> None:
    result = build_knowledge(ROOT / "knowledge")
    files = result.package.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    cases = {
        "exact": "workPermit.components.equipment.validity",
        "fact": "Qual a validade padrão da APR?",
        "bm25": "como renovar uma permissão de trabalho vencida",
        "abstain": "receita de bolo de cenoura",
    }
    print("\ncascade on the sample knowledge (ms per query, p50 / p95):")
    for label, query in cases.items():
        request = QueryRequest(query=query)
        totals: list[float] = []
        stages: dict[str, list[float]] = {}
        for _ in range(200 * repeat):
            response = run_query(package, request, today="2026-06-15")
            totals.append(response.metadata.latency_ms)
            for name, stage in response.trace["stages"].items():
                stages.setdefault(name, []).append(stage["ms"])
        p50, p95 = _percentiles(totals)
        detail = "  ".join(f"{n} {_percentiles(v)[0]:.3f}" for n, v in stages.items())
        print(f"  {label:<8} total {p50:.3f} / {p95:.3f}   [{detail}]")


def _percentiles(values: list[float]) -> tuple[float, float]:
    ordered = sorted(values)
    return statistics.median(ordered), ordered[int(0.95 * (len(ordered) - 1))]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--skip-builds", action="store_true", help="no per-collection build table")
    args = parser.parse_args()
    scifact = args.data / "scifact"
    if scifact.is_dir():
        scorer_throughput(scifact, args.repeat)
    else:
        print(f"SciFact not found at {scifact}: skipping the throughput comparison")
    if args.data.is_dir() and not args.skip_builds:
        print()
        index_builds(args.data)
    stage_latency(args.repeat)
    return 0


if __name__ == "__main__":
    sys.exit(main())
