"""Golden-set evaluation: hit@1, hit@3, MRR (ranx) and abstention accuracy, per category.

Why map results to expected ids: a golden query lists document *or* section ids; a result counts
when either of its ids is expected, so each result is scored under the expected id it matches.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from router.contract import QueryRequest, QueryResponse

__all__ = ["EvalReport", "GoldenQuery", "evaluate", "load_golden"]

Answerer = Callable[[QueryRequest], Awaitable[QueryResponse]]


@dataclass(frozen=True)
class GoldenQuery:
    id: str
    query: str
    category: str
    expected: list[str]
    forbidden: list[str]
    abstain: bool
    intent: str
    request: QueryRequest
    expected_version: str | None = None
    fact: str | None = None


@dataclass
class EvalReport:
    overall: dict[str, float]
    per_category: dict[str, dict[str, float]]
    failures: list[dict[str, Any]] = field(default_factory=list)

    def table(self) -> str:
        keys = ["n", "hit@1", "hit@3", "mrr", "abstention_acc", "intent_acc", "forbidden_leaks"]
        rows = [f"{'category':<14}" + "".join(f"{k:>16}" for k in keys)]
        for name, metrics in [*sorted(self.per_category.items()), ("ALL", self.overall)]:
            cells = "".join(f"{_fmt(metrics.get(k)):>16}" for k in keys)
            rows.append(f"{name:<14}{cells}")
        return "\n".join(rows)


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return str(int(value)) if float(value).is_integer() and value > 1 else f"{value:.3f}"


def load_golden(path: str | Path) -> list[GoldenQuery]:
    queries = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number}: invalid JSON: {exc}") from exc
        request = QueryRequest(
            query=row["query"],
            tenant=row.get("tenant"),
            page=row.get("page"),
            tab=row.get("tab"),
            focus=row.get("focus"),
            date=row.get("date"),
            top_k=10,
        )
        version = row.get("expected_version")
        queries.append(
            GoldenQuery(
                id=row["id"],
                query=row["query"],
                category=row.get("category", "uncategorised"),
                expected=list(row.get("expected") or []),
                forbidden=list(row.get("forbidden") or []),
                abstain=bool(row.get("abstain")),
                intent=row.get("intent") or "knowledge",
                request=request,
                expected_version=None if version is None else str(version),
                fact=row.get("fact"),
            )
        )
    return queries


async def evaluate(queries: Iterable[GoldenQuery], answer: Answerer) -> EvalReport:
    from ranx import Qrels, Run
    from ranx import evaluate as ranx_evaluate

    qrels: dict[str, dict[str, int]] = {}
    run: dict[str, dict[str, float]] = {}
    per_query: dict[str, dict[str, float]] = {}
    categories: dict[str, list[str]] = defaultdict(list)
    failures = []
    for golden in queries:
        response = await answer(golden.request)
        categories[golden.category].append(golden.id)
        ranked = _ranked_keys(golden, response)
        stats = {
            "abstention_acc": float(response.abstained == golden.abstain),
            "intent_acc": float(response.analysis.intent == golden.intent),
            "forbidden_leaks": float(_leaks(golden, response)),
        }
        if golden.expected and not golden.abstain:
            qrels[golden.id] = {key: 1 for key in golden.expected}
            run[golden.id] = {key: 1.0 / rank for rank, key in enumerate(ranked, start=1)} or {
                "__none__": 0.0
            }
        per_query[golden.id] = stats
        if not _passed(golden, response, ranked):
            failures.append(_failure(golden, response))
    ranking = {}
    if qrels:
        ranking = ranx_evaluate(
            Qrels(qrels), Run(run), ["hit_rate@1", "hit_rate@3", "mrr"], return_mean=False
        )
    ranked_ids = list(qrels)
    index = {qid: i for i, qid in enumerate(ranked_ids)}

    def summarize(ids: list[str]) -> dict[str, float]:
        out: dict[str, float] = {"n": float(len(ids))}
        with_rank = [i for i in ids if i in index]
        for metric, name in (("hit_rate@1", "hit@1"), ("hit_rate@3", "hit@3"), ("mrr", "mrr")):
            if with_rank:
                values = [float(ranking[metric][index[i]]) for i in with_rank]
                out[name] = sum(values) / len(values)
        for name in ("abstention_acc", "intent_acc"):
            out[name] = sum(per_query[i][name] for i in ids) / len(ids)
        out["forbidden_leaks"] = sum(per_query[i]["forbidden_leaks"] for i in ids)
        return out

    all_ids = [i for group in categories.values() for i in group]
    return EvalReport(
        overall=summarize(all_ids),
        per_category={name: summarize(ids) for name, ids in categories.items()},
        failures=failures,
    )


def _ranked_keys(golden: GoldenQuery, response: QueryResponse) -> list[str]:
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


def _passed(golden: GoldenQuery, response: QueryResponse, ranked: list[str]) -> bool:
    if response.abstained != golden.abstain or _leaks(golden, response):
        return False
    if response.analysis.intent != golden.intent:
        return False
    return not golden.expected or bool(ranked and ranked[0] in set(golden.expected))


def _failure(golden: GoldenQuery, response: QueryResponse) -> dict[str, Any]:
    return {
        "id": golden.id,
        "category": golden.category,
        "query": golden.query,
        "expected": golden.expected,
        "got": [f"{r.section_id} (v{r.version})" for r in response.results[:3]],
        "abstained": response.abstained,
        "intent": response.analysis.intent,
        "confidence": response.confidence,
    }
