"""The cascade: the order of the stages and where it falls through, for one request on one package.

Why here alone: stages know nothing of each other. This module decides the order (ADR 0006,
PRD-003 §4/§32), the fall-through (a cache hit returns, an exact hit skips the corrective
expansion and the vector stage, an abstention skips fusion), when the latency budget skips a
stage, and which services a stage may use. What a stage does lives in ``router/stages/``; the
state it reads and fills is ``router.state.QueryState``; the response shape is
``router.response``.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from router.config import RouterConfig
from router.contract import QueryRequest, QueryResponse
from router.deferral import Defer
from router.errors import RouterError
from router.metrics import Metrics
from router.package.reader import KnowledgePackage
from router.package.stores.cost import ReadCost
from router.package.view import PackageView
from router.ports import Embedder, Generator, Reranker, VectorIndex
from router.response import build_response, from_cache, record_metrics
from router.results import Fused, GraphNode, IndexReads, LatencyTier
from router.stages.answer import answer_sections, choose_answer, named_fact
from router.stages.cache import (
    CacheLookup,
    QueryCache,
    known_lookup,
    look_up,
    probe,
    request_cache_key,
    trace_lookup,
)
from router.stages.confidence import assess, unreadable, with_vector_evidence
from router.stages.context_builder import context_for
from router.stages.corrective import correct, is_weak
from router.stages.exact import exact_hits, look_up_keys
from router.stages.filters import visibility_masks
from router.stages.fusion import fuse_candidates, record_fusion
from router.stages.graph import graph_neighbours
from router.stages.lexical import lexical_search
from router.stages.normalizer import normalize_query
from router.stages.query_analyzer import analyze_query
from router.stages.records import (
    documents_of,
    early_sections,
    likely_shown,
    load_records,
    needed_documents,
    read_records,
)
from router.stages.references import resolve_references
from router.stages.rerank import rerank_candidates, rerank_skip_reason
from router.stages.terms import read_terms
from router.stages.texts import load_texts, quoted_sections
from router.stages.tiers import latency_tier, tier_config
from router.stages.topk import shown_k
from router.stages.vector import vector_fallback, vector_skip_reason
from router.state import QueryState, query_day
from router.support.question_frame import ClosedClasses
from router.sync import beside, concurrently, run_sync
from router.trace import Trace

__all__ = ["CascadeServices", "cached_before_loading", "run_cascade", "run_query"]


@dataclass
class CascadeServices:
    """The I/O the cascade may use, all optional: without them it runs the lexical stages only."""

    embedder: Embedder | None = None
    vector_index: VectorIndex | None = None
    generator: Generator | None = None
    cache: QueryCache | None = None
    metrics: Metrics | None = None
    # Runs side effects (the KV cache copy) after the response when the HTTP layer allows it.
    defer: Defer | None = None
    reranker: Reranker | None = None


def run_query(
    package: KnowledgePackage,
    request: QueryRequest,
    config: RouterConfig | None = None,
    today: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> QueryResponse:
    """The lexical cascade without I/O services (no cache, vectors or LLM), synchronously."""
    return run_sync(run_cascade(package, request, config, CascadeServices(), today, clock))


async def cached_before_loading(
    version: str,
    request: QueryRequest,
    services: CascadeServices,
    today: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> tuple[QueryResponse | None, CacheLookup | None]:
    """The cached answer to ``request`` on ``version``, probed before its package is loaded:
    a cold isolate answers a question already answered (by any isolate, or by the cache
    warming) from KV, without reading the index. The probe is returned for the cascade, so a
    miss costs one KV read, not two."""
    if services.cache is None:
        return None, None
    trace = Trace(clock, clock(), 0.0)  # only its elapsed time is read
    query = normalize_query(resolve_references(request.query, request.context).text)
    day = query_day(request, today)
    found = await probe(services.cache, request, query.text, version, day)
    if found.response is None:
        return None, found
    response = from_cache(found.response, found.where, request.query, trace, services.metrics)
    return response, found


async def run_cascade(
    package: KnowledgePackage,
    request: QueryRequest,
    config: RouterConfig | None = None,
    services: CascadeServices | None = None,
    today: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
    probed: CacheLookup | None = None,
) -> QueryResponse:
    """Answer one request from one package (one knowledge version, never a mix), through the
    caller's view of it: the shared partition and the tenant's own, never another's.
    ``probed``: the cache already probed for it (``cached_before_loading``)."""
    view = package.view(request.tenant)
    tier = latency_tier(request)
    config = tier_config(config or RouterConfig(), tier)
    services = services or CascadeServices()
    trace = Trace(clock, clock(), config.budget.max_latency_ms)
    state = _understood(view, request, config, tier, trace, today)

    state.visible_masks = visibility_masks(view, state.visibility)
    cache = services.cache
    if cache is None:
        trace.skip("cache", "no cache configured")
        return await _cascade(state, services, None)
    known = known_lookup(state, cache, probed)
    if known is not None:  # probed already, or in the isolate's memory: no read
        if known.response is not None:
            trace_lookup(state, known)
            return from_cache(known.response, known.where, request.query, trace, services.metrics)
        return await _cascade(state, services, lambda: known)

    # the KV probe runs beside the cascade: a hit answers as soon as it arrives; a miss, or a
    # probe still on its way when the cascade has its answer, holds nothing back
    def cascade(peek: Callable[[], CacheLookup | None]) -> Awaitable[QueryResponse]:
        return _cascade(state, services, peek)

    raced = beside(look_up(state, cache), _is_hit, cascade, services.defer)
    hit, response = await raced
    if hit is not None and hit.response is not None:
        trace_lookup(state, hit)
        return from_cache(hit.response, hit.where, request.query, trace, services.metrics)
    assert response is not None  # beside returns one of the two
    return response


def _is_hit(found: CacheLookup) -> bool:
    return found.response is not None


async def _cascade(
    state: QueryState,
    services: CascadeServices,
    peek: Callable[[], CacheLookup | None] | None,
) -> QueryResponse:
    """The cascade's stages for one understood request. ``peek`` (None without a cache) gives
    the query cache's lookup if it has arrived: asked once the answer's inputs are read, before
    the generator, the metrics and the cache write; a lookup still on its way counts as a miss
    (the answer is the one the cache would hold: same version, same key)."""
    request, config, trace = state.request, state.config, state.trace
    exact_reads, term_reads = await _first_reads(state)
    state.exact = exact_hits(state, exact_reads)
    state.lexical = await lexical_search(state, state.features.terms, term_reads)
    if state.exact:
        trace.skip("corrective", "exact hit")
    elif not config.corrective_expansion:
        trace.skip("corrective", "corrective expansion disabled")
    elif not is_weak(state.lexical.confidence, config):
        trace.skip("corrective", "lexical result strong enough")
    else:
        state.lexical, read = await correct(state, state.lexical)
        _keep(state, read)
    state.graph = await _graph_beside_records(state) if _budget_left(trace, "graph") else []
    state.assessment = assess(state)
    state.vector = await _vector_stage(state, services)
    state.assessment = verdict = with_vector_evidence(state)

    fused = [] if verdict.outcome == "nothing" else fuse_candidates(state)
    k = shown_k("LOW" if verdict.abstain else verdict.level, config, request.top_k)
    record_fusion(state, fused, k)
    fused = await _rerank_stage(state, services, fused)
    shown = fused[:k]
    early = early_sections(state, shown, fused)
    records = await load_records(state, needed_documents(state, shown, fused), early)
    if records is None:
        state.assessment = verdict = unreadable(verdict)
        fused = shown = []
    else:
        _keep(state, records)
    fact = named_fact(state)
    quoting = answer_sections(state, fused, fact)
    state.texts = await load_texts(state, quoted_sections(shown, quoting))
    context = context_for(state, shown)
    cache_key = None
    if peek is not None:
        found = peek()
        if found is not None and found.response is not None:  # unused: ``beside`` answers it
            return from_cache(found.response, found.where, request.query, trace, None)
        cache_key = request_cache_key(state)
        trace_lookup(state, found or CacheLookup(cache_key, None, "pending"))
    answer = await choose_answer(state, fused, fact, context, services.generator)

    response = build_response(state, answer, shown, context, cache_missed=cache_key is not None)
    record_metrics(services.metrics, response, exact_hit=bool(state.exact))
    if services.cache is not None and cache_key is not None:
        await services.cache.put(cache_key, response.model_dump(mode="json"), services.defer)
    return response


def _understood(
    view: PackageView,
    request: QueryRequest,
    config: RouterConfig,
    tier: LatencyTier,
    trace: Trace,
    today: str | None,
) -> QueryState:
    """The request understood before any index is read: its references resolved, its text
    normalized and analyzed with the view's analyzer (each step traced) — the state every stage
    after it reads and the pipeline fills. Apart from ``run_cascade`` because it reads nothing:
    what follows is the cascade's reads and its fall-through."""
    resolution = resolve_references(request.query, request.context)
    if resolution.rule is not None:
        trace.stage("references", rule=resolution.rule, resolved=resolution.text)
    query = normalize_query(resolution.text)
    trace.stage("normalize", text=query.text)
    classes = view.derive("question_frame", lambda v: ClosedClasses.of(v.analyzer))
    features = analyze_query(query, view.analyzer, classes, config.budget.max_query_words)
    analyzed: dict[str, object] = {"terms": features.terms, "intent": features.intent}
    if features.truncated:  # words past max_query_words, or too long to be words
        analyzed.update(truncated=True, words=len(features.words))
    trace.stage("analyze", **analyzed)
    return QueryState(
        view, request, config, trace, query, features, query_day(request, today), tier=tier
    )


