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
from bisect import bisect_left
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import chain, compress, filterfalse, repeat
from operator import countOf, itemgetter, le, neg

from router.config import DEFAULT_MAX_POSTINGS
from router.package.format.postings import Postings
from router.package.stores.budget import ReaderBudget
from router.ranking.bm25 import (
    ACCUMULATE_STEP,
    QueryList,
    accumulate,
    max_impact,
    top_k,
    weighted_scores,
)
from router.ranking.threshold import threshold_top_k
from router.trace import NO_DEADLINE, Deadline

__all__ = [
    "COMPLETION_RESERVE",
    "WINDOW_POSTINGS",
    "Ranking",
    "ScoreBounds",
    "weighted_top_k",
]


LONG_LIST_FRACTION = 32
"""A posting list is long — worth a byte per section of bounds — when it holds at least 1/32 of
the block's sections."""

SMALL_QUERY_POSTINGS = 1024
"""Up to this many postings a query is scored exhaustively: pruning's fixed costs (sorting the
lists, θ, the candidate passes) exceed what it saves (measured on the sample knowledge's golden
queries: 16 µs exhaustive vs 26 µs pruned a query at k=10)."""

LOOKUP_COST = 4
"""A binary search for one section in a list costs about four accumulated postings (~240 ns vs
~55 ns in CPython 3.11): what completing a candidate is weighed with against reading on."""

COMPLETION_RESERVE = 8
"""Lookups per result and list kept back from the reading (at most a quarter of the budget),
so that a query the budget cuts short still completes its best candidates."""

WINDOW_POSTINGS = 32_768
"""A query of more postings is scored window by window over its section numbers, about this
many postings a window: the partial scores of one window at a time, not one per section its
lists hold (26 MB for three common words at 1M sections), and the k-th best score of the
windows done prunes the next ones from their start."""

_SLACK = 1e-9
"""Relative margin for float rounding: only what is below a threshold by more is pruned."""
_STEP_MARGIN = 1.0 + 1e-7
"""Widening of a quantised bound, so that rounding never lets a bound fall below its impact."""
_LEVELS = 254.0  # quantised impacts are 1..255, 0 meaning "absent"

_UB = itemgetter(0)
_SCORE = itemgetter(1)


@dataclass(frozen=True, slots=True)
class Ranking:
    """The k best (section, score) pairs of one query, best first.

    ``truncated``: the postings budget stopped the scoring early; sections that only the postings
    left unread would have surfaced may be missing, but every score returned is complete.
    ``postings``: postings read (accumulated, or looked up to complete a candidate).
    ``timed_out``: the latency deadline stopped it (``truncated`` is then True too).
    """

    ranked: list[tuple[int, float]]
    truncated: bool = False
    postings: int = 0
    timed_out: bool = False


