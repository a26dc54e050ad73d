"""Evaluation of a query set: ranking metrics, abstention, serving paths and stage latency.

The metrics are computed overall, per category and per serving path; the operational figures of
the cascade are its stage latency (from the trace) and its cache / exact / vector rates. Beside
them, what an asker risks: the false answers (answered, and wrongly), the false abstentions
(answerable, declined) and the expected calibration error of the confidence the router reports.

Why one evaluator for the golden set and BEIR collections: both are queries with expected ids;
a golden query may also expect an abstention, an intent, or forbid some documents. The ranking
metrics are ranx's (``hit_rate@k``, ``mrr``, ``ndcg@k``, ``recall@k``), never hand-written.

The golden set is read in ``kr.golden``, and each query's outcome is built in ``kr.outcomes``.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kr.fact_values import FactValues, states_one_of
from kr.golden import GOLDEN_NAME, GoldenQuery
from kr.outcomes import PATHS, QueryOutcome, failure_row, query_outcome, ranked_keys
from router.config import DEFAULT_MAX_LATENCY_MS
from router.contract import QueryRequest, QueryResponse

__all__ = [
    "CALIBRATION_BINS",
    "DEFAULT_RECALL_AT",
    "RANKING_METRICS",
    "SIDE_BY_SIDE",
    "Answerer",
    "EvalReport",
    "EvalSettings",
    "calibration_error",
    "evaluate",
    "percentiles",
    "side_by_side",
]

Answerer = Callable[[QueryRequest], Awaitable[QueryResponse]]
Progress = Callable[[int], None]

RANKING_METRICS: Mapping[str, str] = {
    "hit@1": "hit_rate@1",
    "hit@3": "hit_rate@3",
    "mrr": "mrr",
    "ndcg@10": "ndcg@10",
}
"""Our metric name → ranx's; ``recall@k`` is added for each k of ``EvalSettings.recall_at``."""

DEFAULT_RECALL_AT: tuple[int, ...] = (10,)
DEFAULT_FAILURES_LISTED = 20
REPORTED_LATENCY_BUDGET_MS = DEFAULT_MAX_LATENCY_MS
"""Only reported: the share of queries slower than this (the router's default budget)."""
CALIBRATION_BINS = 10
"""Equal-width confidence bins of the expected calibration error (as bench/calibrate.py)."""
PARAPHRASE_CATEGORY = "paraphrase"

SIDE_BY_SIDE: tuple[tuple[str, str | None, str], ...] = (
    ("queries", None, "n"),
    ("hit@1", None, "hit@1"),
    ("hit@3", None, "hit@3"),
    ("MRR", None, "mrr"),
    ("paraphrase hit@3", PARAPHRASE_CATEGORY, "hit@3"),
    ("out-of-scope declined", None, "abstention_recall"),
    ("false abstention", None, "false_abstention"),
    ("false answers", None, "false_answer_rate"),
    ("fact_value_acc", None, "fact_value_acc"),
    ("ECE (confidence)", None, "ece"),
)
"""The rows of ``kr eval``'s table of several sets: (label, category or None: all, metric)."""


@dataclass(frozen=True)
class EvalSettings:
    """What the evaluator computes, with named defaults."""

    recall_at: tuple[int, ...] = DEFAULT_RECALL_AT
    failures_listed: int = DEFAULT_FAILURES_LISTED
    latency_budget_ms: float = REPORTED_LATENCY_BUDGET_MS

    def ranx_metrics(self) -> dict[str, str]:
        recall = {f"recall@{k}": f"recall@{k}" for k in self.recall_at}
        return {**RANKING_METRICS, **recall}