async def _first_reads(state: QueryState) -> tuple[ReadCost | RouterError, ReadCost]:
    """The exact keys and the entries of the query's terms, fetched concurrently (a cold query's
    first round trip; its posting shards are the second, the lexical search reads them), kept
    on the state; what each read cost (the exact keys' failure in place of its cost)."""
    exact, terms = await concurrently(
        [look_up_keys(state), read_terms(state, state.features.terms)]
    )
    exact_found, exact_cost = cast("tuple[IndexReads, ReadCost | RouterError]", exact)
    term_found, term_cost = cast("tuple[IndexReads, ReadCost]", terms)
    _keep(state, exact_found.then(term_found))
    return exact_cost, term_cost


async def _graph_beside_records(state: QueryState) -> list[GraphNode]:
    """The graph's edges, and beside them the records and texts of the sections the response
    will most likely show (``likely_shown``): one round trip where there were two in a row
    (a cold query's third; the records stage then reads only what the graph, the vectors or
    the fusion added). Traced as ``graph`` then ``early_records``, whichever settled first."""
    sections = likely_shown(state)
    if not sections:
        return await graph_neighbours(state)
    graph, early = await concurrently(
        [graph_neighbours(state), read_records(state, documents_of(state, sections), sections)]
    )
    reads, details = cast("tuple[IndexReads | None, dict[str, Any]]", early)
    state.trace.stage("early_records", **details)
    if reads is not None:
        _keep(state, reads)
    return cast("list[GraphNode]", graph)