@dataclass
class ScoreBounds:
    """Upper bounds the pruning needs, memoised per package: each list's largest impact, and for
    long lists one byte per section — the impact quantised upwards, 0 where the term is absent."""

    maxima: dict[tuple[int, int], float] = field(default_factory=dict)
    max_bytes: int = ReaderBudget.bound_bytes
    _sections: dict[tuple[str | int, int], bytes] = field(
        default_factory=dict, init=False, repr=False
    )
    _bytes: int = field(default=0, init=False, repr=False)

    def maximum(self, postings: Postings, term: int) -> float:
        return max_impact(postings, term, self.maxima)

    def cached_sections(self, postings: Postings, term: int) -> bytes | None:
        """The per-section bytes of a list, if they were built before."""
        return self._sections.get((postings.key or id(postings), term))

    def build_sections(self, postings: Postings, term: int, start: int, end: int) -> bytes | None:
        """Build (and keep) the per-section bytes of a long list; None when they do not fit."""
        size = postings.num_sections
        if end - start < max(1, size // LONG_LIST_FRACTION) or size > self.max_bytes:
            return None
        while self._bytes + size > self.max_bytes:
            self._bytes -= len(self._sections.pop(next(iter(self._sections))))
        levels = bytearray(size)
        scale = _LEVELS / self.maximum(postings, term)
        for low in range(start, end, ACCUMULATE_STEP):  # in steps: bounded transient memory
            high = min(end, low + ACCUMULATE_STEP)
            sections = postings.section_ids[low:high].tolist()  # type: ignore[attr-defined]
            impacts = postings.scores[low:high].tolist()  # type: ignore[attr-defined]
            for section, impact in zip(sections, impacts, strict=True):
                levels[section] = int(impact * scale) + 1
        found = self._sections[(postings.key or id(postings), term)] = bytes(levels)
        self._bytes += size
        return found


# One posting list of a query: (upper bound, query-order rank, block, term, start, end, weight).
_List = tuple[float, int, Postings, int, int, int, float]
# A list left after the reading, as the completion reads it: (per-section bytes or None, step,
# section ids, impacts, start, end, weight); step × a section's byte bounds its weighted impact.
_Tail = tuple[bytes | None, float, Sequence[int], Sequence[float], int, int, float]


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
    lists: list[_List] = []
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
        return _windowed_top_k(lists, k, allowed, budget, bounds, deadline)
    return _Search(lists, k, allowed, budget).run(bounds)


def _reserve(budget: int, k: int, lists: int) -> int:
    """Postings kept back from the reading to complete the best candidates."""
    return min(max(0, budget) // 4, COMPLETION_RESERVE * k * lists)


def _windowed_top_k(
    lists: list[_List],
    k: int,
    allowed: Collection[int] | None,
    budget: int,
    bounds: ScoreBounds,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """MaxScore over consecutive ranges of section numbers, each with ~``WINDOW_POSTINGS``
    postings: a window's search starts from the k-th best complete score found so far (a lower
    bound of the final one), and only the complete scores that still reach it are kept. Every
    section's score is the same sum in the same order as in one search over all the lists, so
    the ranking is too; the per-section bounds of long lists are built once for all windows.

    A query the budget cannot read whole gives each window the budget's share of its postings
    (what a window leaves unused passes on): every window is cut alike, so no range of section
    numbers is favoured. A query that fits reads all it needs: its windows' completions may
    spend up to the budget once more (a query costs at most twice its budget). Past the
    ``deadline`` (asked after each window) the windows left are not read: the ranking is the
    best of the windows done, ``timed_out``."""
    space = max(entry[2].num_sections for entry in lists)
    total = sum(entry[5] - entry[4] for entry in lists)
    width = -(-space // -(-total // WINDOW_POSTINGS))
    reserve = _reserve(budget, k, len(lists))
    fits = total <= budget - reserve
    whole = {entry[1]: entry for entry in lists}
    prepared: dict[int, _Tail] = {}
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
        search = _Search(window, k, allowed, allowance, floor, whole, prepared)
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
    return Ranking(_select(kept, k, lists), truncated, read, timed_out)


def _window(lists: list[_List], low: int, high: int) -> list[_List]:
    """The parts of the lists whose section numbers are in [low, high), empty ones left out."""
    window: list[_List] = []
    for ub, rank, postings, term, start, end, weight in lists:
        ids = postings.section_ids
        first = bisect_left(ids, low, start, end)
        last = bisect_left(ids, high, first, end)
        if first < last:
            window.append((ub, rank, postings, term, first, last, weight))
    return window


def _one_list_top_k(
    entry: _List,
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


class _Search:
    """One query's pruned scoring: the lists, the budget left, and what was read."""

    def __init__(
        self,
        lists: list[_List],
        k: int,
        allowed: Collection[int] | None,
        budget: int,
        floor: float = 0.0,
        whole: dict[int, _List] | None = None,
        prepared: dict[int, _Tail] | None = None,
    ) -> None:
        self.lists = lists  # query order: ties are broken by it
        self.order = sorted(lists, key=_UB, reverse=True)  # reading order (stable)
        self.k = k
        self.allowed = allowed
        self.budget = max(0, budget)
        # kept for completing the candidates when the budget cannot read every list
        self.reserve = _reserve(self.budget, k, len(lists))
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
        return Ranking(_select(self.scores(bounds), self.k, self.lists), self.truncated, self.read)

    def scores(self, bounds: ScoreBounds) -> dict[int, float]:
        """Complete scores of the allowed sections, among them every one of the top k."""
        acc, theta, tail = self.essential()
        if tail:
            return self.complete(acc, theta, self.prepare(tail, bounds))
        if self.allowed is not None:  # in place: a window's scores are tens of thousands
            for section in list(filterfalse(self.allowed.__contains__, acc)):
                del acc[section]
        return acc

    def essential(self) -> tuple[dict[int, float], float, list[_List]]:
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
        self, acc: dict[int, float], unread: list[_List]
    ) -> tuple[dict[int, float], float, list[_List]]:
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
        self, acc: dict[int, float], theta: float, left: float, tail: list[_List]
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

    def prepare(self, tail: list[_List], bounds: ScoreBounds) -> list[_Tail]:
        """The lists left, with the per-section bytes of the long ones (built at first use)."""
        prepared: list[_Tail] = []
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

    def prepare_list(self, entry: _List, bounds: ScoreBounds, space: int) -> _Tail:
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
        step = ub / _LEVELS * _STEP_MARGIN
        return (levels, step, postings.section_ids, postings.scores, start, end, weight)

    def complete(self, acc: dict[int, float], theta: float, tail: list[_Tail]) -> dict[int, float]:
        """Complete scores of the allowed sections that can still reach the top k."""
        k, allowed, slack = self.k, self.allowed, self.slack
        remaining = sum(entry[1] for entry in tail) * _LEVELS + slack
        loose = sum(entry[1] for entry in tail if entry[0] is None) * _LEVELS + slack
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


def _completed(section: int, partial: float, tail: list[_Tail]) -> float:
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


def _select(scores: dict[int, float], k: int, lists: list[_List]) -> list[tuple[int, float]]:
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


def _first_list(section: int, lists: list[_List]) -> int:
    """Query-order rank of the first list holding ``section``."""
    for _, rank, postings, _, start, end, _ in lists:
        ids = postings.section_ids
        pos = bisect_left(ids, section, start, end)
        if pos < end and ids[pos] == section:
            return rank
    return len(lists)
