"""Gate comparison: per-metric tolerances, and what got worse between two runs of one set.

Why per-query diffs beside the metrics: a blocked candidate must say *which* queries got worse
and how (rank before → after, an abstention lost, a forbidden result shown), so the author can
fix the knowledge or the configuration instead of guessing from an aggregate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from kr.evaluation import EvalReport
from kr.outcomes import QueryOutcome
from router.errors import ConfigError

__all__ = [
    "DEFAULT_TOLERANCES",
    "MetricCheck",
    "QueryChange",
    "SetComparison",
    "Tolerance",
    "compare_reports",
    "parse_tolerances",
]

_EPSILON = 1e-9  # float noise: a drop of exactly the tolerance passes
QUERY_SHOWN_CHARS = 70  # a listed query is cut to this many characters
EXPECTED_SHOWN = 3  # expected ids listed per query that got worse
# How bad a change is (orders the listing): losing an abstention, a top hit, or showing a
# forbidden result is a safety or headline loss; a top-3 hit or the intent next; other ranks last.
SEVERITY_MAJOR = 10.0
SEVERITY_TOP3 = 5.0
SEVERITY_MINOR = 1.0
RANK_DROP_CAP = 100  # ranks lost beyond this add nothing to the severity


@dataclass(frozen=True)
class Tolerance:
    """How much a metric may get worse: ``max_drop`` for higher-is-better metrics, the largest
    allowed rise for ``lower_is_better`` ones (counts such as forbidden leaks)."""

    max_drop: float
    lower_is_better: bool = False

    def allows(self, before: float, after: float) -> bool:
        worse_by = after - before if self.lower_is_better else before - after
        return worse_by <= self.max_drop + _EPSILON


DEFAULT_TOLERANCES: Mapping[str, Tolerance] = MappingProxyType(
    {
        # one golden query of ~100 ranked is 0.01: a net loss of one top hit blocks
        "hit@1": Tolerance(0.01),
        "hit@3": Tolerance(0.01),
        "mrr": Tolerance(0.01),
        "ndcg@10": Tolerance(0.01),
        "recall@10": Tolerance(0.02),
        "recall@100": Tolerance(0.01),
        # declining out-of-scope questions is the safety property (seed 003): no loss at all
        "abstention_recall": Tolerance(0.0),
        "abstention_precision": Tolerance(0.05),
        "intent_acc": Tolerance(0.0),
        "forbidden_leaks": Tolerance(0.0, lower_is_better=True),
        # a fact question's answer stating its value: a direct answer's correctness
        "fact_value_acc": Tolerance(0.0),
    }
)
"""Per-metric tolerances; a metric a set does not compute (e.g. recall@100 on the golden set,
abstention recall on BEIR) is not checked there."""


def parse_tolerances(
    items: Sequence[str], base: Mapping[str, Tolerance] | None = None
) -> dict[str, Tolerance]:
    """``metric=max_drop`` overrides (``--tolerance hit@1=0.02``) on top of the defaults."""
    tolerances = dict(base or DEFAULT_TOLERANCES)
    for item in items:
        name, sep, value = item.partition("=")
        try:
            drop = float(value)
        except ValueError:
            drop = math.nan
        if not sep or not name or math.isnan(drop) or drop < 0:
            raise ConfigError(f"tolerance {item!r}: expected METRIC=MAX_DROP, e.g. hit@1=0.01")
        if name not in tolerances:
            known = ", ".join(tolerances)
            raise ConfigError(f"tolerance for unknown metric {name!r}; gated metrics: {known}")
        tolerances[name] = Tolerance(drop, tolerances[name].lower_is_better)
    return tolerances


@dataclass(frozen=True)
class MetricCheck:
    metric: str
    before: float
    after: float
    tolerance: Tolerance

    @property
    def passed(self) -> bool:
        return self.tolerance.allows(self.before, self.after)


@dataclass(frozen=True)
class QueryChange:
    """One query that got worse, in words: ``what`` says how (rank before → after, ...)."""

    query_id: str
    query: str
    category: str
    expected: tuple[str, ...]
    what: str
    severity: float  # larger is worse; orders the listing

    def line(self, set_name: str) -> str:
        expected = ", ".join(self.expected[:EXPECTED_SHOWN]) or "(should abstain)"
        query = self.query
        if len(query) > QUERY_SHOWN_CHARS:
            query = query[: QUERY_SHOWN_CHARS - 1] + "…"
        head = f"  {set_name} {self.query_id} [{self.category}] {query!r}"
        return f"{head}\n      expected {expected}: {self.what}"


@dataclass
class SetComparison:
    """One evaluation set, before (active) and after (candidate)."""

    name: str
    checks: list[MetricCheck]
    worse: list[QueryChange]
    better: int
    queries: int
    note: str | None = None

    @property
    def passed(self) -> bool:
        return all(check.passed for check in self.checks)


def compare_reports(
    name: str, before: EvalReport, after: EvalReport, tolerances: Mapping[str, Tolerance]
) -> SetComparison:
    """Metric checks plus the per-query diff of two runs of the same set."""
    checks = []
    for metric, tolerance in tolerances.items():
        old, new = before.overall.get(metric), after.overall.get(metric)
        if old is not None and new is not None:
            checks.append(MetricCheck(metric, float(old), float(new), tolerance))
    previous = {o.id: o for o in before.outcomes}
    worse: list[QueryChange] = []
    better = 0
    for outcome in after.outcomes:
        old_outcome = previous.get(outcome.id)
        if old_outcome is None:
            continue
        change = _worse(old_outcome, outcome)
        if change is not None:
            worse.append(change)
        elif _better(old_outcome, outcome):
            better += 1
    return SetComparison(name, checks, worse, better, len(after.outcomes))


def _rank_text(outcome: QueryOutcome) -> str:
    if outcome.abstained and not outcome.should_abstain:
        return "abstained"
    return "not found" if outcome.rank is None else f"rank {outcome.rank}"


def _rank_value(outcome: QueryOutcome) -> float:
    if outcome.abstained or outcome.rank is None:
        return math.inf
    return float(outcome.rank)


def _rank_severity(old: float, new: float) -> float:
    """How bad a fall from rank ``old`` to ``new`` is: by the place lost, then by the distance."""
    place = SEVERITY_MAJOR if old == 1 else SEVERITY_TOP3 if old <= 3 else SEVERITY_MINOR
    return place + min(new - old, RANK_DROP_CAP) / RANK_DROP_CAP


def _worse(before: QueryOutcome, after: QueryOutcome) -> QueryChange | None:
    """How ``after`` is worse than ``before``, if it is."""
    reasons: list[str] = []
    severity = 0.0
    if before.should_abstain:
        if before.abstained and not after.abstained:
            top = after.top[0] if after.top else "nothing"
            reasons.append(f"abstained → answered (top: {top})")
            severity += SEVERITY_MAJOR
    elif before.judged:
        old, new = _rank_value(before), _rank_value(after)
        if new > old:
            reasons.append(f"{_rank_text(before)} → {_rank_text(after)}")
            severity += _rank_severity(old, new)
    if after.leaks > before.leaks:
        reasons.append(f"forbidden results {before.leaks} → {after.leaks}")
        severity += SEVERITY_MAJOR
    if before.intent_ok and after.intent_ok is False:
        reasons.append("intent now wrong")
        severity += SEVERITY_TOP3
    if before.fact_ok and after.fact_ok is False:
        reasons.append("answer no longer states the fact's value")
        severity += SEVERITY_MAJOR
    if not reasons:
        return None
    return QueryChange(
        after.id, after.query, after.category, after.expected, "; ".join(reasons), severity
    )


def _better(before: QueryOutcome, after: QueryOutcome) -> bool:
    if before.should_abstain:
        return after.abstained and not before.abstained
    return before.judged and _rank_value(after) < _rank_value(before)