def _keep(state: QueryState, reads: IndexReads) -> None:
    """What a stage read of the index, kept for the stages after it: the one place the query's
    view (``state.package``) and its texts change."""
    state.package = reads.applied_to(state.package)
    state.texts.update(reads.texts)


async def _vector_stage(state: QueryState, services: CascadeServices) -> list[tuple[int, float]]:
    """The vector fallback when its services exist, its level calls for it and budget is left."""
    embedder, index = services.embedder, services.vector_index
    reason = vector_skip_reason(state, embedder, index)
    if reason is not None:
        state.trace.skip("vector", reason)
        return []
    if not _budget_left(state.trace, "vector"):
        return []
    assert embedder is not None and index is not None  # vector_skip_reason checked both
    return await vector_fallback(state, embedder, index)


async def _rerank_stage(
    state: QueryState, services: CascadeServices, fused: list[Fused]
) -> list[Fused]:
    """The fused top-N reordered by the reranker when one exists, confidence is not HIGH and
    budget is left; otherwise (or when it fails) the fused order."""
    reason = rerank_skip_reason(state, services.reranker)
    if reason is not None:
        state.trace.skip("rerank", reason)
        return fused
    if not _budget_left(state.trace, "rerank"):
        return fused
    assert services.reranker is not None  # rerank_skip_reason checked it
    reranked, read = await rerank_candidates(state, fused, services.reranker)
    _keep(state, read)
    return reranked


def _budget_left(trace: Trace, stage: str) -> bool:
    """False (and the stage recorded as skipped) when the latency budget is already spent."""
    if trace.over_budget(stage):
        trace.skip(stage, "latency budget spent")
        return False
    return True
