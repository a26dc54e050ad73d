#!/usr/bin/env python3
"""Peers, side by side in one run: ours vs the engines a user would pick instead.

Benchmark, not a test (no test imports it). Why: "use bm25s / tantivy / SQLite FTS5 instead" is
the first question about a retrieval engine, and D1 — where a Worker would keep its full-text
index — is SQLite FTS5, whose tokenizers (unicode61, porter, trigram) do not stem Portuguese.

Engines, each on every collection, from the same documents (title + text, one section each):

* ours BM25F: the scorer the cascade's lexical stage calls in CPython (analyzer + BM25F top-k,
  numpy backend), every posting list in memory; ours cascade (lexical): the whole query path
  (exact and keyword stages, BM25F, confidence, fusion, records, context package, extractive
  answer) without vectors; its metrics are ``kr eval``'s (``kr.beir_eval``). No e5 vectors
  anywhere in this bench.
* bm25s (lucene, k1 1.5, b 0.75), with its own tokenizer (Snowball stemmer + its stopwords, as
  the reference figures of ../shared/data/README.md) and with our analyzer's terms (as
  bench/bm25_throughput.py and tests/comparison feed it).
* tantivy (PyPI ``tantivy``; BM25 k1 1.2, b 0.75, fixed): its ``default`` tokenizer (no
  stemming) and a stemmed one (``en_stem``, or ``pt_stem`` registered as simple + remove_long +
  lowercase + Stemmer("portuguese")); the query is the analyzed terms OR-ed.
* SQLite FTS5 (Python's sqlite3, in memory; ``bm25()`` k1 1.2, b 0.75, fixed):
  ``unicode61 remove_diacritics 2`` (what D1 offers for Portuguese), ``porter`` over it (English
  stemming) and ``trigram``; the query is the words of the question quoted and OR-ed.

Metrics: nDCG@10 and recall@100 from ranx over 100 results per query (test split). Throughput:
queries/second at top-10, end to end (the question's text in, document ids out, tokenizing
included), one thread, best of ``--rounds`` rounds that run every engine in turn (rotated), so
the ratios against ours hold within one run on a noisy machine. Build: seconds per 1,000 docs.

    python bench/peers.py                        # scifact faquad-ir pira-pt, table + peers.json
    python bench/peers.py faquad-ir --rounds 5   # one collection
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import platform
import re
import sqlite3
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from kr.answering import eval_config, package_answerer
from kr.beir_eval import (
    BeirRun,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
    variant_config,
)
from router.analysis.analyzer import Analyzer, AnalyzerConfig, StemFunction, snowball_stem_function
from router.compile.beir import BeirCollection
from router.compile.fields import section_fields
from router.compile.indexer import BuildConfig
from router.config import DEFAULT_MAX_QUERY_WORDS, RouterConfig
from router.contract import MAX_QUERY_CHARS, QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.package.stores.budget import ReaderBudget
from router.package.view import PackageView
from router.ranking.bm25 import block_weights, bm25_method
from router.ranking.numpy_backend import PostingArrays
from router.ranking.pruning import ScoreBounds
from router.ranking.top_k import served_terms_top_k
from router.sync import run_sync

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
COLLECTIONS = ("scifact", "faquad-ir", "pira-pt")
DEPTH = 100  # results per query for the metrics (recall@100)
K = 10  # results per query for the throughput
REFERENCE = "ours BM25F"  # the row the ratios are taken against
CONTEXT_STAGES = frozenset({"records", "texts", "context", "answer"})

Search = Callable[[str, int], list[str]]
Analyze = Callable[[str], list[str]]


@dataclass
class Engine:
    """One engine built over one collection: ``search(text, k)`` returns document ids."""

    name: str
    tokenizer: str
    search: Search
    build_s: float
    metrics: dict[str, float] | None = None  # set here when not from ``search`` (the cascade)
    handle: Any = None  # the engine's own object, for a second way of calling it
    extra: dict[str, Any] = field(default_factory=dict)  # more facts for its row


# --- ours ----------------------------------------------------------------------------------------


def ours(collection: BeirCollection, language: str) -> tuple[list[Engine], Analyze]:
    """The BM25F scorer alone, and the lexical cascade over the same compiled package; and the
    package's analyzer (bm25s is also fed its terms)."""
    config = BuildConfig(analyzer=AnalyzerConfig(language=language))
    package, facts = compile_collection(collection, config)
    label = f"ours (Snowball {language}, stopwords, accent folding)"
    search, analyze = _bm25f_search(package, collection)
    scorer = Engine("ours BM25F", label, search, facts["build_s"])
    report = asyncio.run(evaluate_collection(BeirRun(collection, package, None, "cascade")))
    metrics = {m: report.overall[m] for m in ("ndcg@10", "recall@100")}
    cascade = Engine(
        "ours cascade (lexical)", label, _cascade_search(package), facts["build_s"], metrics
    )
    cascade.extra["stages_ms"] = cascade_split(package, list(collection.queries.values()))
    return [scorer, cascade], analyze