@dataclass
class EvalReport:
    """Metrics of one evaluation run, overall, per category and per path, plus the outcomes."""

    name: str
    overall: dict[str, Any]
    per_category: dict[str, dict[str, Any]]
    by_path: dict[str, dict[str, Any]]
    operations: dict[str, Any]
    outcomes: list[QueryOutcome]
    info: dict[str, Any] = field(default_factory=dict)
    failures_listed: int = DEFAULT_FAILURES_LISTED

    @property
    def failures(self) -> list[dict[str, Any]]:
        """Queries that missed: wrong abstention, a forbidden document, the wrong intent, or
        an expected id not first."""
        return [failure_row(o) for o in self.outcomes if not o.passed]

    def table(self) -> str:
        keys = ["n", "hit@1", "hit@3", "mrr", "ndcg@10"]
        keys += [k for k in self.overall if k.startswith("recall@")]
        keys += ["abstention_acc", "intent_acc", "forbidden_leaks"]
        if self.overall.get("fact_value_acc") is not None:
            keys.append("fact_value_acc")
        keys += ["false_answer_rate", "ece"]
        columns = [(k, max(len(k), 5) + 2) for k in keys]
        rows = [f"{'category':<14}" + "".join(f"{k:>{w}}" for k, w in columns)]
        for name, metrics in [*sorted(self.per_category.items()), ("ALL", self.overall)]:
            cells = "".join(f"{_fmt(metrics.get(k)):>{w}}" for k, w in columns)
            rows.append(f"{name:<14}{cells}")
        return "\n".join(rows)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "info": self.info,
            "overall": self.overall,
            "per_category": self.per_category,
            "by_path": self.by_path,
            "operations": self.operations,
            "failures": self.failures[: self.failures_listed],
            "queries": [o.to_dict() for o in self.outcomes],
        }


def side_by_side(reports: Sequence[EvalReport]) -> str:
    """Several sets' headline metrics, one column per set (``SIDE_BY_SIDE``'s rows)."""
    label_width = max(len(label) for label, _, _ in SIDE_BY_SIDE) + 2
    columns = [(report, max(len(report.name), 7) + 2) for report in reports]
    rows = [f"{'':<{label_width}}" + "".join(f"{r.name:>{w}}" for r, w in columns)]
    for label, category, metric in SIDE_BY_SIDE:
        cells = []
        for report, width in columns:
            metrics = report.overall if category is None else report.per_category.get(category)
            cells.append(f"{_fmt((metrics or {}).get(metric)):>{width}}")
        rows.append(f"{label:<{label_width}}" + "".join(cells))
    return "\n".join(rows)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() and value > 1 else f"{value:.3f}"


async def evaluate(
    queries: Sequence[GoldenQuery] | Iterable[GoldenQuery],
    answer: Answerer,
    *,
    name: str = GOLDEN_NAME,
    settings: EvalSettings | None = None,
    rank_answer: Answerer | None = None,
    progress: Progress | None = None,
    info: Mapping[str, Any] | None = None,
    fact_values: FactValues | None = None,
    today: str = "",
) -> EvalReport:
    """Ask every query, then compute the metrics.

    ``rank_answer`` (BEIR collections): when ``answer`` abstains on a query that expects ids,
    its ranking is taken from ``rank_answer`` (the same cascade with abstention off), so the
    ranking metrics measure ranking, comparable with published figures, while the abstention
    figures still describe what ``answer`` served. ``fact_values`` (golden sets) gives what a
    fact question's answer must state (``kr.fact_values``; ``today``: the day of the questions
    without a date): its share is ``fact_value_acc``.
    """
    settings = settings or EvalSettings()
    drafts: list[tuple[GoldenQuery, QueryResponse, list[str]]] = []
    for golden in queries:
        response = await answer(golden.request)
        ranking_source = response
        if response.abstained and rank_answer is not None and golden.expected:
            ranking_source = await rank_answer(golden.request)
        drafts.append((golden, response, ranked_keys(golden, ranking_source)))
        if progress is not None:
            progress(1)
    scores = _ranx_scores(drafts, settings)
    outcomes = [
        query_outcome(
            golden,
            response,
            ranked,
            scores.get(golden.id, {}),
            fact_ok=_fact_ok(golden, response, fact_values, today),
        )
        for golden, response, ranked in drafts
    ]
    categories: dict[str, list[QueryOutcome]] = defaultdict(list)
    paths: dict[str, list[QueryOutcome]] = defaultdict(list)
    for outcome in outcomes:
        categories[outcome.category].append(outcome)
        paths[outcome.path].append(outcome)
    metric_names = list(settings.ranx_metrics())
    overall = _summarize(outcomes, metric_names)
    overall["reliability"] = calibration_error(_calibration_pairs(outcomes))[1]
    return EvalReport(
        name=name,
        overall=overall,
        per_category={k: _summarize(v, metric_names) for k, v in sorted(categories.items())},
        by_path={p: _summarize(paths[p], metric_names) for p in PATHS if p in paths},
        operations=_operations(outcomes, settings),
        outcomes=outcomes,
        info=dict(info or {}),
        failures_listed=settings.failures_listed,
    )


