"""BM25 top-k with numpy where it imports (CPython): the pure scorer's ranking, faster.

Why a second scorer: the Worker has no numpy (ADR 0001), so ``router.ranking.pruning.
weighted_top_k`` (exact dynamic pruning in pure Python) stays its path; but ``kr serve``,
``kr query`` and the evaluations run in CPython, where numpy is installed (bm25s needs it), and
summing all of a query's postings in C costs less than pruning them in Python (~4× at top-10
on SciFact, bench/README.md; ADR 0011, addendum).

Why the ranking is the same, floats included: the pure path scores a section by adding its
weighted impacts (``impact * weight`` in float64) one list at a time, starting from the first
— in query order when it scores a small query exhaustively, else in MaxScore's reading order
(decreasing bound, equal bounds in query order; its module docstring). ``np.bincount(ids,
weights=contributions)`` adds into each bin in input order starting from 0.0, so lists
concatenated in that same order give the same floats, bit for bit (0.0 + x == x), whatever the
weights. Equal scores are then ordered as the pure path orders them: by the first list in query
order holding the section, then by section id. tests/ranking/test_numpy_backend.py compares ids,
order and scores with ``==``.

When the pure path answers instead — so that CPython never serves another ranking than the
Worker:

- numpy does not import, or the interpreter is Pyodide (the Worker's heap is not spent on it);
- the query has fewer than ``NUMPY_MIN_POSTINGS`` postings (Python is faster there);
- a list has a head (the threshold algorithm, ``bm25_threshold``, sums in its own order);
- a weight is not positive, or exactly 1 (the pure path then keeps impacts as Python ints), or
  a list holds an impact that is not positive (a section's presence is read from its sum);
- the postings budget might cut the pure path short: ``_may_truncate`` bounds what the pure
  path can spend, and only a query that surely fits is scored here (``truncated`` is False
  on both paths; a query that might be cut gets the pure path's cut, ``truncated`` and all);
- ``allowed`` is a ``Mask`` shorter than the sections in view.

Each list's section ids and impacts are decoded into numpy once and kept in a per-package memo
bounded by bytes (``PostingArrays``, ``ARRAY_CACHE_BYTES``): decoding them per query cost about
as much as scoring them. ``Ranking.postings`` is the postings summed (all of the query's).
The lexical stage's entry, ``numpy_terms_top_k``, finds a query's lists through the view's plans
(per block and term: the IDF, the memo keys and shards of its lists; ``_Plans``), not through
``query_lists`` each query: the same lists and weights, ~25 µs less a SciFact query (ADR 0011,
second addendum).
"""

from __future__ import annotations

import sys
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from router.config import DEFAULT_MAX_POSTINGS
from router.package.format.postings import Postings
from router.ranking import pruning as bm25_pruning
from router.ranking.bm25 import QueryList, lists_idf, query_lists
from router.ranking.maxscore import COMPLETION_RESERVE
from router.ranking.pruning import weighted_top_k
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.results import Mask
from router.trace import NO_DEADLINE, Deadline

if TYPE_CHECKING:
    from router.package.stores.shards import Loaded, PartitionShards
    from router.package.view import PackageView

__all__ = [
    "ARRAY_CACHE_BYTES",
    "DENSE_FACTOR",
    "DENSE_SECTIONS",
    "NUMPY_MIN_POSTINGS",
    "PLAN_ENTRIES",
    "PostingArrays",
    "numpy_available",
    "numpy_terms_top_k",
    "numpy_top_k",
]

ARRAY_CACHE_BYTES = 16 * 1024 * 1024
"""Bytes of decoded lists a package keeps (14 a posting: int32 ids, uint16 impacts, float64
weighted impacts, plus ``_ENTRY_BYTES`` a list; ≈ 1.1M postings). A CPython server's cache,
never a Worker's: SciFact's 300 test queries touch ≈ 4 MB of lists."""

DENSE_SECTIONS = 32_768
DENSE_FACTOR = 4
"""Scores are summed into one slot per section in view when the view holds at most
``DENSE_SECTIONS`` sections or ``DENSE_FACTOR`` × the query's postings (SciFact: 5,183 sections,
~4,500 postings a query); otherwise into one slot per distinct section met (``np.unique``), so
that a million-section view costs no 8 MB array per query. Measured: at 1,000 postings the two
cost the same at ~32k sections, at 50,000 postings at ~4× as many sections as postings."""

