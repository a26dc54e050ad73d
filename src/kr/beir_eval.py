"""BEIR-layout collections through the cascade: compile in memory, answer every judged query.

Why here and not in bench/: ``kr eval FOLDER``, ``kr gate --extra FOLDER`` and
``bench/retrieval_quality.py`` must measure the same thing, so the one implementation lives in
the package and the benchmark imports it.

Why a vector *plan*: e5-small embeds ~3 SciFact abstracts/s on two cores, so a collection whose
vectors are not in the on-disk cache (``bench/embed_collection.py`` fills it) would silently
start a 40-minute run. The plan says what is cached, estimates the time of the rest, and falls
back to the lexical cascade with a note when that is over ``AUTO_EMBED_LIMIT_S`` — unless
``embed_missing`` asks for the long run explicitly.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from pydantic import ValidationError

from kr.answering import eval_config, package_answerer, query_cache_key
from kr.evaluation import EvalReport, EvalSettings, evaluate
from kr.golden import GoldenQuery
from router.analysis.analyzer import AnalyzerConfig
from router.analysis.stopwords import STOPWORDS
from router.compile.beir import BeirCollection, load_beir
from router.compile.embedding import embed_sections
from router.compile.indexer import BM25Params, BuildConfig, compile_documents
from router.compile.vector_cache import VectorCache
from router.config import RetrievalBudget, RouterConfig
from router.contract import MAX_QUERY_CHARS, QueryRequest
from router.errors import ConfigError, DatasetError
from router.package.reader import KnowledgePackage, load_package
from router.package.version.listing import postings_bytes
from router.package.version.manifest import Manifest
from router.ports import Reranker
from router.stages.normalizer import normalize_query
from router.stages.vector import embedded_text
from router.vectors.passages import passage_text

__all__ = [
    "AUTO_EMBED_LIMIT_S",
    "DEFAULT_DEPTH",
    "DEFAULT_SPLIT",
    "DEFAULT_VARIANT",
    "EMBED_RATE_PER_S",
    "LANGUAGES",
    "LANGUAGE_BY_NAME",
    "VARIANTS",
    "VECTOR_VARIANTS",
    "BeirRun",
    "VectorPlan",
    "beir_queries",
    "build_config_from_manifest",
    "cascade_query_text",
    "compile_collection",
    "detect_language",
    "evaluate_collection",
    "load_collection",
    "plan_vectors",
    "prefetch_query_vectors",
    "ranking_config",
    "variant_config",
]

DEFAULT_SPLIT = "test"
DEFAULT_DEPTH = 100
"""Results asked for per query: deep enough for recall@100, the usual BEIR cut-off."""
RECALL_AT = (10, 100)
LANGUAGE_BY_NAME: Mapping[str, str] = MappingProxyType(
    {
        "scifact": "english",
        "cranfield": "english",
        "cisi": "english",
        "faquad-ir": "portuguese",
        "pira-pt": "portuguese",
    }
)
"""Known collections; any other folder's language is detected from its stopwords."""
LANGUAGE_SAMPLE_DOCS = 300

EMBED_RATE_PER_S: Mapping[str, Mapping[str, float]] = MappingProxyType(
    {
        "e5": MappingProxyType({"query": 40.0, "passage": 3.0}),
        "hash": MappingProxyType({"query": 2000.0, "passage": 300.0}),
    }
)
"""Texts embedded per second on two cores (measured: design notes, bench/embed_collection.py)."""
AUTO_EMBED_LIMIT_S = 60.0
"""Missing vectors are embedded on the fly when that should take less than this; otherwise the
run falls back to the lexical cascade unless ``embed_missing`` is set."""