def _fact_ok(
    golden: GoldenQuery, response: QueryResponse, values: FactValues | None, today: str
) -> bool | None:
    """Whether a fact question's answer states its fact's value (None: not a fact question)."""
    wanted = None if values is None else values(golden, today)
    if wanted is None:
        return None
    return not response.abstained and states_one_of(response.answer or "", wanted)


def _ranx_scores(
    drafts: list[tuple[GoldenQuery, QueryResponse, list[str]]], settings: EvalSettings
) -> dict[str, dict[str, float]]:
    """Per-query ranx values of every ranking metric, for the judged queries."""
    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    for golden, _, ranked in drafts:
        if not golden.expected or golden.abstain:
            continue
        grades = golden.grades or {key: 1 for key in golden.expected}
        relevant = {key: int(grade) for key, grade in grades.items() if grade > 0}
        if not relevant:
            continue
        qrels[golden.id] = relevant
        # ranx ranks by score: 1/rank keeps the cascade's order exactly
        run[golden.id] = {key: 1.0 / rank for rank, key in enumerate(ranked, start=1)} or {
            "__none__": 0.0
        }
    if not qrels:
        return {}
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    metrics = settings.ranx_metrics()
    ranx_run = Run(run)
    ranx_evaluate(Qrels(qrels), ranx_run, list(metrics.values()), return_mean=False)
    # ranx keeps per-query values by query id (its arrays are in sorted-id order, not ours)
    per_query: dict[str, dict[str, float]] = defaultdict(dict)
    for ours, theirs in metrics.items():
        for query_id, value in ranx_run.scores[theirs].items():
            per_query[query_id][ours] = float(value)
    return per_query


def calibration_error(
    pairs: Sequence[tuple[float, bool]], bins: int = CALIBRATION_BINS
) -> tuple[float | None, list[dict[str, float]]]:
    """Expected calibration error of (confidence, was it right) pairs over ``bins`` equal-width
    bins (a confidence of 1.0 falls in the last), and the non-empty bins: their bounds, mean
    confidence, observed share right, and count. None for no pairs."""
    if not pairs:
        return None, []
    grouped: dict[int, list[tuple[float, bool]]] = defaultdict(list)
    for confidence, right in pairs:
        grouped[min(int(confidence * bins), bins - 1)].append((confidence, right))
    ece = 0.0
    table = []
    for index in sorted(grouped):
        inside = grouped[index]
        predicted = sum(c for c, _ in inside) / len(inside)
        observed = sum(r for _, r in inside) / len(inside)
        ece += len(inside) / len(pairs) * abs(predicted - observed)
        low = index / bins
        table.append(
            {
                "low": low,
                "high": low + 1 / bins,
                "confidence": predicted,
                "observed": observed,
                "count": len(inside),
            }
        )
    return ece, table


