"""Stage — BM25 over the compiled impacts, in pure Python (no numpy; runs in the Worker).

Why this shape: bm25s already computed each (term, section) impact at build time, so a query is
a sum of posting lists. Each query token counts once per occurrence, exactly like bm25s, so the
top-k ids and scores equal bm25s's (tests/test_bm25_equivalence.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Sequence

from router.package.postings import Postings

__all__ = ["bm25_scores", "term_ids", "top_k"]


def term_ids(terms: Sequence[str], vocabulary: dict[str, int]) -> list[int]:
    """Ids of the query terms known to the index, duplicates kept (bm25s semantics)."""
    return [vocabulary[t] for t in terms if t in vocabulary]


def bm25_scores(postings: Postings, ids: Sequence[int]) -> dict[int, float]:
    """Section → summed impact for every section containing at least one query term."""
    indptr, sections, impacts = postings.indptr, postings.section_ids, postings.scores
    if len(ids) == 1:
        start, end = indptr[ids[0]], indptr[ids[0] + 1]
        return dict(zip(sections[start:end].tolist(), impacts[start:end].tolist(), strict=True))  # type: ignore[attr-defined]
    acc: dict[int, float] = {}
    get = acc.get
    for term in ids:
        start, end = indptr[term], indptr[term + 1]
        for section, impact in zip(
            sections[start:end].tolist(),  # type: ignore[attr-defined]
            impacts[start:end].tolist(),  # type: ignore[attr-defined]
            strict=True,
        ):
            acc[section] = get(section, 0.0) + impact
    return acc


def top_k(
    scores: dict[int, float], k: int, allowed: Collection[int] | None = None
) -> list[tuple[int, float]]:
    """The k best (section, score) pairs, best first; ties keep the lower section number first."""
    items = (
        scores.items() if allowed is None else ((s, v) for s, v in scores.items() if s in allowed)
    )
    return heapq.nlargest(k, items, key=_score_then_lower_section)


def _score_then_lower_section(item: tuple[int, float]) -> tuple[float, int]:
    return item[1], -item[0]