SAMPLE_PER_RESULT = 16
SAMPLE_MIN = 512
"""With a filter, the k-th best score is first bounded from below by the k-th best of an evenly
spaced sample of the sections (at least ``SAMPLE_MIN`` and ``SAMPLE_PER_RESULT`` × k of them),
so that only the ~100 sections reaching it are sorted, not all 5,183 of SciFact (without a
filter, the lists' own k-th largest impacts give the bound, ``_top_k``)."""

NUMPY_MIN_POSTINGS = 64
"""Queries of fewer postings are scored by the pure path: numpy's fixed cost (~12 µs a query)
is more than summing so few in Python (measured on SciFact's lists: 11 vs 13 µs below 64
postings, 24 vs 12 µs at 64–127, 155 vs 15 µs at ~1,000)."""

PLAN_ENTRIES = 4096
"""(block, term) plans a view keeps (``_Plans``: a term's IDF and where its lists are, ≈ 400
bytes each with the term, ≈ 1.6 MB at most; SciFact's 300 test queries ask ≈ 1,600 terms); all
dropped when full, as the analyzer's stem cache is."""

_ENTRY_BYTES = 256
"""What one memo entry costs besides its arrays (the key, the tuple, two array headers)."""

_BOUND = itemgetter(0)
_RANK = itemgetter(1)

_numpy: Any = None
_numpy_tried = False


def numpy_available() -> bool:
    """Whether numpy imports here; imported at the first call, not with the module (the core
    must import without it). Pyodide never tries: the Worker keeps the pure path, its heap."""
    global _numpy, _numpy_tried
    if not _numpy_tried:
        _numpy_tried = True
        if sys.platform != "emscripten":
            try:
                import numpy
            except ImportError:
                numpy = None  # type: ignore[assignment]
            _numpy = numpy
    return _numpy is not None


class _List:
    """One posting list decoded: what a query needs of it besides its weight, and its impacts
    × the weight it was last asked with (a term's weight is the same whenever one view asks it
    as often: its IDF depends on the view alone)."""

    __slots__ = ("ids", "impacts", "kth", "maximum", "owner", "usable", "weight", "weighted")

    def __init__(
        self, ids: Any, impacts: Any, maximum: float, usable: bool, owner: Postings | None
    ) -> None:
        self.ids = ids  # section ids, ascending (numpy int32)
        self.impacts = impacts  # the impacts as stored (numpy, their own dtype: uint16 here)
        self.maximum = maximum  # the pure path's bound of an impact (``ScoreBounds.maximum``)
        self.usable = usable  # impacts all positive and no head: the numpy path may sum it
        self.owner = owner  # the block of a key-less entry (its id() names it while it lives)
        self.weight = 0.0  # no weight yet: every weight this path sums is positive
        self.weighted: Any = None
        self.kth: dict[int, float] = {}  # k → the k-th largest impact (0 with fewer than k)

    def kth_largest(self, k: int) -> float:
        """The k-th largest impact of the list (0 when it has fewer), memoised per k."""
        found = self.kth.get(k)
        if found is None:
            n = len(self.impacts)
            found = self.kth[k] = (
                float(_numpy.partition(self.impacts, n - k)[n - k]) if n >= k else 0.0
            )
        return found

    def times(self, weight: float) -> Any:
        """impacts × weight, each product as the pure path computes it (float64 × float64)."""
        if weight != self.weight:
            self.weighted = self.impacts.astype(_numpy.float64) * weight
            self.weight = weight
        return self.weighted


class PostingArrays:
    """The lists of one package decoded into numpy, per (block, term): kept until
    ``max_bytes`` is reached, the least recently used dropped first."""

    def __init__(self, max_bytes: int = ARRAY_CACHE_BYTES) -> None:
        self.max_bytes = max_bytes
        self._held: OrderedDict[tuple[str | int, int], _List] = OrderedDict()
        self._bytes = 0

    @property
    def cached_bytes(self) -> int:
        return self._bytes

    def find(self, postings: Postings, term: int, bounds: ScoreBounds) -> _List | None:
        """The list decoded (from the memo, or now, kept when it fits); None when empty."""
        key = (postings.key or id(postings), term)
        found = self._held.get(key)
        if found is not None and (found.owner is None or found.owner is postings):
            self._held.move_to_end(key)
            return found
        start, end = postings.indptr[term], postings.indptr[term + 1]
        if start == end:
            return None
        np = _numpy
        ids = np.array(postings.section_ids[start:end], dtype=np.int32)
        impacts = np.array(postings.scores[start:end])
        usable = bool(impacts.min() > 0) and not _has_head(postings, term)
        owner = None if postings.key else postings
        found = _List(ids, impacts, bounds.maximum(postings, term), usable, owner)
        stale = self._held.pop(key, None)  # a key-less block's id() given to another block
        if stale is not None:
            self._bytes -= _size(stale)
        size = _size(found)
        if size <= self.max_bytes:
            while self._bytes + size > self.max_bytes:
                self._bytes -= _size(self._held.popitem(last=False)[1])
            self._held[key] = found
            self._bytes += size
        return found


