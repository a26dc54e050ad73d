"""BM25 top-k by exact dynamic pruning within a postings budget (the served path; ADR 0011).

How ``weighted_top_k`` (the served path) finds the top k without scoring every section — exact
dynamic pruning, MaxScore (Turtle & Flood 1995) in term-at-a-time form:

1. the posting lists (one per query term and weighted block) are read in decreasing order of their
   upper bound (largest impact × weight, memoised); after each, if the bounds of the lists left sum
   to less than the k-th best partial score θ, no section absent from the lists read can reach the
   top k, so reading stops;
2. the sections whose partial score already reaches θ are completed first (their impacts in the
   lists left, found by binary search on the ascending section ids), which lifts θ to nearly its
   final value; every other section whose partial score plus the bounds left reaches θ is checked
   against a tighter bound (a byte per section holding the impact quantised upwards, memoised for
   long lists) and completed only if it still can reach θ;
3. the k best complete scores are returned, ties in today's order (the query list that first
   matched, then the section id), so the result equals ``top_k(weighted_scores(...))``.

One search is ``ranking.maxscore``, its bounds ``ranking.score_bounds``; a long query runs one
per window of section numbers (``ranking.windows``).

A query whose lists are all long (common words at a million sections) never lets MaxScore stop:
it is answered first by the threshold algorithm over the long lists' impact-ordered heads
(``router.ranking.threshold``), and comes here only when the heads run out.

A section's score is its impacts summed in the order of step 1 (decreasing list bound), not in
query order as ``weighted_scores`` does. With the default BM25F block (float32 impacts × integer
counts) and dyadic field weights the sums are exact in float64, so the two are bit-identical (all
of SciFact and the golden set); with other weights they may differ in the last bits (tests allow
1e-9, same ids in the same order). Reading on instead of completing is chosen by cost
(``LOOKUP_COST``), and queries of at most ``SMALL_QUERY_POSTINGS`` postings are scored
exhaustively; neither changes the result. A postings budget (``DEFAULT_MAX_POSTINGS``) bounds one
query's work; when it cuts the scoring short the ranking says so (``Ranking.truncated``). The
request's latency deadline (``deadline``) is asked between the windows of a long query and the
steps of a long single list, never before the first: a query the clock allows is scored exactly
as without it; one it stops returns the complete scores of the windows done (``timed_out``).

Measured (bench/bm25_throughput.py, SciFact's 300 test queries, ~4,460 postings a query; table in
bench/README.md): accumulating costs ~50 ns a posting in CPython 3.11 with the plain loop below;
the builtin-only forms (``dict.update(zip(sec, map(add, map(acc.get, ...))))``, ``deque(map(
setitem, ...))``) measured 20–30 % slower, so the loop stays. Pruning reads ~1,000 postings a
query and checks ~600 candidate sections: 1.8–2.1× the exhaustive scorer at k=10, 1.1–1.3× at
k=50, ~0.16× bm25s (numpy) at k=10. The per-section bytes are what make it pay: with a binary
search per candidate and list (~240 ns) instead, k=50 was slower than plain accumulation, as an
earlier MaxScore attempt with binary-search refinement found. Even an oracle knowing the final
k-th score must accumulate ~810 postings (k=10), ~40 µs — about what bm25s takes for the whole
query — so 0.5× bm25s is out of reach of an exact pure-Python scorer on these queries.
"""

from __future__ import annotations

import heapq
from collections.abc import Collection, Iterable, Sequence
from itertools import chain
from operator import neg

from router.config import DEFAULT_MAX_POSTINGS
from router.ranking.bm25 import (
    ACCUMULATE_STEP,
    QueryList,
    accumulate,
    top_k,
    weighted_scores,
)
from router.ranking.maxscore import MaxScoreSearch, PrunedList
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.ranking.threshold import threshold_top_k
from router.ranking.windows import windowed_top_k
from router.trace import NO_DEADLINE, Deadline

__all__ = [
    "SMALL_QUERY_POSTINGS",
    "WINDOW_POSTINGS",
    "weighted_top_k",
]