VARIANTS = ("cascade", "bm25", "vector", "rrf")
"""cascade: the product (vectors only on LOW/MEDIUM confidence); bm25: lexical only; vector:
vectors only; rrf: always hybrid (BM25 and vectors fused on every query)."""
DEFAULT_VARIANT = "cascade"
VECTOR_VARIANTS = ("vector", "rrf")
"""The variants that cannot run without section vectors."""
LANGUAGES = tuple(STOPWORDS)
"""The analyzer languages a collection can be compiled in (those with a stopword list)."""


def load_collection(folder: Path, split: str = DEFAULT_SPLIT) -> BeirCollection:
    """A BEIR folder, with a clear :class:`DatasetError` for what is missing."""
    if not folder.is_dir():
        raise DatasetError(f"{folder} is not a folder (expected a BEIR-layout collection)")
    for name in ("corpus.jsonl", "queries.jsonl"):
        if not (folder / name).is_file():
            raise DatasetError(f"{folder} has no {name}: not a BEIR-layout collection")
    qrels = folder / "qrels" / f"{split}.tsv"
    if not qrels.is_file():
        found = sorted(p.stem for p in (folder / "qrels").glob("*.tsv"))
        listed = ", ".join(found) if found else "none"
        raise DatasetError(f"{folder} has no qrels/{split}.tsv (splits available: {listed})")
    try:
        collection = load_beir(folder, split=split)
    except KeyError as exc:
        raise DatasetError(
            f"{folder}: no {exc} (a missing _id/text field, or a query judged in "
            f"qrels/{split}.tsv that queries.jsonl lacks)"
        ) from exc
    except (ValueError, TypeError) as exc:
        raise DatasetError(f"{folder}: malformed collection ({type(exc).__name__}: {exc})") from exc
    if not collection.documents:
        raise DatasetError(f"{folder}/corpus.jsonl holds no documents")
    if not collection.qrels:
        raise DatasetError(f"{qrels} judges no queries")
    return collection


def detect_language(collection: BeirCollection) -> str:
    """The analyzer language: known by name, else the one whose stopwords the corpus uses most."""
    known = LANGUAGE_BY_NAME.get(collection.name)
    if known:
        return known
    counts = dict.fromkeys(STOPWORDS, 0)
    for doc in collection.documents[:LANGUAGE_SAMPLE_DOCS]:
        for word in doc.sections[0].text.casefold().split():
            for language, words in STOPWORDS.items():
                counts[language] += word in words
    return max(counts, key=lambda language: counts[language])


@dataclass(frozen=True)
class VectorPlan:
    """Which embedder the run uses (None: lexical only) and why, for the report."""

    encoder: Any
    label: str
    missing_passages: int = 0
    missing_queries: int = 0
    note: str | None = None


def cascade_query_text(text: str, encoder: Any = None) -> str:
    """The text the vector stage embeds for a query (normalized and bounded, as the cascade
    does, ``embedded_text``), cut as ``encoder`` cuts it: the key of its cached vector."""
    asked = embedded_text(normalize_query(text[:MAX_QUERY_CHARS]).text)
    return query_cache_key(encoder, asked) if encoder is not None else asked


def plan_vectors(
    collection: BeirCollection,
    choice: str,
    *,
    embed_missing: bool = False,
    cache_root: Path | None = None,
) -> VectorPlan:
    """Decide the run's embedder from ``choice`` (e5 | hash | none) and the vector cache."""
    if choice == "none":
        return VectorPlan(None, "none")
    if choice not in EMBED_RATE_PER_S:
        raise ConfigError(f"unknown embedder {choice!r}; choose e5, hash or none")
    from router.adapters.local.embedders import embedder_by_name

    encoder = embedder_by_name(choice)
    cache = VectorCache(encoder.model_id, encoder.dimensions, cache_root)
    passages = {passage_text(d, s) for d in collection.documents for s in d.sections}
    queries = {cascade_query_text(collection.queries[q], encoder) for q in collection.qrels}
    missing_p = sum(cache.get("passage", t) is None for t in passages)
    missing_q = sum(cache.get("query", t) is None for t in queries)
    rate = EMBED_RATE_PER_S[choice]
    seconds = missing_p / rate["passage"] + missing_q / rate["query"]
    label = encoder.model_id
    if not missing_p and not missing_q:
        return VectorPlan(encoder, label)
    what = f"{missing_p} of {len(passages)} passage and {missing_q} of {len(queries)} query vectors"
    if embed_missing or seconds <= AUTO_EMBED_LIMIT_S:
        note = f"embedding {what} missing from the cache {cache.folder} (~{seconds:.0f} s)"
        return VectorPlan(encoder, label, missing_p, missing_q, note)
    note = (
        f"{what} are not in the vector cache {cache.folder} (embedding them would take "
        f"~{seconds / 60:.0f} min on two cores): evaluating without the vector stage. Fill the "
        "cache with `python bench/embed_collection.py FOLDER`, or pass --embed-missing"
    )
    return VectorPlan(None, f"none ({choice} vectors not cached)", missing_p, missing_q, note)


