"""One MaxScore search: read lists by decreasing bound, complete the candidates that can win.

Why apart from the entry point (``ranking.pruning``, whose docstring explains the method and its
measurements): the entry point chooses how a query is scored (exhaustively, by the threshold
algorithm, one list, windows or one search), and this is the search it and each window
(``ranking.windows``) run; ties are broken here as ``weighted_scores`` would (``select_top_k``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Sequence
from itertools import compress, filterfalse, repeat
from operator import countOf, itemgetter, le

from router.package.format.postings import Postings
from router.ranking.bm25 import accumulate
from router.ranking.result import Ranking
from router.ranking.score_bounds import LEVELS, LONG_LIST_FRACTION, ScoreBounds

__all__ = [
    "COMPLETION_RESERVE",
    "LOOKUP_COST",
    "MaxScoreSearch",
    "PrunedList",
    "PrunedTail",
    "completion_reserve",
    "select_top_k",
]


LOOKUP_COST = 4
"""A binary search for one section in a list costs about four accumulated postings (~240 ns vs
~55 ns in CPython 3.11): what completing a candidate is weighed with against reading on."""

COMPLETION_RESERVE = 8
"""Lookups per result and list kept back from the reading (at most a quarter of the budget),
so that a query the budget cuts short still completes its best candidates."""

_SLACK = 1e-9
"""Relative margin for float rounding: only what is below a threshold by more is pruned."""
_STEP_MARGIN = 1.0 + 1e-7
"""Widening of a quantised bound, so that rounding never lets a bound fall below its impact."""

_UB = itemgetter(0)
_SCORE = itemgetter(1)


# One posting list of a query: (upper bound, query-order rank, block, term, start, end, weight).
PrunedList = tuple[float, int, Postings, int, int, int, float]
# A list left after the reading, as the completion reads it: (per-section bytes or None, step,
# section ids, impacts, start, end, weight); step × a section's byte bounds its weighted impact.
PrunedTail = tuple[bytes | None, float, Sequence[int], Sequence[float], int, int, float]


def completion_reserve(budget: int, k: int, lists: int) -> int:
    """Postings kept back from the reading to complete the best candidates."""
    return min(max(0, budget) // 4, COMPLETION_RESERVE * k * lists)


class MaxScoreSearch:
    """One query's pruned scoring: the lists, the budget left, and what was read."""

    def __init__(
        self,
        lists: list[PrunedList],
        k: int,
        allowed: Collection[int] | None,
        budget: int,
        floor: float = 0.0,
        whole: dict[int, PrunedList] | None = None,
        prepared: dict[int, PrunedTail] | None = None,
    ) -> None:
        self.lists = lists  # query order: ties are broken by it
        self.order = sorted(lists, key=_UB, reverse=True)  # reading order (stable)
        self.k = k
        self.allowed = allowed
        self.budget = max(0, budget)
        # kept for completing the candidates when the budget cannot read every list
        self.reserve = completion_reserve(self.budget, k, len(lists))
        # a lower bound of the final k-th score (from the windows before this one), and, in a
        # window, each list whole by its rank and the tails prepared for earlier windows
        self.floor = floor
        self.whole = whole
        self.prepared = prepared if prepared is not None else {}
        self.read = 0
        self.truncated = False
        self.rest = [0.0] * len(lists)  # rest[i]: sum of the bounds of the lists after order[i]
        total = 0.0
        for i in range(len(lists) - 1, -1, -1):
            self.rest[i] = total
            total += self.order[i][0]
        self.slack = _SLACK * total

    def run(self, bounds: ScoreBounds) -> Ranking:
        return Ranking(
            select_top_k(self.scores(bounds), self.k, self.lists), self.truncated, self.read
        )

    def scores(self, bounds: ScoreBounds) -> dict[int, float]:
        """Complete scores of the allowed sections, among them every one of the top k."""
        acc, theta, tail = self.essential()
        if tail:
            return self.complete(acc, theta, self.prepare(tail, bounds))
        if self.allowed is not None:  # in place: a window's scores are tens of thousands
            for section in list(filterfalse(self.allowed.__contains__, acc)):
                del acc[section]
        return acc

    def essential(self) -> tuple[dict[int, float], float, list[PrunedList]]:
        """Read lists by decreasing bound until the bounds left sum below θ, the k-th best partial
        score among allowed sections (or the budget runs out); returns the partial scores, θ and
        the lists (or the unread part of a list) left."""
        acc: dict[int, float] = {}
        # k-th best allowed partial score when last computed (the floor: not yet)
        theta = self.floor
        ceiling = 0.0  # upper bound of the current θ: the last one plus the bounds read since
        order, rest, slack, k = self.order, self.rest, self.slack, self.k
        if order[0][0] + rest[0] + slack < theta:  # a window the earlier ones have outscored
            return acc, theta, []
        last = len(order) - 1
        for i, entry in enumerate(order):
            ub, _, postings, _, start, end, weight = entry
            if end - start > self.budget - self.reserve:
                return self.cut_short(acc, order[i:])
            accumulate(postings, start, end, weight, acc)
            self.read += end - start
            self.budget -= end - start
            ceiling += ub
            left = rest[i] + slack
            if i < last and theta <= left < ceiling and len(acc) >= k:
                ceiling = _kth(acc, k, self.allowed)
                theta = max(ceiling, self.floor)
            if left < theta and self.worth_completing(acc, theta, left, order[i + 1 :]):
                return acc, theta, order[i + 1 :]
        return acc, theta, []

    def cut_short(
        self, acc: dict[int, float], unread: list[PrunedList]
    ) -> tuple[dict[int, float], float, list[PrunedList]]:
        """The budget cannot read the next list: stop reading and complete what was found with
        the budget kept in reserve, best partial scores first. Reading a prefix of the list
        instead (its lowest section numbers) would favour those sections and leave nothing to
        complete with (an empty ranking, as 2 % of the 1M benchmark's queries got). When nothing
        was read yet, the candidates are the head of that list: its largest impacts."""
        self.truncated = True
        _, _, postings, term, *_ = unread[0]
        head = postings.head
        if not acc and head is not None:
            start, end = head.indptr[term], head.indptr[term + 1]
            end = min(end, start + max(0, self.budget - self.reserve))
            acc = dict.fromkeys(head.section_ids[start:end], 0.0)  # in decreasing impact
            self.read += end - start
            self.budget -= end - start
        return acc, max(_kth(acc, self.k, self.allowed), self.floor), unread

    def worth_completing(
        self, acc: dict[int, float], theta: float, left: float, tail: list[PrunedList]
    ) -> bool:
        """Whether completing the candidates costs less than reading the lists left: a candidate
        costs a byte per long list (its per-section bounds) and a binary search per short one."""
        postings = 0
        unit = 0
        for _, _, block, _, start, end, _ in tail:
            postings += end - start
            long = end - start >= max(1, block.num_sections // LONG_LIST_FRACTION)
            unit += 1 if long else LOOKUP_COST
        if postings <= self.k * unit:
            return False
        return postings > unit * sum(map(le, repeat(theta - left), acc.values()))

    def prepare(self, tail: list[PrunedList], bounds: ScoreBounds) -> list[PrunedTail]:
        """The lists left, with the per-section bytes of the long ones (built at first use)."""
        prepared: list[PrunedTail] = []
        # A view's section numbers run past a shared partition's (a tenant's follow them): the
        # bytes of a shorter list are padded with "absent" for the sections it cannot hold.
        lists = self.lists if self.whole is None else self.whole.values()
        space = max(entry[2].num_sections for entry in lists)
        for entry in tail:
            _, rank, _, _, start, end, weight = entry
            known = self.prepared.get(rank)
            if known is None:
                known = self.prepared[rank] = self.prepare_list(entry, bounds, space)
            prepared.append((known[0], known[1], known[2], known[3], start, end, weight))
        return prepared

    def prepare_list(self, entry: PrunedList, bounds: ScoreBounds, space: int) -> PrunedTail:
        """One list left: its per-section bytes (built from the whole list, even in a window)."""
        ub, rank, postings, term, start, end, weight = entry
        if self.whole is not None:
            start, end = self.whole[rank][4], self.whole[rank][5]
        levels = bounds.cached_sections(postings, term)
        if levels is None and end - start <= self.budget - self.reserve:
            levels = bounds.build_sections(postings, term, start, end)
            if levels is not None:
                self.read += end - start
                self.budget -= end - start
        if levels is not None and len(levels) < space:
            levels += bytes(space - len(levels))
        step = ub / LEVELS * _STEP_MARGIN
        return (levels, step, postings.section_ids, postings.scores, start, end, weight)

    def complete(
        self, acc: dict[int, float], theta: float, tail: list[PrunedTail]
    ) -> dict[int, float]:
        """Complete scores of the allowed sections that can still reach the top k."""
        k, allowed, slack = self.k, self.allowed, self.slack
        remaining = sum(entry[1] for entry in tail) * LEVELS + slack
        loose = sum(entry[1] for entry in tail if entry[0] is None) * LEVELS + slack
        tight = [(levels, step) for levels, step, *_ in tail if levels is not None]
        cost = len(tail)
        values = acc.values()
        complete: dict[int, float] = {}
        # the sections already at θ first: their complete scores lift the threshold early
        seeds = compress(acc, map(le, repeat(theta), values))
        for section in seeds if allowed is None else filter(allowed.__contains__, seeds):
            if self.budget < cost:
                self.truncated = True
                return complete
            self.budget -= cost
            self.read += cost
            complete[section] = _completed(section, acc[section], tail)
        best = heapq.nlargest(k, complete.values())
        threshold = max(best[-1] if len(best) == k else theta, self.floor) - 2 * slack
        heapq.heapify(best)
        for section in compress(acc, map(le, repeat(threshold - remaining), values)):
            if section in complete or (allowed is not None and section not in allowed):
                continue
            partial = acc[section]
            bound = partial + loose
            for levels, step in tight:
                bound += step * levels[section]
            if bound < threshold:
                continue
            if self.budget < cost:
                self.truncated = True
                break
            self.budget -= cost
            self.read += cost
            score = complete[section] = _completed(section, partial, tail)
            if len(best) < k:
                heapq.heappush(best, score)
            elif score > best[0]:
                heapq.heapreplace(best, score)
            else:
                continue
            if len(best) == k:
                threshold = max(threshold, best[0] - 2 * slack)
        return complete


def _completed(section: int, partial: float, tail: list[PrunedTail]) -> float:
    """``partial`` plus the section's weighted impacts in the lists left, in reading order."""
    score = partial
    for levels, _, ids, scores, start, end, weight in tail:
        if levels is not None:
            if levels[section]:  # present: the search cannot miss
                score += scores[bisect_left(ids, section, start, end)] * weight
        else:
            pos = bisect_left(ids, section, start, end)
            if pos < end and ids[pos] == section:
                score += scores[pos] * weight
    return score


def _kth(acc: dict[int, float], k: int, allowed: Collection[int] | None) -> float:
    """The k-th best score among the allowed sections of ``acc`` (0 with fewer than k)."""
    values = (
        acc.values() if allowed is None else compress(acc.values(), map(allowed.__contains__, acc))
    )
    best = heapq.nlargest(k, values)
    return best[-1] if len(best) == k else 0.0


def select_top_k(
    scores: dict[int, float], k: int, lists: list[PrunedList]
) -> list[tuple[int, float]]:
    """The k best of ``scores``; equal scores in the order ``weighted_scores`` would insert them
    (the query list that first matched the section, then the section id), as ``top_k`` keeps."""
    best = heapq.nlargest(k, scores.items(), key=_SCORE)
    if not best:
        return best
    last = best[-1][1]
    distinct = set(map(_SCORE, best))
    if len(distinct) == len(best) and (len(best) < k or countOf(scores.values(), last) == 1):
        return best
    seen: Counter[float] = Counter(v for v in scores.values() if v >= last)
    tied = [
        (-v, _first_list(s, lists) if seen[v] > 1 else 0, s) for s, v in scores.items() if v >= last
    ]
    tied.sort()
    return [(s, -v) for v, _, s in tied[:k]]


def _first_list(section: int, lists: list[PrunedList]) -> int:
    """Query-order rank of the first list holding ``section``."""
    for _, rank, postings, _, start, end, _ in lists:
        ids = postings.section_ids
        pos = bisect_left(ids, section, start, end)
        if pos < end and ids[pos] == section:
            return rank
    return len(lists)
