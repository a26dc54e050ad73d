"""Gate report: the verdict of every set, as a table for people and as JSON for tools.

Why list the queries that got worse under the table: the metric that blocks says *that* the
candidate is worse; the listed queries, worst first, say where to look.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kr.gate.compare import SetComparison

__all__ = ["DEFAULT_LISTED_QUERIES", "GateReport"]

DEFAULT_LISTED_QUERIES = 20
"""Queries that got worse listed per set, worst first (the JSON report has them all)."""


@dataclass
class GateReport:
    candidate: str
    active: str
    sets: list[SetComparison] = field(default_factory=list)
    listed: int = DEFAULT_LISTED_QUERIES

    @property
    def passed(self) -> bool:
        return all(s.passed for s in self.sets)

    def render(self) -> str:
        verdict = "PASSES" if self.passed else "BLOCKED"
        lines = [f"quality gate: candidate {self.candidate} vs active {self.active}: {verdict}"]
        header = f"  {'set':<12} {'metric':<21} {'active':>8} {'candidate':>10} {'delta':>8}"
        lines.append(header + f" {'allowed':>8}")
        for comparison in self.sets:
            lines += _check_rows(comparison)
        for comparison in self.sets:
            lines += self._worse_listing(comparison)
        return "\n".join(lines)

    def _worse_listing(self, comparison: SetComparison) -> list[str]:
        if not comparison.worse and not comparison.better:
            return []
        shown = sorted(comparison.worse, key=lambda c: -c.severity)[: self.listed]
        cut = f" (the {len(shown)} worst listed)" if len(shown) < len(comparison.worse) else ""
        head = (
            f"{comparison.name}: {len(comparison.worse)} of {comparison.queries} queries got "
            f"worse, {comparison.better} better{cut}"
        )
        return [head, *(change.line(comparison.name) for change in shown)]

    def to_json(self) -> dict[str, Any]:
        return {
            "candidate": self.candidate,
            "active": self.active,
            "passed": self.passed,
            "sets": [_set_json(s) for s in self.sets],
        }


def _check_rows(comparison: SetComparison) -> list[str]:
    rows = [f"  {comparison.name:<12} {comparison.note}"] if comparison.note else []
    for check in comparison.checks:
        delta = check.after - check.before
        sign = "+" if check.tolerance.lower_is_better else "-"
        allowed = f"{sign}{check.tolerance.max_drop:.3f}"
        mark = "" if check.passed else "  << BLOCKS"
        rows.append(
            f"  {comparison.name:<12} {check.metric:<21} {check.before:>8.3f} "
            f"{check.after:>10.3f} {delta:>+8.3f} {allowed:>8}"
            f"{mark}"
        )
    return rows


def _set_json(comparison: SetComparison) -> dict[str, Any]:
    return {
        "name": comparison.name,
        "passed": comparison.passed,
        "note": comparison.note,
        "queries": comparison.queries,
        "better": comparison.better,
        "checks": [
            {
                "metric": c.metric,
                "active": c.before,
                "candidate": c.after,
                "max_drop": c.tolerance.max_drop,
                "passed": c.passed,
            }
            for c in comparison.checks
        ],
        "worse": [
            {"id": w.query_id, "query": w.query, "expected": list(w.expected), "what": w.what}
            for w in comparison.worse
        ],
    }