def _bm25f_search(package: KnowledgePackage, collection: BeirCollection) -> tuple[Search, Analyze]:
    """The lexical stage's scoring (``served_terms_top_k``: in CPython ``numpy_terms_top_k``) with
    every term and posting list loaded first: a warm isolate, as the peers hold their index in
    memory."""
    view, score = _bm25f_scorer(package, collection)
    analyze = view.analyzer.terms
    return (lambda text, k: score(analyze(text), k)), analyze


def _bm25f_scorer(
    package: KnowledgePackage, collection: BeirCollection
) -> tuple[PackageView, Callable[[list[str], int], list[str]]]:
    """The warm view (every term and list loaded, every query's words stemmed once: its
    analyzer's caches hold them) and its BM25F top-k from terms to document ids."""
    view = package.view(None)
    ids = _section_ids(view, collection)
    vocabulary = run_sync(view.parts[0].partition.vocabulary.read_all())
    asked = {t for q in collection.queries.values() for t in view.analyzer.terms(q)}
    found, _ = run_sync(view.load_terms(asked.union(vocabulary)))
    view = view.with_terms(found)
    run_sync(view.load_postings(asked.union(vocabulary)))
    return view, _top_k_ids(view, ids)


def _top_k_ids(view: PackageView, ids: list[str]) -> Callable[[list[str], int], list[str]]:
    """The view's BM25F top-k from terms to document ids, with its own scorer memos (the
    decoded lists, their bounds; the view's plans are the view's)."""
    weights = block_weights(view.block_names, RouterConfig().field_weights)
    method, bounds, arrays = bm25_method(view), ScoreBounds(), PostingArrays()

    def score(terms: list[str], k: int) -> list[str]:
        ranking = served_terms_top_k(view, terms, weights, method, k, bounds=bounds, arrays=arrays)
        return [ids[section] for section, _ in ranking.ranked]

    return score


def _section_ids(view: PackageView, collection: BeirCollection) -> list[str]:
    """Document id of each section (one per document), checked against the package's records."""
    records, _ = run_sync(view.load_records(range(len(view.documents))))
    ids = [records[doc].semantic_id for doc in range(len(view.documents))]
    assert len(view.sections) == len(ids), "one section per BEIR document expected"
    assert ids == [d.semantic_id for d in collection.documents]
    return ids


def _cascade_answer(package: KnowledgePackage) -> Callable[[str, int], QueryResponse]:
    """The served query path without vectors, no cache, asked for ``k`` results."""
    config = variant_config("cascade", eval_config(RouterConfig()))
    answer = package_answerer(package, config, use_vectors=False, cache=False)

    async def ask(request: QueryRequest) -> QueryResponse:
        return await answer(request)

    def respond(text: str, k: int) -> QueryResponse:  # it does no I/O: driven in one step
        return run_sync(ask(QueryRequest(query=text[:MAX_QUERY_CHARS], top_k=k)))

    return respond


def _cascade_search(package: KnowledgePackage) -> Search:
    respond = _cascade_answer(package)

    def search(text: str, k: int) -> list[str]:
        return [r.doc_id for r in respond(text, k).results]

    return search


