"""Stage — the lexical search: keyword phrases and BM25F, with the confidence of their result.

Why together: the corrective expansion re-runs exactly this (keyword + BM25 + confidence) on the
repaired or expanded terms and keeps whichever result is more confident, so one function runs it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from router.errors import RouterError
from router.package.stores.cost import ReadCost
from router.package.stores.shards import ShardReads
from router.ranking.bm25 import bm25_method
from router.ranking.fetch_budget import within_fetch_budget
from router.ranking.numpy_backend import PostingArrays
from router.ranking.score_bounds import ScoreBounds
from router.ranking.top_k import served_terms_top_k
from router.results import Lexical
from router.stages.confidence import lexical_confidence
from router.support.keyword import keyword_matches
from router.trace import TRACE_TOP_N, SectionRef, WorkLimit

if TYPE_CHECKING:
    from router.package.stores.arena import ArenaLease
    from router.package.view import PackageView
    from router.state import QueryState

__all__ = ["lexical_search"]


async def lexical_search(
    state: QueryState,
    terms: list[str],
    term_reads: ReadCost,
    stage_suffix: str = "",
    term_weights: Mapping[str, float] | None = None,
) -> Lexical:
    """Keyword phrases, then BM25F, each cut to ``bm25_candidates``; traced as ``keyword`` and
    ``bm25`` (plus ``stage_suffix`` when the corrective expansion re-runs them). The entries of
    ``terms`` were read before (``stages.terms``; ``term_reads``: what that cost), so this
    stage reads their posting shards; the trace's ``bm25`` counts both reads. ``term_weights``
    scales the BM25 weight of some terms (the synonyms the corrective expansion added,
    ``RouterConfig.synonym_weight``)."""
    package, config = state.package, state.config
    budget = config.budget
    plan = within_fetch_budget(
        package, terms, budget.max_fetched_postings, budget.max_whole_long_postings
    )
    lease = package.lease_arena()  # large shards are read into it, and live until it ends
    try:
        reads, scored = await _load_postings(state, plan.scored, lease, plan.heads)
        return _search(
            state, terms, term_reads, reads, scored, plan.left_out, stage_suffix, term_weights
        )
    finally:
        package.end_lease(lease)


def _search(
    state: QueryState,
    terms: list[str],
    term_reads: ReadCost,
    reads: ShardReads,
    scored: list[str],
    left_out: list[str],
    stage_suffix: str,
    term_weights: Mapping[str, float] | None = None,
) -> Lexical:
    """Keyword phrases and BM25F over the loaded shards, and the confidence of the result."""
    package, config, allowed = state.package, state.config, state.allowed
    phrases = WorkLimit(config.budget.max_keyword_phrases)  # cheap steps: a count, no deadline
    keyword = keyword_matches(package, terms, allowed, phrases)[: config.bm25_candidates]
    state.trace.stage(
        "keyword" + stage_suffix,
        matches=[[SectionRef(s), round(v, 3)] for s, v in keyword[:TRACE_TOP_N]],
        **phrases.report(state.trace, "keyword" + stage_suffix),
    )
    weights = state.block_weights
    bounds: ScoreBounds = package.shared_memo("bm25_bounds", lambda: _score_bounds(package))
    bounds.max_bytes = package.budget.bound_bytes  # the isolate's room may have changed
    arrays: PostingArrays = package.shared_memo("bm25_arrays", PostingArrays)
    ranking = served_terms_top_k(  # numpy in CPython, the pure scorer in the Worker: one ranking
        package,
        scored,
        weights,
        bm25_method(package),
        config.bm25_candidates,
        allowed,
        loaded=reads.shards,
        term_weights=term_weights,
        bounds=bounds,
        max_postings=config.budget.max_postings,
        arrays=arrays,
        deadline=state.trace.deadline,
    )
    ranked = ranking.ranked
    confidence = lexical_confidence(package, scored, ranked, weights, config, reads.shards)
    details = {
        "query_terms": sum(1 for t in terms if package.knows(t)),
        "fields": sorted(weights),
        "candidates": [[SectionRef(s), round(v, 4)] for s, v in ranked[:TRACE_TOP_N]],
    }
    if ranking.truncated or left_out or reads.head_pages:  # a budget cut something short
        details["truncated"] = True
    if reads.head_pages:  # long lists scored on their largest impacts only
        details["head_pages"] = reads.head_pages
    if left_out:
        details["terms_left_out"] = left_out
    if ranking.timed_out:  # the deadline stopped the scoring between its windows
        details["budget_exceeded"] = True
        state.trace.cut("bm25" + stage_suffix)
    if state.unreadable:  # some index reads failed: scored on what could be read
        details["error"] = state.unreadable[-1]
    if reads.round_trips or term_reads.round_trips:
        details.update(
            term_chunks_fetched=term_reads.chunks_fetched,
            shards_fetched=reads.shards_fetched,
            bytes_fetched=term_reads.bytes_fetched + reads.bytes_fetched,
            round_trips=term_reads.round_trips + reads.round_trips,
        )
    state.trace.stage("bm25" + stage_suffix, **details)
    return Lexical(list(terms), keyword, ranked, confidence)


def _score_bounds(package: PackageView) -> ScoreBounds:
    """The BM25 scorer's memo, one for the whole package (its keys are posting blocks; it shares
    the maxima the confidence stage uses)."""
    return ScoreBounds(package.impact_bounds, package.budget.bound_bytes)


async def _load_postings(
    state: QueryState, terms: list[str], lease: ArenaLease | None, heads: list[str]
) -> tuple[ShardReads, list[str]]:
    """The shards of ``terms`` and the terms that can be scored: all of them, or none when a
    shard cannot be read (the failure is named in ``state.unreadable``; the query degrades to
    its keyword phrases, exact hits and vectors instead of failing)."""
    try:
        return await state.package.load_postings(terms, lease, heads), terms
    except RouterError as exc:
        state.note_unreadable("posting shards", exc)
        return ShardReads(round_trips=1), []
