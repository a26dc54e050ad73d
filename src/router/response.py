"""Mapping a finished query to the API contract (QueryResponse, seeds/004) and to the metrics.

Why apart from the cascade: the response shape (results, analysis, metadata, trace, context) is
the contract every client depends on; the pipeline decides what was found, this module only says
how it is reported, and how a cached response is served again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from router.contract import (
    AgentKnowledgeContext,
    Citation,
    FactAnswer,
    QueryAnalysis,
    QueryResponse,
    ResponseMetadata,
    RetrievalResult,
    Strategy,
)
from router.metrics import Metrics
from router.package.view import PackageView
from router.package.view_parts import RecordNotLoaded
from router.results import Fused, LatencyTier, LexicalConfidence, QueryFeatures
from router.stages.answer import Answer
from router.stages.context_builder import neutralise, shown_heading, shown_title
from router.stages.normalizer import normalize_query
from router.state import QueryState
from router.trace import Trace

__all__ = ["LOW_EVIDENCE_FLAG", "build_response", "from_cache", "record_metrics"]

LOW_EVIDENCE_FLAG = "low_evidence"
"""On every result of a declined question: evidence for the agent, not an answer (PRD §22)."""


def _neutral(citation: Citation) -> Citation:
    """A citation whose quoted passage can hold no tag (``neutralise``): knowledge text is data
    in every output field, not only in the context package."""
    return citation.model_copy(update={"passage": neutralise(citation.passage)})


def _fact(package: PackageView, answer: Answer) -> FactAnswer | None:
    """The fact a direct answer states, structured: key, value, document, and the section
    whose sentence states it."""
    fact = answer.fact
    if fact is None:
        return None
    doc = package.documents[fact.doc_index]
    section = package.sections[fact.section].section_id if fact.section is not None else ""
    return FactAnswer(
        doc_id=doc.semantic_id,
        key=fact.name,
        value=neutralise(fact.value) if isinstance(fact.value, str) else fact.value,
        address=f"{doc.semantic_id}.{fact.name}",
        section_id=section,
    )


def build_response(
    state: QueryState,
    answer: Answer,
    shown: list[Fused],
    context: AgentKnowledgeContext,
    *,
    cache_missed: bool,
) -> QueryResponse:
    """The response of a query the cascade answered; ``cache_missed``: a cache was asked first
    (metadata ``cache`` "miss"), else there is none ("off")."""
    package, trace, config = state.package, state.trace, state.config
    verdict = state.verdict()
    confidence = verdict.reported_value
    return QueryResponse(
        answer=neutralise(answer.text),
        citations=[_neutral(c) for c in answer.citations],
        strategy_used=answer.strategy,
        confidence=round(confidence, 4),
        confidence_level=verdict.reported_level,
        abstained=verdict.abstain or answer.withheld is not None,
        abstention_reason=(
            verdict.reason
            or abstention_reason(
                state.features, state.lexical_result().confidence, state.config.min_coverage
            )
            if verdict.abstain
            else answer.withheld
        ),
        sources_used=["docs"],
        analysis=_analysis(state.features, answer.strategy, confidence, state.tier),
        knowledge_version=package.version,
        results=[_result(package, f, low=verdict.abstain) for f in shown],
        fact=_fact(package, answer),
        metadata=ResponseMetadata(
            latency_ms=trace.elapsed_ms(),
            fallback_triggered=trace.ran("vector"),
            cache="miss" if cache_missed else "off",
            budget_exceeded=trace.exceeded,
        ),
        trace={
            "stages": trace.resolved(_section_id(package), _doc_id(package)),
            "visibility": {"tenant": state.request.tenant, "date": state.day},
            "budget": {
                "max_documents": config.budget.max_documents,
                "max_graph_nodes": config.budget.max_graph_nodes,
                "max_vector_results": config.budget.max_vector_results,
                "max_latency_ms": config.budget.max_latency_ms,
                "exceeded": trace.exceeded,
            },
        },
        context=context,
    )


def from_cache(
    cached: dict[str, Any], where: str, question: str, trace: Trace, metrics: Metrics | None
) -> QueryResponse:
    """A cached response served again: its own latency, where it was found, and the asker's
    own ``question`` in the context and the trace — the key ignores case, so the stored text
    may be another caller's, and it must never reach this one."""
    response = QueryResponse.model_validate(cached)
    if response.context is not None:
        response.context.query = question
    response.metadata.cache = "kv" if where == "kv" else "memory"
    response.metadata.latency_ms = trace.elapsed_ms()
    stages = dict(response.trace.get("stages") or {})
    if isinstance(stages.get("normalize"), dict):
        stages["normalize"] = {**stages["normalize"], "text": normalize_query(question).text}
    response.trace = {**response.trace, "stages": stages, "served_from_cache": where}
    if metrics is not None:
        metrics.queries += 1
        metrics.cache_hits += 1
    return response