def prefetch_query_vectors(
    collection: BeirCollection, encoder: Any, cache_root: Path | None = None
) -> int:
    """Embed the judged queries missing from the vector cache, in batches, before the run.

    Why: the vector stage would otherwise embed them one by one inside the timed cascade, so
    the latency figures would measure the local model's cold single-text calls instead of
    retrieval (in the Worker the embedder is a Workers AI call). Returns how many were new."""
    cache = VectorCache(encoder.model_id, encoder.dimensions, cache_root)
    texts = sorted({cascade_query_text(collection.queries[q], encoder) for q in collection.qrels})
    missing = [t for t in texts if cache.get("query", t) is None]
    if missing:
        cache.embed("query", missing, lambda batch: np.asarray(encoder.encode(batch, "query")))
    return len(missing)


def compile_collection(
    collection: BeirCollection, config: BuildConfig, encoder: Any = None
) -> tuple[KnowledgePackage, dict[str, Any]]:
    """Compile the collection in memory (one section per document); returns the loaded package
    and build facts (seconds, bytes, postings) for the report."""
    started = time.perf_counter()
    embeddings = embed_sections(collection.documents, encoder) if encoder is not None else None
    compiled = compile_documents(collection.documents, config, embeddings=embeddings)
    seconds = time.perf_counter() - started
    files = compiled.files()
    package = load_package(files["manifest.json"], files.__getitem__)
    facts = {
        "documents": len(collection.documents),
        "build_s": round(seconds, 3),
        "package_bytes": sum(len(b) for b in files.values()),
        "postings_bytes": postings_bytes(files),
        "postings": compiled.manifest.counts.get("postings"),
        "knowledge_version": package.version,
    }
    return package, facts


def build_config_from_manifest(manifest: Manifest, language: str | None = None) -> BuildConfig:
    """The build configuration a package was compiled with (analyzer, BM25, scoring, field
    weights), optionally for another language: how the gate recompiles an extra collection the
    way the candidate (or the active version) would."""
    try:
        analyzer = AnalyzerConfig.from_dict(manifest.analyzer)
        if language:
            analyzer = dataclasses.replace(analyzer, language=language)
        default_bm25, default_build = BM25Params(), BuildConfig()
        bm25 = BM25Params(
            method=str(manifest.bm25.get("method", default_bm25.method)),
            k1=float(manifest.bm25.get("k1", default_bm25.k1)),
            b=float(manifest.bm25.get("b", default_bm25.b)),
        )
        index = manifest.index or {}
        scoring = str(index.get("scoring", default_build.scoring))
        weights = index.get("field_weights")
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"manifest of {manifest.knowledge_version}: {exc}") from exc
    if weights:
        return BuildConfig(analyzer, bm25, scoring, {k: float(v) for k, v in weights.items()})
    return BuildConfig(analyzer, bm25, scoring)