SMALL_QUERY_POSTINGS = 1024
"""Up to this many postings a query is scored exhaustively: pruning's fixed costs (sorting the
lists, θ, the candidate passes) exceed what it saves (measured on the sample knowledge's golden
queries: 16 µs exhaustive vs 26 µs pruned a query at k=10)."""

WINDOW_POSTINGS = 32_768
"""A query of more postings is scored window by window over its section numbers
(``ranking.windows``), about this many postings a window: the partial scores of one window at
a time, not one per section its lists hold (26 MB for three common words at 1M sections), and
the k-th best score of the windows done prunes the next ones from their start."""


def weighted_top_k(
    query: Sequence[QueryList],
    k: int,
    allowed: Collection[int] | None = None,
    *,
    bounds: ScoreBounds | None = None,
    max_postings: int | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """The k best sections by ``weighted_scores(query)`` among the allowed ones, without scoring
    them all (module docstring); ``bounds`` is the package's memo (a throwaway one without it),
    ``max_postings`` the query's budget (``DEFAULT_MAX_POSTINGS`` when None), ``deadline`` the
    request's (asked between windows and steps of long lists)."""
    if k <= 0 or not query:
        return Ranking([])
    if any(weight < 0 for _, _, weight in query):  # bounds assume impacts only add up
        return Ranking(top_k(weighted_scores(query), k, allowed))
    if bounds is None:
        bounds = ScoreBounds(max_bytes=0)
    lists: list[PrunedList] = []
    for postings, term, w in query:
        start, end = postings.indptr[term], postings.indptr[term + 1]
        if start != end:
            ub = bounds.maximum(postings, term) * w
            lists.append((ub, len(lists), postings, term, start, end, w))
    if not lists:
        return Ranking([])
    budget = DEFAULT_MAX_POSTINGS if max_postings is None else max_postings
    total = sum(entry[5] - entry[4] for entry in lists)
    if total <= min(SMALL_QUERY_POSTINGS, budget):  # pruning would cost more than it saves
        acc: dict[int, float] = {}
        for _, _, postings, _, start, end, weight in lists:
            accumulate(postings, start, end, weight, acc)
        return Ranking(top_k(acc, k, allowed), False, total)
    headed = threshold_top_k(query, k, allowed, budget)  # None: no long list, or heads too short
    if headed is not None:
        return Ranking(headed.ranked, headed.truncated, headed.postings)
    if len(lists) == 1:
        return _one_list_top_k(lists[0], k, allowed, budget, deadline)
    if total > WINDOW_POSTINGS:
        return windowed_top_k(lists, k, allowed, budget, bounds, WINDOW_POSTINGS, deadline)
    return MaxScoreSearch(lists, k, allowed, budget).run(bounds)


def _one_list_top_k(
    entry: PrunedList,
    k: int,
    allowed: Collection[int] | None,
    budget: int,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """A query of one list: its k largest impacts (equal ones by section id), read in steps
    and kept in a heap of k — a long list (a common word asked alone) costs O(k) memory, not
    a score per section it holds (≈ 11 MiB for one word at 100k sections before). Past the
    ``deadline`` (asked after each step) the rest of the list is not read."""
    _, _, postings, _, start, end, weight = entry
    stop = min(end, start + max(0, budget))
    best: list[tuple[float, int]] = []  # (impact, −section): the heap's order is the ranking's
    timed_out = False
    for low in range(start, stop, ACCUMULATE_STEP):
        if low > start and deadline():
            stop, timed_out = low, True
            break
        high = min(stop, low + ACCUMULATE_STEP)
        sections = postings.section_ids[low:high].tolist()  # type: ignore[attr-defined]
        impacts = postings.scores[low:high].tolist()  # type: ignore[attr-defined]
        pairs: Iterable[tuple[float, int]] = zip(impacts, map(neg, sections), strict=True)
        if allowed is not None:
            pairs = ((q, -s) for q, s in zip(impacts, sections, strict=True) if s in allowed)
        best = heapq.nlargest(k, chain(best, pairs))
    ranked = [(-section, impact * weight if weight != 1 else impact) for impact, section in best]
    return Ranking(ranked, stop < end, stop - start, timed_out)