def _size(entry: _List) -> int:
    """Its arrays' bytes (ids, impacts, weighted impacts: 14 a posting here) and its own."""
    size = len(entry.ids)
    return int(entry.ids.nbytes + entry.impacts.nbytes) + 8 * size + _ENTRY_BYTES


def _has_head(postings: Postings, term: int) -> bool:
    head = postings.head
    return head is not None and head.indptr[term + 1] != head.indptr[term]


def numpy_top_k(
    query: Sequence[QueryList],
    k: int,
    allowed: Collection[int] | None = None,
    *,
    bounds: ScoreBounds | None = None,
    max_postings: int | None = None,
    arrays: PostingArrays | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """``weighted_top_k(query, k, allowed, ...)``'s ranking with every posting summed by numpy;
    the pure path answers whenever identity is not guaranteed (module docstring). ``bounds``
    and ``arrays`` are the package's memos (throwaway ones without them); the ``deadline`` is
    the pure path's (numpy sums a query within its postings budget in one step)."""
    if k <= 0 or not query or not numpy_available():
        return weighted_top_k(
            query, k, allowed, bounds=bounds, max_postings=max_postings, deadline=deadline
        )
    if bounds is None:
        bounds = ScoreBounds(max_bytes=0)
    memo = arrays if arrays is not None else PostingArrays(0)
    held, touch = memo._held, memo._held.move_to_end
    lists: list[tuple[float, int, _List, float]] = []  # (bound, query-order rank, list, weight)
    total = 0
    space = 0
    for postings, term, weight in query:
        key = (postings.key or id(postings), term)
        found = held.get(key)
        if found is not None and (found.owner is None or found.owner is postings):
            touch(key)
        else:
            found = memo.find(postings, term, bounds)
            if found is None:
                continue
        if not found.usable or not weight > 0 or weight == 1:
            break
        lists.append((found.maximum * weight, len(lists), found, weight))
        total += len(found.ids)
        if postings.num_sections > space:
            space = postings.num_sections
    else:
        order = _summing_order(lists, total, space, k, allowed, max_postings)
        if order is not None:
            return Ranking(_top_k(order, k, allowed, space), False, total)
    return weighted_top_k(
        query, k, allowed, bounds=bounds, max_postings=max_postings, deadline=deadline
    )


def numpy_terms_top_k(
    view: PackageView,
    terms: Sequence[str],
    weights: Mapping[str, float],
    method: str,
    k: int,
    allowed: Collection[int] | None = None,
    *,
    loaded: Loaded | None = None,
    term_weights: Mapping[str, float] | None = None,
    bounds: ScoreBounds | None = None,
    max_postings: int | None = None,
    arrays: PostingArrays | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """``numpy_top_k(query_lists(view, terms, weights, method, loaded, term_weights), k, ...)``,
    its lists found through the view's plans (``_Plans``): per (block, term), the IDF and the
    memo keys of its lists, looked up once per view, so that a query costs a dict lookup per
    term and list, not the shard lookups and document frequencies ``query_lists`` repeats.
    Each list's weight is the product ``query_lists`` computes, in its order (the same float);
    any query this cannot plan goes through ``query_lists`` and ``numpy_top_k`` unchanged."""
    if k > 0 and terms and numpy_available():
        plans: _Plans = view.derive(_PLANS, _Plans)
        found = _planned(plans, view, terms, weights, method, loaded, term_weights, bounds, arrays)
        if found is not None:
            lists, total, space = found
            order = _summing_order(lists, total, space, k, allowed, max_postings)
            if order is not None:
                return Ranking(_top_k(order, k, allowed, space), False, total)
    query = query_lists(view, terms, weights, method, loaded, term_weights)
    return numpy_top_k(
        query,
        k,
        allowed,
        bounds=bounds,
        max_postings=max_postings,
        arrays=arrays,
        deadline=deadline,
    )


_PLANS = "bm25_numpy_plans"

_Entry = tuple[tuple[str, int], int, float, int, "PartitionShards", int]
"""Where one list of a planned term is: its ``PostingArrays`` key, its term id in its block,
the block's quantization step and sections, its partition's shards and the term's id there."""


_Plan = tuple[float, tuple[_Entry, ...] | None]
"""A term's IDF in one block of a view and where its lists are (None: a list has no memo key,
an in-memory block; the numpy path then takes ``query_lists``)."""


class _Plans:
    """A view's block → term → ``_Plan``: valid for the view's life (its partitions and
    tombstones do not change), at most ``PLAN_ENTRIES`` in all."""

    def __init__(self, view: PackageView) -> None:
        self.held: dict[str, dict[str, _Plan]] = {}
        self.count = 0
        self.sections = view.section_total

    def build(
        self, view: PackageView, block: str, term: str, method: str, loaded: Loaded | None
    ) -> _Plan:
        """The term's plan in ``block``, from its entries and shards (loaded for this query)."""
        stores, found = [], []
        for part, entry in zip(view.parts, view.term_entries(term), strict=True):
            if entry is not None:
                store = part.partition.postings
                stores.append((store, entry.id))
                found.append(store.postings(entry.id, block, loaded))
        plan: _Plan = (0.0, None)
        if all(postings.key for postings, _ in found):
            dead = view.dead_frequency(term, block)
            weight = lists_idf(found, dead, method, self.sections) if found else 0.0
            entries = tuple(
                ((p.key, t), t, p.scale, p.num_sections, store, own)
                for (p, t), (store, own) in zip(found, stores, strict=True)
            )
            plan = (weight, entries)
        if self.count >= PLAN_ENTRIES:  # a question's words are unbounded (an attack's too)
            self.held.clear()
            self.count = 0
        self.held.setdefault(block, {})[term] = plan
        self.count += 1
        return plan


def _planned(
    plans: _Plans,
    view: PackageView,
    terms: Sequence[str],
    weights: Mapping[str, float],
    method: str,
    loaded: Loaded | None,
    term_weights: Mapping[str, float] | None,
    bounds: ScoreBounds | None,
    arrays: PostingArrays | None,
) -> tuple[list[tuple[float, int, _List, float]], int, int] | None:
    """The query's lists as ``numpy_top_k`` gathers them — (bound, query-order rank, list,
    weight), in ``query_lists``'s order — with their postings and the sections they span; None
    when the numpy path cannot sum them (a list without a memo key, with a head, an impact
    not positive, a weight of 1 or not positive)."""
    if bounds is None:
        bounds = ScoreBounds(max_bytes=0)
    memo = arrays if arrays is not None else PostingArrays(0)
    held, touch = memo._held, memo._held.move_to_end
    counts = Counter(terms)
    scale = term_weights or {}
    lists: list[tuple[float, int, _List, float]] = []
    total = space = 0
    for name, weight in weights.items():
        plan_of = plans.held.get(name, {}).get
        for term, count in counts.items():
            plan = plan_of(term)
            if plan is None:
                plan = plans.build(view, name, term, method, loaded)
            idf_weight, entries = plan
            if not entries:
                if entries is None:
                    return None
                continue
            w = count * weight * idf_weight * scale.get(term, 1.0)  # as ``query_lists``
            for key, own, step, sections, store, entry in entries:
                found = held.get(key)
                if found is not None:
                    touch(key)
                else:
                    postings, _ = store.postings(entry, name, loaded)
                    found = memo.find(postings, own, bounds)
                    if found is None:
                        continue
                lw = w * step
                if not found.usable or not lw > 0 or lw == 1:
                    return None
                lists.append((found.maximum * lw, len(lists), found, lw))
                total += len(found.ids)
                if sections > space:
                    space = sections
    return lists, total, space


def _summing_order(
    lists: list[tuple[float, int, _List, float]],
    total: int,
    space: int,
    k: int,
    allowed: Collection[int] | None,
    max_postings: int | None,
) -> list[tuple[float, int, _List, float]] | None:
    """The lists in the order the pure path adds them up — query order when it scores the
    query exhaustively, else MaxScore's reading order (decreasing bound, a stable sort) — or
    None when the pure path must answer itself (too few postings, a budget it might run out
    of, a mask too short for the view)."""
    budget = DEFAULT_MAX_POSTINGS if max_postings is None else max_postings
    if isinstance(allowed, Mask) and len(allowed) < space:
        return None
    if total <= min(bm25_pruning.SMALL_QUERY_POSTINGS, budget):
        return lists if total >= NUMPY_MIN_POSTINGS else None
    if _may_truncate(total, space, len(lists), k, budget):
        return None
    return sorted(lists, key=_BOUND, reverse=True)


def _may_truncate(total: int, space: int, lists: int, k: int, budget: int) -> bool:
    """Whether the pure path might stop short of its budget on this query. It spends at most:
    each list once read and once built into per-section bounds (windows may do both to one
    list), one lookup per list for each section it completes (one completion at most per
    distinct section), and it keeps ``COMPLETION_RESERVE`` × k lookups per list in reserve;
    when all of that fits the budget, no read, build or completion is ever refused."""
    reserve = COMPLETION_RESERVE * k * lists
    return 2 * total + min(total, space) * lists + reserve > budget


def _top_k(
    order: list[tuple[float, int, _List, float]],
    k: int,
    allowed: Collection[int] | None,
    space: int,
) -> list[tuple[int, float]]:
    """Sum the lists in the order given (the pure path's), then rank the sums (``_ranked``)."""
    np = _numpy
    held, contributions = [], []
    for _, _, found, weight in order:
        held.append(found.ids)
        contributions.append(found.weighted if found.weight == weight else found.times(weight))
    ids = np.concatenate(held)
    if space > max(DENSE_SECTIONS, DENSE_FACTOR * len(ids)):
        sections, inverse = np.unique(ids, return_inverse=True)
        scores = np.bincount(
            inverse, weights=np.concatenate(contributions), minlength=len(sections)
        )
        if allowed is not None:
            sections, scores = _allowed(sections, scores, allowed)
        return _ranked(sections, scores, k, order)
    summed = np.bincount(ids, weights=np.concatenate(contributions), minlength=space)
    if isinstance(allowed, Mask):  # x × 1 == x, x × 0 == 0: the hidden sections drop out
        summed *= np.frombuffer(allowed, dtype=np.uint8, count=space) != 0
    elif allowed is not None:
        sections = np.flatnonzero(summed)
        return _ranked(*_allowed(sections, summed[sections], allowed), k, order)
    # A lower bound of the k-th best score, so that ``_ranked`` ranks the few sections reaching
    # it, not all: without a filter, a list's k-th largest weighted impact (its k sections score
    # at least that: a sum of positive floats never falls below a term); with one, the k-th best
    # of every step-th section's score.
    floor = 0.0
    if allowed is None:
        for _, _, found, weight in order:
            kth = found.kth.get(k)
            bound = (found.kth_largest(k) if kth is None else kth) * weight
            if bound > floor:
                floor = bound
    else:
        sample = summed[:: max(1, space // max(SAMPLE_PER_RESULT * k, SAMPLE_MIN))].copy()
        if len(sample) > k:
            sample.partition(len(sample) - k)
            floor = sample[len(sample) - k]
    sections = (summed >= floor).nonzero()[0] if floor > 0 else summed.nonzero()[0]
    return _ranked(sections, summed[sections], k, order)


def _allowed(sections: Any, scores: Any, allowed: Collection[int]) -> tuple[Any, Any]:
    """The sections ``allowed`` holds, with their scores (a ``Mask`` read by numpy, any other
    collection asked one by one)."""
    np = _numpy
    if isinstance(allowed, Mask):
        keep = np.frombuffer(allowed, dtype=np.uint8)[sections] != 0
    else:
        keep = np.fromiter(map(allowed.__contains__, sections.tolist()), bool, len(sections))
    return sections[keep], scores[keep]


def _ranked(
    sections: Any, scores: Any, k: int, lists: list[tuple[float, int, _List, float]]
) -> list[tuple[int, float]]:
    """The k best (section, score) of these, best first; equal scores by the first list in
    query order holding the section, then by section id — the pure path's order."""
    np = _numpy
    n = len(scores)
    if n > max(4 * k, 400):  # the k best and the k-th's ties only: cheaper than sorting all
        kth = np.partition(scores, n - k)[n - k]
        keep = scores >= kth
        sections, scores = sections[keep], scores[keep]
        n = len(scores)
    order = scores.argsort()
    top = order[: n - k - 1 : -1] if n > k else order[::-1]
    values = scores[top].tolist()
    if not values:
        return []
    if len(set(values)) == len(values) and (
        n == len(values) or scores[order[n - k - 1]] < values[-1]
    ):
        return list(zip(sections[top].tolist(), values, strict=True))
    tied = (scores >= values[-1]).nonzero()[0]  # every section scoring at least the k-th
    sections, values = sections[tied], scores[tied].tolist()
    first = np.full(len(sections), len(lists), dtype=np.intp)
    # the lowest query-order rank holding a section is set last
    for _, rank, found, _ in sorted(lists, key=_RANK, reverse=True):
        held = found.ids
        at = np.minimum(np.searchsorted(held, sections), len(held) - 1)
        first[held[at] == sections] = rank
    keyed = sorted(zip(values, first.tolist(), sections.tolist(), strict=True), key=_tie_key)
    return [(section, value) for value, _, section in keyed[:k]]


def _tie_key(item: tuple[float, int, int]) -> tuple[float, int, int]:
    return (-item[0], item[1], item[2])