def ranking_config(overrides: Mapping[str, Any] | None = None) -> RouterConfig:
    """The cascade asked for ``DEFAULT_DEPTH`` results per query, latency budget lifted."""
    config = RouterConfig(
        bm25_candidates=DEFAULT_DEPTH,
        vector_top_k=DEFAULT_DEPTH,
        budget=RetrievalBudget(max_documents=DEFAULT_DEPTH, max_vector_results=DEFAULT_DEPTH),
    )
    return eval_config(dataclasses.replace(config, **dict(overrides or {})))


def variant_config(variant: str, base: RouterConfig) -> RouterConfig:
    only = MappingProxyType
    if variant == DEFAULT_VARIANT:
        return base
    if variant == "bm25":
        return dataclasses.replace(base, vector_fallback=False)
    if variant == "vector":
        return dataclasses.replace(base, always_vector=True, source_weights=only({"vector": 1.0}))
    if variant == "rrf":
        weights = only({"bm25": 1.0, "vector": 1.0})
        return dataclasses.replace(base, always_vector=True, source_weights=weights)
    raise ConfigError(f"unknown variant {variant!r}; choose one of {', '.join(VARIANTS)}")


def beir_queries(collection: BeirCollection, depth: int = DEFAULT_DEPTH) -> list[GoldenQuery]:
    """Every judged query as an evaluation query with graded relevance; all are answerable."""
    queries = []
    for query_id, grades in collection.qrels.items():
        text = collection.queries[query_id]
        try:
            request = QueryRequest(query=text[:MAX_QUERY_CHARS], top_k=depth)
        except ValidationError as exc:
            reason = exc.errors()[0]["msg"]
            raise DatasetError(f"{collection.name}: query {query_id} is invalid: {reason}") from exc
        queries.append(
            GoldenQuery(
                id=query_id,
                query=text,
                category=collection.name,
                expected=[doc for doc, grade in grades.items() if grade > 0],
                forbidden=[],
                abstain=False,
                intent=None,
                request=request,
                grades=dict(grades),
            )
        )
    return queries


@dataclass(frozen=True)
class BeirRun:
    """One variant of the cascade over one compiled collection."""

    collection: BeirCollection
    package: KnowledgePackage
    encoder: Any = None
    variant: str = DEFAULT_VARIANT
    overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    reranker: Reranker | None = None

    def answerers(self) -> tuple[Any, Any]:
        """(served, ranking): the served cascade abstains as configured; the ranking one never
        abstains on a weak match, so abstained queries still get a ranking to score."""
        base = variant_config(self.variant, ranking_config(self.overrides))
        no_abstention = dataclasses.replace(base, abstain_below=0.0, min_coverage=0.0)
        vectors = self.encoder is not None
        served = package_answerer(
            self.package,
            base,
            encoder=self.encoder,
            use_vectors=vectors,
            cache=True,
            reranker=self.reranker,
        )
        ranking = package_answerer(
            self.package,
            no_abstention,
            encoder=self.encoder,
            use_vectors=vectors,
            cache=False,
            reranker=self.reranker,
        )
        return served, ranking


async def evaluate_collection(
    run: BeirRun,
    *,
    progress: Callable[[int], None] | None = None,
    info: Mapping[str, Any] | None = None,
    queries: Iterable[GoldenQuery] | None = None,
) -> EvalReport:
    """Metrics of one run: ranking (ranx, abstentions re-ranked), abstention, paths, latency."""
    if run.variant != "bm25" and run.variant != DEFAULT_VARIANT and run.encoder is None:
        raise ConfigError(f"variant {run.variant!r} needs section vectors (an embedder)")
    if run.encoder is not None:
        prefetch_query_vectors(run.collection, run.encoder)
    served, ranking = run.answerers()
    return await evaluate(
        list(queries) if queries is not None else beir_queries(run.collection),
        served,
        name=run.collection.name,
        settings=EvalSettings(recall_at=RECALL_AT),
        rank_answer=ranking,
        progress=progress,
        info=info,
    )