def _calibration_pairs(outcomes: Sequence[QueryOutcome]) -> list[tuple[float, bool]]:
    """(reported confidence, served first result relevant) of every query that can be judged."""
    pairs = []
    for outcome in outcomes:
        right = outcome.top_relevant
        if right is not None:
            pairs.append((outcome.confidence, right))
    return pairs


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _ratio(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _summarize(outcomes: Sequence[QueryOutcome], metric_names: Sequence[str]) -> dict[str, Any]:
    judged = [o for o in outcomes if o.judged]
    out: dict[str, Any] = {"n": len(outcomes), "judged": len(judged)}
    for metric in metric_names:
        out[metric] = _mean([o.scores[metric] for o in judged if metric in o.scores])
    should = sum(o.should_abstain for o in outcomes)
    did = sum(o.abstained for o in outcomes)
    both = sum(o.should_abstain and o.abstained for o in outcomes)
    out["abstention_acc"] = _mean([float(o.abstained == o.should_abstain) for o in outcomes])
    # a set with nothing to decline (BEIR) has no abstention precision: its rate is all false
    out["abstention_precision"] = _ratio(both, did) if should else None
    out["abstention_recall"] = _ratio(both, should)
    out["abstention_rate"] = _ratio(did, len(outcomes))
    out["intent_acc"] = _mean([float(o.intent_ok) for o in outcomes if o.intent_ok is not None])
    out["forbidden_leaks"] = sum(o.leaks for o in outcomes)
    out["fact_value_acc"] = _mean([float(o.fact_ok) for o in outcomes if o.fact_ok is not None])
    answerable = [o for o in outcomes if not o.should_abstain]
    out["false_abstention"] = _mean([float(o.abstained) for o in answerable])
    out["false_answer_rate"] = _mean([float(o.false_answer) for o in outcomes])
    out["ece"] = calibration_error(_calibration_pairs(outcomes))[0]
    return out


def percentiles(values: Sequence[float]) -> dict[str, float | int | None]:
    """n, p50 and p95 (linear interpolation between closest ranks)."""
    if not values:
        return {"n": 0, "p50": None, "p95": None}
    ordered = sorted(values)

    def at(q: float) -> float:
        position = q * (len(ordered) - 1)
        low, high = math.floor(position), math.ceil(position)
        share = position - low
        return round(ordered[low] * (1 - share) + ordered[high] * share, 3)

    return {"n": len(ordered), "p50": at(0.5), "p95": at(0.95)}


def _operations(outcomes: Sequence[QueryOutcome], settings: EvalSettings) -> dict[str, Any]:
    """Rates of the serving paths and latency p50/p95: total, per path, per stage."""
    total = len(outcomes)
    count = defaultdict(int, {path: 0 for path in PATHS})
    for outcome in outcomes:
        count[outcome.path] += 1
    computed = [o for o in outcomes if o.path != "cache"]
    stage_values: dict[str, list[float]] = defaultdict(list)
    for outcome in computed:
        for stage, ms in outcome.stage_ms.items():
            stage_values[stage].append(ms)
    over = sum(o.latency_ms > settings.latency_budget_ms for o in outcomes)
    return {
        "queries": total,
        "cache_hit_rate": _ratio(count["cache"], total),
        "exact_match_rate": _ratio(count["exact"], total),
        # like router.metrics: every computed query whose vector stage ran, abstained or not
        "vector_fallback_rate": _ratio(sum(o.vector_ran for o in outcomes), total),
        "bm25_only_rate": _ratio(count["bm25"], total),
        "hybrid_rate": _ratio(count["hybrid"], total),
        "abstention_rate": _ratio(count["abstained"], total),
        "over_latency_budget_rate": _ratio(over, total),
        "latency_budget_ms": settings.latency_budget_ms,
        "latency_ms": {
            "total": percentiles([o.latency_ms for o in outcomes]),
            "paths": {
                path: percentiles([o.latency_ms for o in outcomes if o.path == path])
                for path in PATHS
                if count[path]
            },
            "stages": {stage: percentiles(v) for stage, v in stage_values.items()},
        },
    }