def cascade_split(package: KnowledgePackage, queries: list[str]) -> dict[str, float]:
    """Mean ms per query (from the trace) of the retrieval stages and of what a bare engine does
    not do: reading the records, the context package (with its injection scan) and the answer."""
    respond = _cascade_answer(package)
    split = dict.fromkeys(("retrieval_ms", "context_answer_ms"), 0.0)
    for text in queries:
        for stage, facts in respond(text, K).trace["stages"].items():
            key = "context_answer_ms" if stage in CONTEXT_STAGES else "retrieval_ms"
            split[key] += facts.get("ms", 0.0) / len(queries)
    return {key: round(ms, 3) for key, ms in split.items()}


# --- bm25s ---------------------------------------------------------------------------------------


def bm25s_engines(
    collection: BeirCollection, language: str, analyze: Analyze | None
) -> list[Engine]:
    """bm25s with its own tokenizer (Snowball + its stopwords), and with our analyzer's terms
    (unless ``analyze`` is None); the first one's ``extra["tokenize"]`` is its tokenizer."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer(language)

    def own(text: str) -> list[str]:
        tokenized = bm25s.tokenize(
            text, stopwords=language, stemmer=stemmer, return_ids=False, show_progress=False
        )
        return tokenized[0]

    started = time.perf_counter()
    texts = [d.sections[0].text for d in collection.documents]
    corpus = bm25s.tokenize(
        texts, stopwords=language, stemmer=stemmer, return_ids=False, show_progress=False
    )
    first, index = _bm25s_search(corpus, own, collection)
    own_s = time.perf_counter() - started
    label = f"its tokenizer: Snowball {language} + stopwords"
    engines = [Engine("bm25s", label, first, own_s, handle=index, extra={"tokenize": own})]
    if analyze is None:
        return engines
    started = time.perf_counter()
    bodies = [analyze(section_fields(d, d.sections[0], True)["body"]) for d in collection.documents]
    second, _ = _bm25s_search(bodies, analyze, collection)
    ours_s = time.perf_counter() - started
    return [*engines, Engine("bm25s", "our analyzer's terms (body only)", second, ours_s)]


def _bm25s_search(
    corpus: list[list[str]], tokenize: Analyze, collection: BeirCollection
) -> tuple[Search, Any]:
    """``get_scores`` + a numpy top-k, as bench/bm25_throughput.py calls it (``retrieve`` adds a
    batch API's overhead per call: see ``retrieve_qps``)."""
    import bm25s

    index = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    index.index(corpus, show_progress=False)
    ids = [d.semantic_id for d in collection.documents]
    vocabulary = index.vocab_dict

    def search(text: str, k: int) -> list[str]:
        tokens = [t for t in tokenize(text) if t in vocabulary]
        if not tokens:
            return []
        scores = index.get_scores(tokens)
        top = np.argpartition(-scores, min(k, len(scores) - 1))[:k]
        top = top[np.argsort(-scores[top], kind="stable")]
        return [ids[i] for i in top if scores[i] > 0]

    return search, index


def bm25s_retrieve(engine: Engine, language: str) -> Search:
    """bm25s's documented one-call API, ``retrieve(tokenize(q))``, one query a call (timed only)."""
    import bm25s
    import Stemmer

    index, stemmer = engine.handle, Stemmer.Stemmer(language)

    def search(text: str, k: int) -> list[str]:
        tokens = bm25s.tokenize(
            text, stopwords=language, stemmer=stemmer, return_ids=False, show_progress=False
        )
        index.retrieve(tokens, k=k, show_progress=False, n_threads=1)
        return []

    return search


# --- tantivy -------------------------------------------------------------------------------------


def tantivy_engines(collection: BeirCollection, language: str) -> list[Engine]:
    """tantivy with its default tokenizer and with a Snowball-stemmed one."""
    from tantivy import Filter, TextAnalyzerBuilder, Tokenizer

    def chain(stem: bool) -> Any:  # tantivy's "default" and "en_stem" chains, stemmer optional
        builder = TextAnalyzerBuilder(Tokenizer.simple()).filter(Filter.remove_long(40))
        builder = builder.filter(Filter.lowercase())
        return (builder.filter(Filter.stemmer(language)) if stem else builder).build()

    stemmed = "en_stem" if language == "english" else "pt_stem"
    return [
        _tantivy_engine(collection, "default", chain(False), "default (no stemming)"),
        _tantivy_engine(collection, stemmed, chain(True), f"{stemmed} (Snowball {language})"),
    ]


def _tantivy_engine(
    collection: BeirCollection, tokenizer: str, analyzer: Any, label: str
) -> Engine:
    import tantivy
    from tantivy import Occur, Query

    started = time.perf_counter()
    builder = tantivy.SchemaBuilder()
    builder.add_text_field("id", stored=True, tokenizer_name="raw")
    builder.add_text_field("body", tokenizer_name=tokenizer)
    schema = builder.build()
    index = tantivy.Index(schema)  # in memory
    if tokenizer not in ("default", "en_stem"):
        index.register_tokenizer(tokenizer, analyzer)
    writer = index.writer(heap_size=100_000_000, num_threads=1)
    for doc in collection.documents:
        writer.add_document(tantivy.Document(id=doc.semantic_id, body=doc.sections[0].text))
    writer.commit()
    writer.wait_merging_threads()
    index.reload()
    searcher = index.searcher()
    build_s = time.perf_counter() - started

    def search(text: str, k: int) -> list[str]:
        terms = analyzer.analyze(text)
        if not terms:
            return []
        should = [(Occur.Should, Query.term_query(schema, "body", t)) for t in terms]
        hits = searcher.search(Query.boolean_query(should), limit=k, count=False).hits
        return [searcher.doc(address)["id"][0] for _, address in hits]

    return Engine("tantivy", label, search, build_s)


# --- SQLite FTS5 ---------------------------------------------------------------------------------

FTS5_TOKENIZERS = {
    "unicode61 remove_diacritics 2": "unicode61 remove_diacritics 2",
    "porter unicode61 remove_diacritics 2": "porter (English stemmer) over unicode61",
    "trigram": "trigram",
}
_WORD = re.compile(r"\w+")


def fts5_engines(collection: BeirCollection) -> list[Engine]:
    return [_fts5_engine(collection, spec, label) for spec, label in FTS5_TOKENIZERS.items()]


def _fts5_engine(collection: BeirCollection, spec: str, label: str) -> Engine:
    started = time.perf_counter()
    connection = sqlite3.connect(":memory:", check_same_thread=False)
    connection.execute(f"CREATE VIRTUAL TABLE docs USING fts5(body, tokenize='{spec}')")
    with connection:
        connection.executemany(
            "INSERT INTO docs(rowid, body) VALUES (?, ?)",
            ((i, d.sections[0].text) for i, d in enumerate(collection.documents)),
        )
        connection.execute("INSERT INTO docs(docs) VALUES ('optimize')")
    build_s = time.perf_counter() - started
    ids = [d.semantic_id for d in collection.documents]
    sql = "SELECT rowid FROM docs WHERE docs MATCH ? ORDER BY bm25(docs) LIMIT ?"

    def search(text: str, k: int) -> list[str]:
        words = _WORD.findall(text)
        if not words:
            return []
        match = " OR ".join(f'"{w}"' for w in words)  # quoted: no FTS5 query syntax
        return [ids[row] for (row,) in connection.execute(sql, (match, k))]

    return Engine("SQLite FTS5", label, search, build_s)


# --- measuring -----------------------------------------------------------------------------------


def ranx_metrics(collection: BeirCollection, runs: dict[str, list[str]]) -> dict[str, float]:
    """nDCG@10 and recall@100 as ``kr.evaluation`` computes them (grades > 0; 1/rank scores)."""
    from ranx import Qrels, Run, evaluate

    qrels = {
        q: {d: g for d, g in grades.items() if g > 0} for q, grades in collection.qrels.items()
    }
    run = {
        q: {d: 1.0 / rank for rank, d in enumerate(runs[q], start=1)} or {"__none__": 0.0}
        for q in qrels
    }
    scores = evaluate(Qrels(qrels), Run(run), ["ndcg@10", "recall@100"])
    return {name: float(value) for name, value in scores.items()}


def throughput(searches: list[Search], queries: list[str], rounds: int) -> list[float]:
    """q/s at top-``K`` of every search: best of ``rounds``, the order rotated each round."""
    best = [0.0] * len(searches)
    for r in range(rounds):
        order = list(range(len(searches)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for i in order:
            search = searches[i]
            started = time.perf_counter()
            for text in queries:
                search(text, K)
            best[i] = max(best[i], len(queries) / (time.perf_counter() - started))
    return best


def measure(name: str, rounds: int) -> list[dict[str, Any]]:
    collection = load_collection(DATA / name)
    language = detect_language(collection)
    docs, queries = len(collection.documents), list(collection.queries.values())
    print(f"{name}: {docs} docs, {len(queries)} test queries, {language}", flush=True)
    engines, analyze = ours(collection, language)
    engines += bm25s_engines(collection, language, analyze)
    engines += _optional("tantivy", lambda: tantivy_engines(collection, language))
    engines += fts5_engines(collection)
    for engine in engines:
        if engine.metrics is None:
            runs = {q: engine.search(collection.queries[q], DEPTH) for q in collection.qrels}
            engine.metrics = ranx_metrics(collection, runs)
    own_bm25s = next(e for e in engines if e.name == "bm25s" and e.handle is not None)
    searches = [e.search for e in engines] + [bm25s_retrieve(own_bm25s, language)]
    *rates, retrieve_qps = throughput(searches, queries, rounds)
    own_bm25s.extra["retrieve_qps"] = round(retrieve_qps, 1)
    rows = []
    for engine, rate in zip(engines, rates, strict=True):
        assert engine.metrics is not None
        rows.append(
            {
                "collection": name,
                "engine": engine.name,
                "tokenizer": engine.tokenizer,
                "ndcg@10": round(engine.metrics["ndcg@10"], 4),
                "recall@100": round(engine.metrics["recall@100"], 4),
                "qps": round(rate, 1),
                "build_s_per_1k_docs": round(1000 * engine.build_s / docs, 3),
                "docs": docs,
                "queries": len(queries),
            }
        )
        print(f"  {_line(rows[-1])}", flush=True)
        rows[-1].update((k, v) for k, v in engine.extra.items() if k != "tokenize")
        if "stages_ms" in engine.extra:
            print(f"    mean ms per query by stage group: {engine.extra['stages_ms']}", flush=True)
    print(f"  bm25s through retrieve(tokenize(q)), one query a call: {retrieve_qps:.0f} q/s")
    return rows


# --- from the query string (issue 32) -----------------------------------------------------------


def query_path(name: str, rounds: int) -> list[dict[str, Any]]:
    """q/s at top-10 from the question's text to document ids, analysis included, of ours (the
    analyzer + the BM25F scorer CPython serves), bm25s (its tokenizer, PyStemmer) and tantivy
    (``en_stem``/``pt_stem`` and ``default``), and of the two analyzers alone; every row side by
    side in the same rounds (as ``throughput``), its ratio against bm25s: wall-clock q/s, and
    q/s of the process's CPU time (steadier on a shared machine: the item is CPU).

    Ours analyses as the query analyzer does (``bounded_terms``, the first
    ``DEFAULT_MAX_QUERY_WORDS`` words; its frame words are not taken out here), with cold caches
    — a new analyzer each round, as in a new isolate or view, so the round's first occurrence of
    each word is stemmed — and warm (every word of the questions remembered, as ``measure``
    times it); and with the Worker's pure-Python stemmer (snowballstemmer) instead of the
    default. The scorer's memos (the view's plans, the lists decoded into numpy, their bounds)
    are warm in those rows, as the peers' indexes are; one more row starts them empty each
    round too (a new view: what its first pass over the questions costs). Every variant of
    ours must return the same ids; nDCG@10 is given for each engine."""
    collection = load_collection(DATA / name)
    language = detect_language(collection)
    queries = list(collection.queries.values())
    print(f"{name}: {len(collection.documents)} docs, {len(queries)} test queries, {language}")
    package, _ = compile_collection(collection, BuildConfig(analyzer=AnalyzerConfig(language)))
    view, score = _bm25f_scorer(package, collection)
    ids = _section_ids(view, collection)
    warm = view.analyzer
    stems = (None, snowball_stem_function(language))  # the analyzer's default, the Worker's

    def fresh(stem: StemFunction | None) -> Analyzer:  # the view's analyzer, caches empty
        return Analyzer(
            warm.config,
            stem=stem,
            accent_lexicon=warm.accent_lexicon,
            stem_cache_entries=ReaderBudget().stem_words,
        )

    def first_pass() -> Search:  # a new view too: its plans and the lists' arrays to build
        analyze = _served(fresh(None))
        scorer = _top_k_ids(dataclasses.replace(view, derived={}), ids)
        return lambda text, k: scorer(analyze(text), k)

    default_stem = _stemmer_name(fresh(None).stem)
    own_bm25s = bm25s_engines(collection, language, None)[0]
    tantivy = _optional("tantivy", lambda: tantivy_engines(collection, language))
    bm25s_tokenize = own_bm25s.extra["tokenize"]
    # (label, tokenizer, makes the round's search): a maker runs untimed before each round
    rows: list[tuple[str, str, Callable[[], Search]]] = []
    for stem in stems:
        tokenizer = f"ours, {default_stem if stem is None else _stemmer_name(stem)}"

        def cold(stem: StemFunction | None = stem) -> Search:
            analyze = _served(fresh(stem))
            return lambda text, k: score(analyze(text), k)

        def analysis(stem: StemFunction | None = stem) -> Search:
            return _alone(_served(fresh(stem)))

        rows.append(("ours BM25F, cold caches", tokenizer, cold))
        if stem is None:
            rows.append(("ours BM25F, warm caches", tokenizer, lambda: _warm(warm, score)))
            rows.append(("ours BM25F, cold caches and scorer memos", tokenizer, first_pass))
        rows.append(("ours analyzer alone, cold caches", tokenizer, analysis))
    rows.append(("bm25s", own_bm25s.tokenizer, lambda: own_bm25s.search))
    rows.append(("bm25s tokenizer alone", own_bm25s.tokenizer, lambda: _alone(bm25s_tokenize)))
    rows += [(e.name, e.tokenizer, lambda e=e: e.search) for e in tantivy]

    expected = [score(_served(warm)(q), K) for q in queries]
    ndcg: dict[int, float] = {}
    for i, (label, tokenizer, make) in enumerate(rows):
        if label.startswith("ours BM25F"):
            search = make()
            assert [search(q, K) for q in queries] == expected, (label, tokenizer)
        if "alone" not in label:
            search = make()
            runs = {q: search(collection.queries[q], DEPTH) for q in collection.qrels}
            ndcg[i] = ranx_metrics(collection, runs)["ndcg@10"]
    best, cpu = [0.0] * len(rows), [0.0] * len(rows)
    for r in range(rounds):
        order = list(range(len(rows)))
        order = order[r % len(order) :] + order[: r % len(order)]
        for i in order:
            search = rows[i][2]()
            started, used = time.perf_counter(), time.process_time()
            for text in queries:
                search(text, K)
            used = time.process_time() - used
            best[i] = max(best[i], len(queries) / (time.perf_counter() - started))
            cpu[i] = max(cpu[i], len(queries) / max(used, 1e-9))
    base = next(i for i, row in enumerate(rows) if row[0] == "bm25s")
    table = [
        {
            "collection": name,
            "engine": label,
            "tokenizer": tokenizer,
            "qps": round(best[i], 1),
            "x_bm25s": round(best[i] / best[base], 3),
            "cpu_qps": round(cpu[i], 1),
            "cpu_ms_per_query": round(1000 / cpu[i], 4),
            "cpu_x_bm25s": round(cpu[i] / cpu[base], 3),
            "ndcg@10": round(ndcg[i], 4) if i in ndcg else None,
        }
        for i, (label, tokenizer, _) in enumerate(rows)
    ]
    for row in table:
        print(
            f"  {row['engine']:<34} {row['tokenizer']:<46} {row['qps']:>9.0f} q/s "
            f"× bm25s {row['x_bm25s']:.2f}   CPU {row['cpu_ms_per_query']:.4f} ms "
            f"× bm25s {row['cpu_x_bm25s']:.2f}",
            flush=True,
        )
    return table


def _alone(analyze: Analyze) -> Search:
    """An analyzer timed as a search (its terms, not ids)."""
    return lambda text, k: analyze(text)


def _served(analyzer: Analyzer) -> Analyze:
    """The query analyzer's terms of a question (``router.stages.query_analyzer``)."""
    return lambda text: analyzer.bounded_terms(text, DEFAULT_MAX_QUERY_WORDS).terms


def _warm(analyzer: Analyzer, score: Callable[[list[str], int], list[str]]) -> Search:
    analyze = _served(analyzer)
    return lambda text, k: score(analyze(text), k)


def _stemmer_name(stem: StemFunction | None) -> str:
    """``PyStemmer`` or ``snowballstemmer``: the library behind a stem function."""
    owner = getattr(stem, "__self__", None)
    module = type(owner).__module__ if owner is not None else getattr(stem, "__module__", "")
    return "PyStemmer" if module == "Stemmer" else "snowballstemmer"


def query_path_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| collection | engine | tokenizer | nDCG@10 | q/s (top-10) | × bm25s "
        "| CPU ms / query | × bm25s (CPU) |",
        "|---|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        quality = "—" if r["ndcg@10"] is None else f"{r['ndcg@10']:.4f}"
        lines.append(
            f"| {r['collection']} | {r['engine']} | {r['tokenizer']} | {quality} | "
            f"{r['qps']:,.0f} | {r['x_bm25s']:.2f} | {r['cpu_ms_per_query']:.3f} | "
            f"{r['cpu_x_bm25s']:.2f} |"
        )
    return "\n".join(lines)


def _optional(name: str, build: Callable[[], list[Engine]]) -> list[Engine]:
    """An engine that may be missing here: skipped with the reason, the others still run."""
    try:
        return build()
    except ImportError as exc:
        print(f"  {name}: not run ({exc}); pip install {name}", flush=True)
        return []


def _line(row: dict[str, Any]) -> str:
    return (
        f"{row['engine']:<23} {row['tokenizer']:<52} nDCG@10 {row['ndcg@10']:.4f}  "
        f"R@100 {row['recall@100']:.4f}  {row['qps']:>8.0f} q/s  "
        f"build {row['build_s_per_1k_docs']:.3f} s/1k docs"
    )


def markdown(rows: list[dict[str, Any]]) -> str:
    """One table; Δ nDCG@10 and the q/s ratio against ours BM25F of the same collection."""
    lines = [
        "| collection | engine | tokenizer | nDCG@10 | Δ vs ours BM25F | recall@100 | q/s (top-10) "
        "| × ours BM25F | build s / 1k docs |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    base = {r["collection"]: r for r in rows if r["engine"] == REFERENCE}
    for r in rows:
        ref = base[r["collection"]]
        lines.append(
            f"| {r['collection']} | {r['engine']} | {r['tokenizer']} | {r['ndcg@10']:.4f} | "
            f"{r['ndcg@10'] - ref['ndcg@10']:+.4f} | {r['recall@100']:.4f} | {r['qps']:,.0f} | "
            f"{r['qps'] / ref['qps']:.2f} | {r['build_s_per_1k_docs']:.2f} |"
        )
    return "\n".join(lines)


def conditions(rounds: int) -> dict[str, Any]:
    versions: dict[str, str | None] = {}
    for package in ("bm25s", "tantivy", "ranx", "numpy", "PyStemmer"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return {
        "date": date.today().isoformat(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
        "machine": platform.machine(),
        "rounds": rounds,
        "throughput_k": K,
        "metrics_depth": DEPTH,
        "versions": versions,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("collections", nargs="*", default=list(COLLECTIONS))
    parser.add_argument("--rounds", type=int, default=3, help="throughput rounds (best kept)")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "peers.json")
    parser.add_argument(
        "--query-path",
        type=Path,
        nargs="?",
        const=ROOT / "bench" / "query-path.json",
        help="only the analyzer + scorer from the query string (ours, bm25s, tantivy), to JSON",
    )
    args = parser.parse_args()
    missing = [n for n in args.collections if not (DATA / n).is_dir()]
    if missing:
        print(f"not found under {DATA}: {', '.join(missing)} (see ../shared/data/README.md)")
        return 1
    rows: list[dict[str, Any]] = []
    if args.query_path:
        for name in args.collections:
            rows += query_path(name, args.rounds)
        print()
        print(query_path_markdown(rows))
        report = {"conditions": conditions(args.rounds), "rows": rows}
        text = json.dumps(report, indent=2, ensure_ascii=False) + "\n"
        args.query_path.write_text(text, encoding="utf-8")
        return 0
    for name in args.collections:
        rows += measure(name, args.rounds)
    print()
    print(markdown(rows))
    report = {"conditions": conditions(args.rounds), "rows": rows}
    args.json.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
