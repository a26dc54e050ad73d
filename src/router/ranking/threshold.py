"""BM25 top-k by the threshold algorithm over long lists' heads (Fagin, Lotem & Naor 2001).

Why besides MaxScore (``router.ranking.pruning``): MaxScore stops reading when the lists left
cannot lift a section into the top k, which never happens when every list of a query is long — a
question of common words at a million sections, where each is in half of them. It then scored
hundreds of thousands of sections (26 MB of Python objects at one query) until the postings
budget cut it short, and the ranking was inexact.

A list of at least ``HEAD_MIN_POSTINGS`` stores its largest impacts in decreasing order (its
head, ``router.package.format.shards``). The threshold algorithm reads the heads side by side and
completes each section it meets by a binary search in every list of the query (sorted access
plus random access); the lists without a head are read whole first. Every section not met yet
scores at most the sum of the impacts at the heads' current depth (the frontier), so once the
k-th best complete score exceeds it, no other section can enter the top k: the result is exact,
ties included. BM25's length normalisation gives short sections the largest impacts of every
term, so the best sections lead all lists at once: measured at 1M sections it stopped after
407 (two common words), 680 and 3,692 (three) postings a head.

A section met first in a head is in none of the lists read whole, and in every other head's
list its impact is at most that head's current one: when its own impact plus those stays below
the k-th best score, it is skipped without a search (most of them, once the k-th best rises).

When the heads run out first, the caller falls back to MaxScore; when the postings budget runs
out, the ranking so far is returned as truncated (every score in it is complete). Queries of
five common words at k=50 can still exhaust the budget: their top 50 is a near-tie among tens
of thousands of sections; ``bench/scale.py`` reports how often and what it costs (``budget_loss``).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from router.package.format.postings import Postings
from router.ranking.bm25 import QueryList

__all__ = ["THRESHOLD_PLAIN_POSTINGS", "ThresholdRanking", "threshold_top_k"]

THRESHOLD_PLAIN_POSTINGS = 4096
"""Queries whose lists without a head hold more postings go to MaxScore: here each of their
sections would be completed by a binary search in every list, where MaxScore's bounds prune most
of them."""

_STEP = 64
"""Head postings read per list between two checks of the stop condition."""

_SLACK = 1e-9
"""Relative margin for float rounding of the frontier (a sum in another order than a score's)."""


@dataclass(frozen=True, slots=True)
class ThresholdRanking:
    """The k best (section, score) pairs, best first; ``truncated``: the budget ran out."""

    ranked: list[tuple[int, float]]
    truncated: bool
    postings: int


# One list of the query: (block, term, weight, start, end) of its postings.
_Span = tuple[Postings, int, float, int, int]


def threshold_top_k(
    query: Sequence[QueryList], k: int, allowed: Collection[int] | None, budget: int
) -> ThresholdRanking | None:
    """The exact top k of ``weighted_scores(query)`` among the allowed sections, or None when
    the algorithm does not apply (no list has a head, or the others are too long) or the heads
    ran out before it could stop."""
    spans = [
        (postings, term, weight, postings.indptr[term], postings.indptr[term + 1])
        for postings, term, weight in query
        if postings.indptr[term] != postings.indptr[term + 1]
    ]
    headed = [i for i, span in enumerate(spans) if _head_length(span)]
    if not headed or k <= 0:
        return None
    if len(spans) == 1:
        return _one_head(spans[0], k, allowed)
    plain = [span for i, span in enumerate(spans) if i not in headed]
    if sum(end - start for *_, start, end in plain) > THRESHOLD_PLAIN_POSTINGS:
        return None
    return _Threshold(spans, k, allowed, budget).run(headed, plain)


def _one_head(span: _Span, k: int, allowed: Collection[int] | None) -> ThresholdRanking | None:
    """A query of one long list (a common word asked alone): its head is already in the
    ranking's order — impact, then section number, as exhaustive scoring breaks ties — so its
    first k allowed sections are the answer; None when the head holds fewer."""
    postings, term, weight, *_ = span
    head = postings.head
    assert head is not None
    start, end = head.indptr[term], head.indptr[term + 1]
    ranked: list[tuple[int, float]] = []
    pairs = zip(head.section_ids[start:end], head.scores[start:end], strict=True)
    for read, (section, impact) in enumerate(pairs, start=1):
        if allowed is None or section in allowed:
            ranked.append((section, 0.0 + impact * weight))
            if len(ranked) == k:
                return ThresholdRanking(ranked, False, read)
    return None


def _head_length(span: _Span) -> int:
    postings, term, *_ = span
    head = postings.head
    return 0 if head is None else head.indptr[term + 1] - head.indptr[term]


class _Threshold:
    """One query's threshold algorithm: the sections met, their complete scores, the budget."""

    def __init__(
        self, spans: list[_Span], k: int, allowed: Collection[int] | None, budget: int
    ) -> None:
        self.spans = spans  # query order: scores are summed, and ties broken, in it
        self.ranked = list(enumerate(spans))
        self.k = k
        self.allowed = allowed
        self.budget = max(0, budget)
        self.read = 0
        self.met: set[int] = set()
        self.scores: dict[int, tuple[float, int]] = {}  # section → (score, first list holding it)
        self.best: list[float] = []  # min-heap of the k best scores

    def run(self, headed: list[int], plain: list[_Span]) -> ThresholdRanking | None:
        for postings, _, _, start, end in plain:
            if not self.meet_plain(postings.section_ids, start, end):
                return self.ranking(truncated=True)
        heads = [self.spans[i] for i in headed]  # query order
        ranked_heads = [(i, self.spans[i]) for i in headed]
        lengths = [_head_length(span) for span in heads]
        bound = sum(_frontier(span, 0, n) for span, n in zip(heads, lengths, strict=True))
        slack = _SLACK * max(bound, 1.0)
        depth = 0
        while True:
            frontiers = [_frontier(s, depth, n) for s, n in zip(heads, lengths, strict=True)]
            frontier = sum(frontiers)
            if len(self.best) == self.k and self.best[0] > frontier + slack:
                return self.ranking(truncated=False)
            if depth >= max(lengths):
                break
            for index, ((postings, term, weight, *_), n) in enumerate(
                zip(heads, lengths, strict=True)
            ):
                head = postings.head
                assert head is not None
                low = head.indptr[term] + depth
                high = head.indptr[term] + min(n, depth + _STEP)
                others = frontier - frontiers[index] + slack
                if low < high and not self.meet_head(head, low, high, weight, others, ranked_heads):
                    return self.ranking(truncated=True)
            depth += _STEP
        return None  # the heads ran out: MaxScore takes over

    def meet_plain(self, sections: Sequence[int], start: int, end: int) -> bool:
        """Complete the sections of a list without a head, read whole; False when the budget
        ran out."""
        cost = len(self.spans)
        for section in sections[start:end]:
            if section in self.met:
                continue
            if self.budget < cost:
                return False
            self.budget -= cost
            self.read += cost
            self.met.add(section)
            if self.allowed is None or section in self.allowed:
                self.keep(section, self.ranked)
        return True

    def meet_head(
        self,
        head: Postings,
        start: int,
        end: int,
        weight: float,
        others: float,
        heads: list[tuple[int, _Span]],
    ) -> bool:
        """Complete the sections of ``head[start:end]`` not met before that can still reach the
        top k; False when the budget ran out.

        A section met here first is in no list without a head (those were read whole), and in
        each other head's list its impact is at most that head's current one (``others`` sums
        them): when its own impact plus ``others`` stays below the k-th best score, it cannot
        enter the top k and costs no search."""
        sections = head.section_ids[start:end]
        impacts = head.scores[start:end]
        for section, impact in zip(sections, impacts, strict=True):
            if section in self.met:
                continue
            if self.budget < 1:
                return False
            self.budget -= 1
            self.read += 1
            self.met.add(section)
            if self.allowed is not None and section not in self.allowed:
                continue
            if len(self.best) == self.k and impact * weight + others < self.best[0]:
                continue
            if self.budget < len(heads):
                return False
            self.budget -= len(heads)
            self.read += len(heads)
            self.keep(section, heads)
        return True

    def keep(self, section: int, spans: list[tuple[int, _Span]]) -> None:
        """Score ``section`` over ``spans`` (the lists that may hold it) and keep it if it is
        among the k best so far. One below the k-th best never enters the top k (that score only
        rises), so it is not kept: memory stays about k entries, not one per section met."""
        score, first = _complete(section, spans)
        if len(self.best) < self.k:
            heapq.heappush(self.best, score)
        elif score > self.best[0]:
            heapq.heapreplace(self.best, score)
        elif score < self.best[0]:
            return
        self.scores[section] = (score, first)

    def ranking(self, truncated: bool) -> ThresholdRanking:
        """The k best met sections: equal scores in ``top_k(weighted_scores(...))``'s order (the
        query list that first held the section, then its number)."""
        best = heapq.nsmallest(
            self.k, self.scores.items(), key=lambda item: (-item[1][0], item[1][1], item[0])
        )
        return ThresholdRanking([(s, v) for s, (v, _) in best], truncated, self.read)


def _complete(section: int, spans: list[tuple[int, _Span]]) -> tuple[float, int]:
    """The section's score over ``spans`` (each with its rank in the query), summed in query
    order as ``weighted_scores`` does, and the rank of the first list holding it (ties are
    broken by it)."""
    score = 0.0
    first = -1
    for rank, (postings, _, weight, start, end) in spans:
        ids = postings.section_ids
        pos = bisect_left(ids, section, start, end)
        if pos < end and ids[pos] == section:
            score += postings.scores[pos] * weight
            if first < 0:
                first = rank
    return score, first


def _frontier(span: _Span, depth: int, length: int) -> float:
    """The largest weighted impact of a head's list not read at ``depth``: the head's next one,
    or past its end its last (what follows in the list is at most that), or 0 when the head
    holds the whole list."""
    postings, term, weight, start, end = span
    head = postings.head
    assert head is not None
    if depth >= length:
        if length >= end - start:
            return 0.0
        depth = length - 1
    return head.scores[head.indptr[term] + depth] * weight
