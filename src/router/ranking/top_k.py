"""The ranking's front door: the lexical stage's BM25 top-k, whichever backend computes it.

Why one entry point: the Worker has no numpy (ADR 0001), so exact dynamic pruning in pure Python
(``ranking.pruning``) is its path; CPython, where numpy imports, sums the same postings in C
(``ranking.numpy_backend``) with the same ranking, floats included (ADR 0011, addendum). A
stage asks here and never chooses; the exhaustive reference (``ranking.bm25.top_k``) and the
threshold algorithm (``ranking.threshold``) serve the tests and the pruned path's long lists.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from router.ranking.bm25 import QueryList
from router.ranking.numpy_backend import (
    PostingArrays,
    numpy_available,
    numpy_terms_top_k,
    numpy_top_k,
)
from router.ranking.pruning import weighted_top_k
from router.ranking.result import Ranking
from router.ranking.score_bounds import ScoreBounds
from router.trace import NO_DEADLINE, Deadline

__all__ = ["served_terms_top_k", "served_top_k"]


# The lexical stage's top k of a query's terms over a view. ``numpy_terms_top_k`` is already
# the served path in both runtimes: in CPython it finds the lists through the view's plans, and
# where numpy does not import (the Worker) it skips them and ranks ``query_lists`` with the pure
# scorer (``numpy_top_k`` falls back to ``weighted_top_k``): the same lists, weights and ranking.
served_terms_top_k = numpy_terms_top_k


def served_top_k(
    query: Sequence[QueryList],
    k: int,
    allowed: Collection[int] | None = None,
    *,
    bounds: ScoreBounds | None = None,
    max_postings: int | None = None,
    arrays: PostingArrays | None = None,
    deadline: Deadline = NO_DEADLINE,
) -> Ranking:
    """The lexical stage's top k: ``numpy_top_k`` where numpy imports, else ``weighted_top_k``
    (the same ranking either way, as long as the ``deadline`` does not stop the pure path)."""
    if numpy_available():
        return numpy_top_k(
            query,
            k,
            allowed,
            bounds=bounds,
            max_postings=max_postings,
            arrays=arrays,
            deadline=deadline,
        )
    return weighted_top_k(
        query, k, allowed, bounds=bounds, max_postings=max_postings, deadline=deadline
    )
