"""One query's outcome: the rank of its first expected id, how it was served, what it leaked.

Why map results to expected ids: a golden query lists document *or* section ids; a result counts
when either of its ids is expected, so each result is scored under the expected id it matches.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kr.golden import GoldenQuery
from router.contract import QueryResponse

__all__ = [
    "CONTEXT_FIELDS",
    "PATHS",
    "QueryOutcome",
    "failure_row",
    "query_outcome",
    "ranked_keys",
    "request_context",
]

RANKED_IN_JSON = 10  # result keys kept per query in the JSON report (enough to audit top-10)
TOP_SHOWN = 3  # results named per query for people ("section (vversion)")
CONTEXT_FIELDS = ("tenant", "page", "tab", "focus", "date")
"""The request context a golden query is asked in, kept in the report so that a failing query can
be asked again as it was (the playground's golden-set view links to it)."""
PATHS = ("cache", "exact", "bm25", "hybrid", "abstained")
"""How a query was served: a cache hit, an exact id/alias hit, the lexical stages alone, with the
vector fallback, or not at all (abstention)."""


@dataclass(frozen=True)
class QueryOutcome:
    """What happened to one query, as far as the metrics and the gate's diff need it."""

    id: str
    query: str
    category: str
    expected: tuple[str, ...]
    should_abstain: bool
    abstained: bool
    ranked: tuple[str, ...]  # result keys in rank order (see ``_ranked_keys``)
    rank: int | None  # 1-based rank of the first expected key; None: not retrieved
    intent_ok: bool | None
    leaks: int
    path: str
    latency_ms: float
    stage_ms: Mapping[str, float]
    confidence_level: str
    top: tuple[str, ...]  # "section (vversion)" of the first results, for humans
    passed: bool
    vector_ran: bool = False  # the vector fallback ran (whatever the query's path)
    scores: Mapping[str, float] = field(default_factory=dict)  # per-query ranx values
    context: Mapping[str, str] = field(default_factory=dict)  # CONTEXT_FIELDS that were set
    fact_ok: bool | None = None  # a fact question's answer stated its value (None: not one)
    confidence: float = 0.0  # the confidence the router reported (0 to 1)

    @property
    def judged(self) -> bool:
        """Counted in the ranking metrics: it expects ids and is not an out-of-scope query."""
        return bool(self.expected) and not self.should_abstain

    @property
    def top_relevant(self) -> bool | None:
        """Whether the served first result is relevant: what ``confidence`` claims the chance
        of. A question to decline has no relevant result; None for an answerable question
        without expected ids (nothing to judge the first result by)."""
        if self.should_abstain:
            return False
        if not self.judged:
            return None
        return not self.abstained and self.rank == 1

    @property
    def false_answer(self) -> bool:
        """Answered, and wrongly: a question to decline answered, a wrong first result, or a
        fact question whose answer does not state the fact's value."""
        if self.abstained:
            return False
        return self.should_abstain or self.top_relevant is False or self.fact_ok is False

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "query": self.query,
            "category": self.category,
            "expected": list(self.expected),
            "should_abstain": self.should_abstain,
            "abstained": self.abstained,
            "rank": self.rank,
            "ranked": list(self.ranked[:RANKED_IN_JSON]),
            "intent_ok": self.intent_ok,
            "fact_ok": self.fact_ok,
            "false_answer": self.false_answer,
            "leaks": self.leaks,
            "path": self.path,
            "vector_ran": self.vector_ran,
            "latency_ms": self.latency_ms,
            "confidence": self.confidence,
            "confidence_level": self.confidence_level,
            "top": list(self.top),
            "passed": self.passed,
            "scores": dict(self.scores),
            "context": dict(self.context),
        }


def query_outcome(
    golden: GoldenQuery,
    response: QueryResponse,
    ranked: list[str],
    scores: Mapping[str, float],
    fact_ok: bool | None = None,
) -> QueryOutcome:
    expected = set(golden.expected)
    rank = next((i for i, key in enumerate(ranked, start=1) if key in expected), None)
    stages = response.trace.get("stages", {})
    cached = response.metadata.cache in ("memory", "kv")
    exact_stage = stages.get("exact", {})
    if cached:
        path = "cache"
    elif response.abstained:
        path = "abstained"
    elif "skipped" not in exact_stage and exact_stage.get("hits"):
        path = "exact"
    elif response.metadata.fallback_triggered:
        path = "hybrid"
    else:
        path = "bm25"
    stage_ms = {} if cached else _stage_ms(stages)
    intent_ok = None if golden.intent is None else response.analysis.intent == golden.intent
    leaks = _leaks(golden, response)
    passed = (
        response.abstained == golden.abstain
        and not leaks
        and intent_ok is not False
        and (not golden.expected or golden.abstain or rank == 1)
        and fact_ok is not False
    )
    return QueryOutcome(
        id=golden.id,
        query=golden.query,
        category=golden.category,
        expected=tuple(golden.expected),
        should_abstain=golden.abstain,
        abstained=response.abstained,
        ranked=tuple(ranked),
        rank=rank,
        intent_ok=intent_ok,
        leaks=leaks,
        path=path,
        latency_ms=float(response.metadata.latency_ms),
        stage_ms=stage_ms,
        confidence_level=response.confidence_level,
        top=tuple(f"{r.section_id} (v{r.version})" for r in response.results[:TOP_SHOWN]),
        passed=passed,
        vector_ran=not cached and response.metadata.fallback_triggered,
        scores=dict(scores),
        context=request_context(golden),
        fact_ok=fact_ok,
        confidence=float(response.confidence),
    )


def request_context(golden: GoldenQuery) -> dict[str, str]:
    """The query's tenant, page, tab, focus and date, those that are set (as strings)."""
    values = ((name, getattr(golden.request, name)) for name in CONTEXT_FIELDS)
    return {name: str(value) for name, value in values if value is not None}


def _stage_ms(stages: Mapping[str, Any]) -> dict[str, float]:
    """Time of every stage that ran (skipped stages record 0 ms and a reason)."""
    out = {}
    for name, details in stages.items():
        ms = details.get("ms") if isinstance(details, Mapping) else None
        if isinstance(ms, int | float) and "skipped" not in details:
            out[name] = float(ms)
    return out


def ranked_keys(golden: GoldenQuery, response: QueryResponse) -> list[str]:
    """Each result under the expected id it matches (else its section id), first match kept."""
    expected = set(golden.expected)
    keys: list[str] = []
    for result in response.results:
        if golden.expected_version is not None and result.version != golden.expected_version:
            key = f"{result.section_id}@v{result.version}"
        elif result.section_id in expected:
            key = result.section_id
        elif result.doc_id in expected:
            key = result.doc_id
        else:
            key = result.section_id
        if key not in keys:
            keys.append(key)
    return keys


def _leaks(golden: GoldenQuery, response: QueryResponse) -> int:
    forbidden = set(golden.forbidden)
    return sum(1 for r in response.results if r.doc_id in forbidden or r.section_id in forbidden)


def failure_row(outcome: QueryOutcome) -> dict[str, Any]:
    return {
        "id": outcome.id,
        "category": outcome.category,
        "query": outcome.query,
        "expected": list(outcome.expected),
        "rank": outcome.rank,
        "got": list(outcome.top),
        "abstained": outcome.abstained,
        "should_abstain": outcome.should_abstain,
        "intent_ok": outcome.intent_ok,
        "leaks": outcome.leaks,
        "path": outcome.path,
        "context": dict(outcome.context),
    }
