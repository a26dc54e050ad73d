"""Counters of the query path (PRD §40): cache hit rate, exact, BM25 success, vector fallback.

Why counters and not a metrics backend: the Worker has no agent to push to; the counts live in
the isolate, are exposed by ``/v1/metrics`` and ``kr eval``, and rates are derived on read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["Metrics"]


@dataclass
class Metrics:
    queries: int = 0
    cache_hits: int = 0
    exact_matches: int = 0
    bm25_successes: int = 0  # answered from the lexical stages alone (HIGH/MEDIUM, no vector)
    vector_fallbacks: int = 0
    abstentions: int = 0
    stage_ms: dict[str, float] = field(default_factory=dict)  # total time per stage

    def record_stages(self, stages: dict[str, dict[str, object]]) -> None:
        for name, details in stages.items():
            ms = details.get("ms")
            if isinstance(ms, int | float):
                self.stage_ms[name] = self.stage_ms.get(name, 0.0) + float(ms)

    def rates(self) -> dict[str, float]:
        total = max(1, self.queries)
        return {
            "cache_hit_rate": self.cache_hits / total,
            "exact_match_rate": self.exact_matches / total,
            "bm25_success_rate": self.bm25_successes / total,
            "vector_fallback_rate": self.vector_fallbacks / total,
            "abstention_rate": self.abstentions / total,
        }

    def snapshot(self) -> dict[str, object]:
        return {
            "queries": self.queries,
            "cache_hits": self.cache_hits,
            "exact_matches": self.exact_matches,
            "bm25_successes": self.bm25_successes,
            "vector_fallbacks": self.vector_fallbacks,
            "abstentions": self.abstentions,
            **{k: round(v, 4) for k, v in self.rates().items()},
            "stage_ms_total": {k: round(v, 3) for k, v in sorted(self.stage_ms.items())},
        }
