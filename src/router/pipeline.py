"""The cascade: runs the stages in PRD order on one package and builds the QueryResponse.

Why here alone: stages know nothing of each other; this module decides fall-through (exact hit →
no need to trust BM25), abstention, the answer kind, and records every stage in the trace.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from router.config import RouterConfig
from router.contract import (
    Citation,
    QueryAnalysis,
    QueryRequest,
    QueryResponse,
    ResponseMetadata,
    RetrievalResult,
)
from router.package.reader import KnowledgePackage
from router.stages.answer import (
    ABSTAIN_MESSAGE,
    extractive_answer,
    fact_answer,
    supporting_sentence,
)
from router.stages.bm25 import bm25_top_k, term_ids
from router.stages.confidence import LexicalConfidence, confidence_level, lexical_confidence
from router.stages.exact import ExactHit, resolve_context, resolve_exact
from router.stages.facts import FactMatch, best_fact
from router.stages.filters import Visibility, visible_documents, visible_sections
from router.stages.normalizer import normalize_query
from router.stages.query_analyzer import QueryFeatures, analyze_query

__all__ = ["run_query"]

EXACT_CONFIDENCE = 1.0
CONTEXT_CONFIDENCE = 0.9
FACT_DOCS_CONSIDERED = 3


@dataclass
class _Candidate:
    section: int
    scores: dict[str, float] = field(default_factory=dict)
    final: float = 0.0


@dataclass
class _Trace:
    clock: Callable[[], float]
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)
    _last: float = 0.0

    def __post_init__(self) -> None:
        self._last = self.clock()

    def stage(self, name: str, **details: Any) -> None:
        now = self.clock()
        self.stages[name] = {"ms": round((now - self._last) * 1000, 3), **details}
        self._last = now


def run_query(
    package: KnowledgePackage,
    request: QueryRequest,
    config: RouterConfig | None = None,
    today: str | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> QueryResponse:
    """Answer one request from one package (one knowledge version, never a mix)."""
    config = config or RouterConfig()
    started = clock()
    trace = _Trace(clock)
    query = normalize_query(request.query)
    trace.stage("normalize", text=query.text)
    features = analyze_query(query, package.analyzer)
    trace.stage("analyze", terms=features.terms, intent=features.intent)

    day = request.date.isoformat() if request.date else (today or dt.date.today().isoformat())
    visibility = Visibility(request.tenant, day, request.include_deprecated)
    visible = visible_documents(package, visibility)

    exact = [h for h in resolve_exact(package, query) if h.target.doc_index in visible]
    if not exact and (features.deictic or not features.terms):
        # "explique este campo": the UI context names what the question points at
        exact = [
            h
            for h in resolve_context(package, request.focus, request.page, request.tab)
            if h.target.doc_index in visible
        ]
    trace.stage("exact", hits=[_describe_hit(package, h) for h in exact])

    ids = term_ids(features.terms, package.term_ids)
    ranked = bm25_top_k(
        package.postings,
        ids,
        config.bm25_candidates,
        visible_sections(package, visibility),
    )
    trace.stage(
        "bm25",
        query_terms=len(ids),
        candidates=[[package.sections[s].section_id, round(v, 4)] for s, v in ranked[:10]],
    )

    lexical = lexical_confidence(
        package, features.terms, ranked[0][0] if ranked else None, ranked[0][1] if ranked else 0.0
    )
    confidence = _confidence(exact, lexical)
    level = confidence_level(confidence, config) if not exact else "HIGH"
    abstained = not exact and (
        not ranked or lexical.value < config.abstain_below or lexical.coverage < config.min_coverage
    )
    trace.stage(
        "confidence",
        coverage=round(lexical.coverage, 3),
        strength=round(lexical.strength, 3),
        value=round(confidence, 3),
        level=level if not abstained else "NONE",
        unknown_terms=lexical.unknown_terms,
    )

    candidates = [] if abstained else _merge(package, exact, ranked, lexical)
    results = [_result(package, c) for c in candidates[: request.top_k]]
    fact = None if abstained else _fact(package, exact, candidates, features)
    answer, citations, strategy = _answer(package, features, candidates, fact, config, abstained)
    trace.stage("answer", kind=strategy, fact=fact.name if fact else None)

    analysis = _analysis(features, strategy, confidence if not abstained else 0.0)
    return QueryResponse(
        answer=answer,
        citations=citations,
        strategy_used=strategy,
        confidence=round(confidence if not abstained else 0.0, 4),
        confidence_level="NONE" if abstained else level,  # type: ignore[arg-type]
        abstained=abstained,
        abstention_reason=_abstention_reason(features, lexical) if abstained else None,
        sources_used=["docs"],
        analysis=analysis,
        knowledge_version=package.version,
        results=results,
        metadata=ResponseMetadata(latency_ms=round((clock() - started) * 1000, 3)),
        trace={"stages": trace.stages, "visibility": {"tenant": request.tenant, "date": day}},
    )


def _confidence(exact: list[ExactHit], lexical: LexicalConfidence) -> float:
    if any(h.source == "exact" for h in exact):
        return EXACT_CONFIDENCE
    if exact:
        return CONTEXT_CONFIDENCE
    return lexical.value


def _merge(
    package: KnowledgePackage,
    exact: list[ExactHit],
    ranked: list[tuple[int, float]],
    lexical: LexicalConfidence,
) -> list[_Candidate]:
    """Exact/context targets first, then BM25 sections scaled by the lexical confidence."""
    by_section: dict[int, _Candidate] = {}
    order: list[_Candidate] = []
    for hit in exact:
        section = hit.target.section_index
        if section is None:
            section = package.first_section(hit.target.doc_index)
        candidate = by_section.get(section)
        if candidate is None:
            candidate = by_section[section] = _Candidate(section, final=EXACT_CONFIDENCE)
            order.append(candidate)
        candidate.scores[hit.source] = 1.0
    top_score = ranked[0][1] if ranked else 1.0
    for section, score in ranked:
        candidate = by_section.get(section)
        if candidate is None:
            final = lexical.value * score / top_score
            candidate = by_section[section] = _Candidate(section, final=final)
            order.append(candidate)
        candidate.scores["bm25"] = round(score, 6)
    return order


def _result(package: KnowledgePackage, candidate: _Candidate) -> RetrievalResult:
    section = package.sections[candidate.section]
    doc = package.documents[package.section_doc[candidate.section]]
    return RetrievalResult(
        doc_id=doc.semantic_id,
        section_id=section.section_id,
        title=doc.title,
        heading=section.heading,
        final_score=round(candidate.final, 6),
        scores=candidate.scores,
        flags=list(section.flags),
        trust=doc.trust,
        version=doc.version,
        tenant=doc.tenant,
    )


def _fact(
    package: KnowledgePackage,
    exact: list[ExactHit],
    candidates: list[_Candidate],
    features: QueryFeatures,
) -> FactMatch | None:
    for hit in exact:
        if hit.target.kind == "fact" and hit.target.fact is not None:
            doc = package.documents[hit.target.doc_index]
            return FactMatch(hit.target.doc_index, hit.target.fact, doc.facts[hit.target.fact], 99)
    if not features.value_question:
        return None
    docs: list[int] = []
    for candidate in candidates:
        doc_index = package.section_doc[candidate.section]
        if doc_index not in docs:
            docs.append(doc_index)
        if len(docs) == FACT_DOCS_CONSIDERED:
            break
    return best_fact(package, docs, features.terms)


def _answer(
    package: KnowledgePackage,
    features: QueryFeatures,
    candidates: list[_Candidate],
    fact: FactMatch | None,
    config: RouterConfig,
    abstained: bool,
) -> tuple[str, list[Citation], Any]:
    if abstained:
        return ABSTAIN_MESSAGE, [], "safe_decline"
    if fact is not None:
        doc = package.documents[fact.doc_index]
        stated = [(sec, supporting_sentence(sec, fact.value)) for sec in doc.sections]
        section, support = next(((sec, s) for sec, s in stated if s), (doc.sections[0], None))
        citation = Citation(
            doc_id=doc.semantic_id,
            section_id=section.section_id,
            passage=support or f"{fact.name}: {fact.value}",
            score=1.0,
        )
        return fact_answer(doc, fact.name, fact.value, support), [citation], "direct_answer"
    ranked = [
        (
            package.documents[package.section_doc[c.section]],
            package.sections[c.section],
            c.final,
        )
        for c in candidates[: config.answer_sections]
    ]
    text, passages = extractive_answer(
        package.analyzer, features.terms, ranked, config.answer_sentences
    )
    citations = [
        Citation(
            doc_id=p.doc.semantic_id,
            section_id=p.section.section_id,
            passage=p.text,
            score=round(p.score, 6),
        )
        for p in passages
    ]
    strategy = "multi_backend_agent" if features.potential_action else "simple_rag"
    return text or ABSTAIN_MESSAGE, citations, strategy


def _analysis(features: QueryFeatures, strategy: str, confidence: float) -> QueryAnalysis:
    return QueryAnalysis(
        needs_grounding=True,
        task_type=features.task_type,  # type: ignore[arg-type]
        complexity=features.complexity,  # type: ignore[arg-type]
        requires_structured_data=features.value_question,
        strategy=strategy,  # type: ignore[arg-type]
        confidence=round(min(1.0, max(0.0, confidence)), 4),
        intent=features.intent,  # type: ignore[arg-type]
        potential_action=features.potential_action,
        terms=features.terms,
        short_query=features.short_query,
        risk_level="medium" if features.potential_action else "low",
    )


def _abstention_reason(features: QueryFeatures, lexical: LexicalConfidence) -> str:
    if not features.terms:
        if features.deictic:
            return "the question refers to the screen but no page, tab or focus was given"
        return "the question has no searchable terms"
    if lexical.coverage == 0:
        return "no document of this knowledge base uses the question's terms"
    return f"best match covers {lexical.coverage:.0%} of the question's terms (too weak)"


def _describe_hit(package: KnowledgePackage, hit: ExactHit) -> dict[str, Any]:
    doc = package.documents[hit.target.doc_index]
    return {"kind": hit.target.kind, "source": hit.source, "key": hit.key, "doc": doc.semantic_id}
