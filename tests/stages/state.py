"""A ``QueryState`` built for one stage's test as the cascade builds it, up to that stage.

Why a helper: a stage takes the state the pipeline filled before it (the caller's view, the
tier's config, the question resolved, normalized and analyzed, the visibility masks, the exact
keys and term entries read and kept). Built by hand, a test's state drifts from the pipeline's
(a view without the first reads raises ``RecordNotLoaded``; a config without the tier's budget
tests another cascade). So this module calls the pipeline's own steps, in ``run_cascade``'s
order, and copies none of their logic: ``latency_tier``/``tier_config``,
``resolve_references``, ``normalize_query``, ``analyze_query`` with the view's
``ClosedClasses``, ``visibility_masks``, then ``look_up_keys`` and ``read_terms``, whose
``IndexReads`` are applied with ``applied_to`` as the pipeline's ``_keep`` does. The trace
starts empty (the steps before the stage under test record nothing), and its clock stands
still, so no latency budget cuts a stage on a slow machine.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from router.config import RouterConfig
from router.contract import QueryRequest
from router.errors import RouterError
from router.package.reader import KnowledgePackage
from router.package.stores.cost import ReadCost
from router.results import IndexReads
from router.stages.exact import exact_hits, look_up_keys
from router.stages.filters import visibility_masks
from router.stages.lexical import lexical_search
from router.stages.normalizer import normalize_query
from router.stages.query_analyzer import analyze_query
from router.stages.references import resolve_references
from router.stages.terms import read_terms
from router.stages.tiers import latency_tier, tier_config
from router.state import QueryState, query_day
from router.support.question_frame import ClosedClasses
from router.sync import run_sync
from router.trace import Trace
from tests.common import TODAY

__all__ = ["first_reads", "keep", "query_state", "searched_state"]


def frozen_clock() -> float:
    return 0.0


def query_state(
    package: KnowledgePackage,
    query: str,
    *,
    tenant: str | None = None,
    page: str | None = None,
    tab: str | None = None,
    focus: str | None = None,
    date: dt.date | None = None,
    context: str | None = None,
    config: RouterConfig | None = None,
    read: bool = True,
) -> QueryState:
    """The state ``run_cascade`` holds for ``query`` (asked on TODAY) just past the filters
    stage; with ``read``, past the first reads too (exact keys and the query's term entries
    kept in ``state.package``), so the exact, lexical or confidence stages can run on it."""
    request = QueryRequest(
        query=query, tenant=tenant, page=page, tab=tab, focus=focus, date=date, context=context
    )
    view = package.view(request.tenant)
    tier = latency_tier(request)
    config = tier_config(config or RouterConfig(), tier)
    trace = Trace(frozen_clock, frozen_clock(), config.budget.max_latency_ms)
    normalized = normalize_query(resolve_references(request.query, request.context).text)
    classes = view.derive("question_frame", lambda v: ClosedClasses.of(v.analyzer))
    features = analyze_query(normalized, view.analyzer, classes, config.budget.max_query_words)
    day = query_day(request, TODAY)
    state = QueryState(view, request, config, trace, normalized, features, day, tier=tier)
    state.visible_masks = visibility_masks(view, state.visibility)
    if read:
        first_reads(state)
    return state


def keep(state: QueryState, reads: IndexReads) -> None:
    """What a stage read, kept on the state as the pipeline keeps it (its ``_keep``)."""
    state.package = reads.applied_to(state.package)
    state.texts.update(reads.texts)


def first_reads(state: QueryState) -> tuple[ReadCost | RouterError, ReadCost]:
    """The exact keys and the query's term entries read and kept; what each read cost (the
    exact keys' failure in place of its cost), as the exact and lexical stages take them."""
    exact, exact_cost = run_sync(look_up_keys(state))
    terms, term_cost = run_sync(read_terms(state, state.features.terms))
    keep(state, exact.then(terms))
    return exact_cost, term_cost


def searched_state(
    package: KnowledgePackage,
    query: str,
    *,
    config: RouterConfig | None = None,
    **request: Any,
) -> QueryState:
    """``query_state`` past the exact and lexical stages (``state.exact``, ``state.lexical``
    set as the pipeline sets them, before the corrective expansion); ``request``: the other
    keywords of ``query_state``."""
    state = query_state(package, query, config=config, read=False, **request)
    exact_cost, term_cost = first_reads(state)
    state.exact = exact_hits(state, exact_cost)
    state.lexical = run_sync(lexical_search(state, state.features.terms, term_cost))
    return state
