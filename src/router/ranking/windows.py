"""A long query scored window by window over its section numbers, within its postings budget.

Why apart from the search (``ranking.maxscore``): a window is one search over the parts of the
lists in a range of section numbers; what is its own is the loop around them — each window's
share of the budget, the k-th best score carried from one window to the next, the deadline asked
between windows — so that memory stays one window's partial scores, not one per section.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Collection

from router.ranking.maxscore import (
    MaxScoreSearch,
    PrunedList,
    PrunedTail,
    completion_reserve,
    select_top_k,
)
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.trace import NO_DEADLINE, Deadline

__all__ = ["windowed_top_k"]


def windowed_top_k(
    lists: list[PrunedList],
    k: int,
    allowed: Collection[int] | None,
    budget: int,
    bounds: ScoreBounds,
    window_postings: int,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """MaxScore over consecutive ranges of section numbers, each with ~``window_postings``
    postings (``ranking.pruning.WINDOW_POSTINGS``, passed in: the entry point decides when a
    query is windowed): a window's search starts from the k-th best complete score found so far
    (a lower bound of the final one), and only the complete scores that still reach it are kept.
    Every section's score is the same sum in the same order as in one search over all the lists,
    so the ranking is too; the per-section bounds of long lists are built once for all windows.

    A query the budget cannot read whole gives each window the budget's share of its postings
    (what a window leaves unused passes on): every window is cut alike, so no range of section
    numbers is favoured. A query that fits reads all it needs: its windows' completions may
    spend up to the budget once more (a query costs at most twice its budget). Past the
    ``deadline`` (asked after each window) the windows left are not read: the ranking is the
    best of the windows done, ``timed_out``."""
    space = max(entry[2].num_sections for entry in lists)
    total = sum(entry[5] - entry[4] for entry in lists)
    width = -(-space // -(-total // window_postings))
    reserve = completion_reserve(budget, k, len(lists))
    fits = total <= budget - reserve
    whole = {entry[1]: entry for entry in lists}
    prepared: dict[int, PrunedTail] = {}
    best: list[float] = []  # the k best complete scores so far, a heap
    kept: dict[int, float] = {}
    read, passed, truncated, timed_out = 0, 0, False, False
    for low in range(0, space, width):
        if passed and deadline():
            truncated = timed_out = True
            break
        window = _window(lists, low, low + width)
        if not window:
            continue
        left = total - passed  # postings of this window and the ones after it
        passed += sum(entry[5] - entry[4] for entry in window)
        if fits:  # what is left fits; completing across windows may cost up to the budget
            # once more, so a query that fits is never cut by its lookups
            allowance = min(max(budget - read, left + reserve), 2 * budget - read)
        else:
            allowance = budget * passed // total - read
        floor = best[0] if len(best) == k else 0.0
        search = MaxScoreSearch(window, k, allowed, allowance, floor, whole, prepared)
        scores = search.scores(bounds)
        read += search.read
        truncated = truncated or search.truncated
        for section, score in scores.items():
            if len(best) < k:
                heapq.heappush(best, score)
            elif score >= best[0]:
                heapq.heappushpop(best, score)
            else:
                continue
            kept[section] = score
        if len(best) == k and len(kept) > 4 * k:
            kept = {s: v for s, v in kept.items() if v >= best[0]}
    return Ranking(select_top_k(kept, k, lists), truncated, read, timed_out)


def _window(lists: list[PrunedList], low: int, high: int) -> list[PrunedList]:
    """The parts of the lists whose section numbers are in [low, high), empty ones left out."""
    window: list[PrunedList] = []
    for ub, rank, postings, term, start, end, weight in lists:
        ids = postings.section_ids
        first = bisect_left(ids, low, start, end)
        last = bisect_left(ids, high, first, end)
        if first < last:
            window.append((ub, rank, postings, term, first, last, weight))
    return window
