"""Stage — BM25 over the compiled impacts, in pure Python (no numpy; runs in the Worker).

Why this shape: bm25s already computed each (term, section) impact at build time, so a query is
a sum of posting lists. Each query token counts once per occurrence, exactly like bm25s, so the
top-k ids and scores equal bm25s's (tests/comparison/test_bm25_equivalence.py).

The served path (exact dynamic pruning within a postings budget) is ``router.stages.bm25_pruning``;
this module holds the exhaustive scoring it must equal, and the pieces both share.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from operator import itemgetter

from router.package.fields import BM25F_BLOCK
from router.package.postings import Postings

__all__ = [
    "accumulate",
    "block_weights",
    "bm25_scores",
    "max_impact",
    "term_ids",
    "top_k",
    "weighted_scores",
]

_SCORE = itemgetter(1)


def term_ids(terms: Sequence[str], vocabulary: dict[str, int]) -> list[int]:
    """Ids of the query terms known to the index, duplicates kept (bm25s semantics)."""
    return [vocabulary[t] for t in terms if t in vocabulary]


def max_impact(postings: Postings, term: int, cache: dict[tuple[int, int], float]) -> float:
    """Largest impact of a term in any section of one block (its upper bound), memoised."""
    key = (id(postings), term)
    found = cache.get(key)
    if found is None:
        start, end = postings.indptr[term], postings.indptr[term + 1]
        found = max(postings.scores[start:end], default=0.0)
        cache[key] = found
    return found


# --- exhaustive scoring (the reference the pruned scorer is tested against) ----------------------


def bm25_scores(postings: Postings, ids: Sequence[int]) -> dict[int, float]:
    """Section → summed impact for every section containing at least one query term."""
    acc: dict[int, float] = {}
    indptr = postings.indptr
    for term, count in Counter(ids).items():
        accumulate(postings, indptr[term], indptr[term + 1], count, acc)
    return acc


def block_weights(
    blocks: Mapping[str, Postings], field_weights: Mapping[str, float]
) -> dict[str, float]:
    """Weight of each posting block: the field's weight, or 1 for a compiled BM25F block."""
    weights = {
        name: 1.0 if name == BM25F_BLOCK else float(field_weights.get(name, 0.0)) for name in blocks
    }
    return {name: w for name, w in weights.items() if w > 0}


def weighted_scores(
    blocks: Mapping[str, Postings], ids: Sequence[int], weights: Mapping[str, float]
) -> dict[int, float]:
    """Σ over fields of weight × field BM25 (per-field scoring, PRD §11), per section."""
    acc: dict[int, float] = {}
    counts = Counter(ids)
    for name, weight in weights.items():
        postings = blocks[name]
        indptr = postings.indptr
        for term, count in counts.items():
            accumulate(postings, indptr[term], indptr[term + 1], count * weight, acc)
    return acc


def top_k(
    scores: dict[int, float], k: int, allowed: Collection[int] | None = None
) -> list[tuple[int, float]]:
    """The k best (section, score) pairs, best first."""
    items = (
        scores.items() if allowed is None else [(s, v) for s, v in scores.items() if s in allowed]
    )
    return heapq.nlargest(k, items, key=_SCORE)


def accumulate(
    postings: Postings, start: int, end: int, weight: float, acc: dict[int, float]
) -> None:
    """Add weight × the impacts of postings [start, end) to ``acc`` (the measured fastest form)."""
    if start == end:
        return
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
