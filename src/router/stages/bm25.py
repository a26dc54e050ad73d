"""Stage — BM25 over the compiled impacts, in pure Python (no numpy; runs in the Worker).

Why this shape: bm25s already computed each (term, section) impact at build time, so a query is
a sum of posting lists. Each query token counts once per occurrence, exactly like bm25s, so the
top-k ids and scores equal bm25s's (tests/test_bm25_equivalence.py).

Why MaxScore: terms are accumulated from the most to the least valuable; once the k-th best score
exceeds what all remaining terms could still add, no unseen section can enter the top k, so the
remaining terms are only looked up (binary search) for the few sections that still can. The
result is exact, and the long posting lists of common words are mostly skipped.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Sequence
from operator import itemgetter

from router.package.postings import Postings

__all__ = ["bm25_scores", "bm25_top_k", "max_impact", "term_ids", "top_k"]

_SCORE = itemgetter(1)


def term_ids(terms: Sequence[str], vocabulary: dict[str, int]) -> list[int]:
    """Ids of the query terms known to the index, duplicates kept (bm25s semantics)."""
    return [vocabulary[t] for t in terms if t in vocabulary]


def max_impact(postings: Postings, term: int, cache: dict[int, float]) -> float:
    """Largest impact of a term in any section (its MaxScore upper bound), memoised."""
    found = cache.get(term)
    if found is None:
        start, end = postings.indptr[term], postings.indptr[term + 1]
        found = max(postings.scores[start:end], default=0.0)
        cache[term] = found
    return found


def bm25_scores(postings: Postings, ids: Sequence[int]) -> dict[int, float]:
    """Section → summed impact for every section containing at least one query term."""
    acc: dict[int, float] = {}
    for term, count in Counter(ids).items():
        _accumulate(postings, term, count, acc)
    return acc


def bm25_top_k(
    postings: Postings,
    ids: Sequence[int],
    k: int,
    allowed: Collection[int] | None = None,
    bounds: dict[int, float] | None = None,
) -> list[tuple[int, float]]:
    """Exact top-k (section, score) pairs, best first, with MaxScore pruning."""
    if not ids or k <= 0:
        return []
    bounds = {} if bounds is None else bounds
    weights = Counter(ids)
    order = sorted(weights, key=lambda t: -max_impact(postings, t, bounds) * weights[t])
    upper = [max_impact(postings, t, bounds) * weights[t] for t in order]
    remaining = sum(upper)
    acc: dict[int, float] = {}
    position = 0
    threshold = 0.0
    while position < len(order):
        term = order[position]
        _accumulate(postings, term, weights[term], acc)
        remaining -= upper[position]
        position += 1
        if position < len(order):
            threshold = _kth_best(acc, k, allowed)
            if threshold > remaining:
                break
    if position < len(order):
        acc = _refine(postings, acc, order[position:], weights, remaining, threshold, allowed)
    return top_k(acc, k, allowed)


def top_k(
    scores: dict[int, float], k: int, allowed: Collection[int] | None = None
) -> list[tuple[int, float]]:
    """The k best (section, score) pairs, best first."""
    items = (
        scores.items() if allowed is None else [(s, v) for s, v in scores.items() if s in allowed]
    )
    return heapq.nlargest(k, items, key=_SCORE)


def _accumulate(postings: Postings, term: int, weight: int, acc: dict[int, float]) -> None:
    start, end = postings.indptr[term], postings.indptr[term + 1]
    sections = postings.section_ids[start:end].tolist()  # type: ignore[attr-defined]
    impacts = postings.scores[start:end].tolist()  # type: ignore[attr-defined]
    if weight != 1:
        impacts = [impact * weight for impact in impacts]
    if not acc:
        acc.update(zip(sections, impacts, strict=True))
        return
    get = acc.get
    for section, impact in zip(sections, impacts, strict=True):
        acc[section] = get(section, 0.0) + impact


def _kth_best(acc: dict[int, float], k: int, allowed: Collection[int] | None) -> float:
    values = acc.values() if allowed is None else [v for s, v in acc.items() if s in allowed]
    if len(values) < k:
        return 0.0
    return heapq.nlargest(k, values)[-1]


def _refine(
    postings: Postings,
    acc: dict[int, float],
    terms: Sequence[int],
    weights: Counter[int],
    remaining: float,
    threshold: float,
    allowed: Collection[int] | None,
) -> dict[int, float]:
    """Finish the sections that can still reach the top k by binary search in each posting list."""
    alive = {
        s: v
        for s, v in acc.items()
        if v + remaining >= threshold and (allowed is None or s in allowed)
    }
    sections, impacts, indptr = postings.section_ids, postings.scores, postings.indptr
    for term in terms:
        start, end = indptr[term], indptr[term + 1]
        weight = weights[term]
        for section in alive:
            at = bisect_left(sections, section, start, end)
            if at < end and sections[at] == section:
                alive[section] += impacts[at] * weight
    return alive