def record_metrics(metrics: Metrics | None, response: QueryResponse, exact_hit: bool) -> None:
    """Counts one answered query (PRD §40)."""
    if metrics is None:
        return
    metrics.queries += 1
    metrics.exact_matches += exact_hit
    metrics.vector_fallbacks += response.metadata.fallback_triggered
    metrics.abstentions += response.abstained
    metrics.bm25_successes += (
        not exact_hit
        and not response.abstained
        and not response.metadata.fallback_triggered
        and response.confidence_level in ("HIGH", "MEDIUM")
    )
    metrics.record_stages(response.trace.get("stages", {}))


def _section_id(package: PackageView) -> Callable[[int], str | None]:
    """A trace reference's section id (None when its record could not be read)."""
    return _or_none(lambda section: package.sections[section].section_id)


def _doc_id(package: PackageView) -> Callable[[int], str | None]:
    """A trace reference's document id (None when its record could not be read)."""
    return _or_none(lambda doc: package.documents[doc].semantic_id)


def _or_none(read: Callable[[int], str]) -> Callable[[int], str | None]:
    def resolved(index: int) -> str | None:
        try:
            return read(index)
        except RecordNotLoaded:
            return None

    return resolved


def _result(package: PackageView, candidate: Fused, *, low: bool) -> RetrievalResult:
    """One result; ``low``: evidence of a declined question (flagged ``low_evidence``)."""
    section = package.sections[candidate.section]
    doc = package.documents[package.section_doc[candidate.section]]
    return RetrievalResult(
        doc_id=doc.semantic_id,
        section_id=section.section_id,
        # a flagged title or heading is data no agent should read; none can hold a tag
        title=neutralise(shown_title(doc)),
        heading=neutralise(shown_heading(doc, section)),
        final_score=round(candidate.final, 6),
        scores=dict(candidate.scores),
        flags=[*section.flags, LOW_EVIDENCE_FLAG] if low else list(section.flags),
        trust=doc.trust,
        version=doc.version,
        tenant=doc.tenant,
    )


def _analysis(
    features: QueryFeatures, strategy: Strategy, confidence: float, tier: LatencyTier
) -> QueryAnalysis:
    return QueryAnalysis(
        latency_tier=tier,
        needs_grounding=True,
        task_type=features.task_type,
        complexity=features.complexity,
        requires_structured_data=features.value_question,
        strategy=strategy,
        confidence=round(min(1.0, max(0.0, confidence)), 4),
        intent=features.intent,
        potential_action=features.potential_action,
        terms=features.terms,
        short_query=features.short_query,
        risk_level="medium" if features.potential_action else "low",
    )


def abstention_reason(
    features: QueryFeatures, lexical: LexicalConfidence, min_coverage: float
) -> str:
    """Why the router declined, in words a caller can act on."""
    if not features.terms:
        if features.deictic:
            return "the question refers to the screen but no page, tab or focus was given"
        return "the question has no searchable terms"
    if lexical.coverage == 0:
        return "no document of this knowledge base uses the question's terms"
    if lexical.coverage < min_coverage:
        return f"best match covers {lexical.coverage:.0%} of the question's terms (too weak)"
    return (
        f"the best match is probably not relevant (P = {lexical.value:.2f}, still low after "
        "one retry with typo repair and synonyms)"
    )
