"""Answer queries from one loaded package, outside the service: what evaluation and the gate run.

Why not the service: the service answers from whatever version KV says is active; evaluating a
candidate (a folder from ``kr build --out``) and the active version side by side needs two
packages answering at once, each with its own vector index and query embedder.

Why a latency budget of "never" by default: the cascade skips the graph and vector stages once
a query has spent its budget (PRD §21), so on a loaded machine the same package could rank
differently from one run to the next. Quality is measured with the budget lifted, so a gate
verdict depends on the package and not on the machine's load; latency is reported beside it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from kr.evaluation import Answerer, EvalReport, evaluate
from kr.fact_values import fact_values_of
from kr.golden import GoldenQuery
from kr.progress import progress_bar
from router.adapters.local.embedders import embedder_for_model
from router.adapters.local.vector_index import LocalVectorIndex
from router.compile.vector_cache import VectorCache, cache_id
from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.package.reader import KnowledgePackage
from router.pipeline import CascadeServices, run_cascade
from router.ports import Reranker
from router.stages.cache import QueryCache
from router.sync import run_sync
from router.vectors.records import section_records

__all__ = [
    "EVAL_CACHE_ENTRIES",
    "UNBOUNDED_LATENCY_MS",
    "CachedQueryEmbedder",
    "eval_config",
    "evaluate_golden",
    "package_answerer",
    "query_cache_key",
]

UNBOUNDED_LATENCY_MS = 1e9
EVAL_CACHE_ENTRIES = 4096
"""A fresh in-memory LRU per evaluation: repeated queries in a set are served from it (so the
cache hit rate is the set's repetition rate), and nothing leaks in from earlier runs or KV."""


def query_cache_key(encoder: Any, text: str) -> str:
    """The text a question's vector is cached under: what ``encoder`` embeds of ``text`` (cut to
    its own bound, e5's ``bounded_query``), so that a cached vector is the one serving computes."""
    bound = getattr(encoder, "bounded_query", None)
    return str(bound(text)) if bound is not None else text


class CachedQueryEmbedder:
    """A local embedder's query vectors through the on-disk vector cache.

    Why: e5-small loads in seconds and embeds ~60 short texts/s on two cores; evaluation and
    the gate ask the same queries again and again, so each is embedded once, ever.
    """

    def __init__(self, encoder: Any, cache_root: Path | None = None) -> None:
        self.encoder = encoder
        self.model_id: str = encoder.model_id
        self.dimensions: int = encoder.dimensions
        self.cache = VectorCache(cache_id(encoder), encoder.dimensions, cache_root)

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        if kind == "query":
            texts = [query_cache_key(self.encoder, text) for text in texts]
        rows = self.cache.embed(
            kind, list(texts), lambda batch: np.asarray(self.encoder.encode(batch, kind))
        )
        return [list(map(float, row)) for row in np.asarray(rows)]


def eval_config(base: RouterConfig | None = None) -> RouterConfig:
    """``base`` (default: the tuned defaults) with the latency budget lifted (see module doc)."""
    base = base or RouterConfig()
    budget = dataclasses.replace(base.budget, max_latency_ms=UNBOUNDED_LATENCY_MS)
    return dataclasses.replace(base, budget=budget)


def package_answerer(
    package: KnowledgePackage,
    config: RouterConfig | None = None,
    *,
    encoder: Any = None,
    use_vectors: bool = True,
    cache: bool = True,
    today: str | None = None,
    reranker: Reranker | None = None,
) -> Answerer:
    """An answerer over ``package``: its own vector index (when the package has vectors and a
    matching local embedder exists), a fresh memory cache, ``config`` (default: ``eval_config``).

    ``encoder`` overrides the embedder picked from the manifest's model id (BEIR runs pass the
    one they built the vectors with); ``reranker`` reorders the fused top-N when confidence is
    not HIGH (``router.stages.rerank``)."""
    config = config or eval_config()
    embedder = None
    index = None
    if use_vectors and package.has_vectors and package.manifest.embedding:
        encoder = encoder or embedder_for_model(package.manifest.embedding.get("model"))
        if encoder is not None:
            embedder = CachedQueryEmbedder(encoder)
            index = LocalVectorIndex(package.vector_dimensions)
            index.upsert_many(run_sync(section_records(package)))
    services = CascadeServices(
        embedder=embedder,
        vector_index=index,
        cache=QueryCache(EVAL_CACHE_ENTRIES) if cache else None,
        reranker=reranker,
    )

    async def answer(request: QueryRequest) -> QueryResponse:
        return await run_cascade(package, request, config, services, today=today)

    return answer


async def evaluate_golden(
    queries: Sequence[GoldenQuery],
    package: KnowledgePackage,
    *,
    name: str,
    today: str | None = None,
    reranker: Reranker | None = None,
    info: Mapping[str, Any] | None = None,
    label: str | None = None,
) -> EvalReport:
    """A golden set asked of ``package`` on ``today`` (default: the current day), its fact
    questions checked against the package's own facts: what ``kr eval`` runs on a golden file
    or a help-center set, and the gate on each package. ``label`` names the progress bar."""
    day = today or dt.date.today().isoformat()
    answer = package_answerer(package, today=day, reranker=reranker)
    catalog = await package.read_catalog()
    facts = fact_values_of(catalog.documents)
    with progress_bar(len(queries), label or name) as advance:
        return await evaluate(
            queries, answer, name=name, info=info, progress=advance, fact_values=facts, today=day
        )
