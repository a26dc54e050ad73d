"""BM25 over the compiled impacts, in pure Python (no numpy; runs in the Worker).

Why this shape: the build stored each (term, section) saturated term frequency, so a query is a
sum of posting lists, each weighted by the term's IDF over the partitions in view (computed here,
per query, docs/adr/0010). Each query token counts once per occurrence, exactly like bm25s, so the
top-k ids and scores equal bm25s's (tests/comparison/test_bm25_equivalence.py).

The served path (exact dynamic pruning within a postings budget) is ``router.ranking.pruning``;
this module holds the exhaustive scoring it must equal, and the pieces both share.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from math import log
from operator import itemgetter
from typing import TYPE_CHECKING

from router.package.format.fields import BM25F_BLOCK
from router.package.format.postings import Postings

if TYPE_CHECKING:
    from router.package.stores.shards import Loaded
    from router.package.view import PackageView

__all__ = [
    "ACCUMULATE_STEP",
    "QueryList",
    "accumulate",
    "block_lists",
    "block_weights",
    "bm25_method",
    "idf",
    "lists_idf",
    "max_impact",
    "query_lists",
    "rarest_idf",
    "specificity",
    "top_k",
    "weighted_scores",
]

_SCORE = itemgetter(1)

QueryList = tuple[Postings, int, float]
"""One posting list a query reads: (block, term id in it, weight). The weight is what each
stored (quantized) impact is multiplied by: the query's count of the term × the field weight ×
the IDF × the block's quantization step."""


def idf(method: str, sections: int, df: int) -> float:
    """BM25's inverse document frequency, as bm25s computes it for ``method``.

    ``sections`` and ``df`` are those of the partitions a query reads together (docs/adr/0010):
    the shared partition's plus the caller's own, never another tenant's.
    """
    if df <= 0:
        return 0.0
    if method == "atire":
        return log(sections / df)
    inner = (sections - df + 0.5) / (df + 0.5)
    if method == "robertson":
        return log(max(inner, 1.0))
    return log(1 + inner)  # lucene


def lists_idf(
    found: Sequence[tuple[Postings, int]], dead: int, method: str, sections: int
) -> float:
    """The IDF of a term over its lists in one block (one per partition in view holding it):
    its document frequency is their postings, less the ``dead`` ones a delta tombstones."""
    df = sum(p.list_length(t) for p, t in found)  # a head page's full list counts
    return idf(method, sections, max(1, df - dead))


def specificity(view: PackageView, terms: Iterable[str]) -> dict[str, float]:
    """Each distinct query term's specificity: its idf in the caller's view (the partitions it
    reads, lucene's formula whatever the package's method, so it is never negative), so a
    question's specific concept ("estagiário") outweighs its common words ("empresa", "prazo").
    A term the view does not know weighs as the rarest it knows, one section's (``rarest_idf``):
    as specific as a concept can be here, not more, so that in a small knowledge base, where
    every known word is common, an unknown one does not outweigh the whole question. The terms
    must have been read (``PackageView.knows``)."""
    total = max(1, view.section_total)
    weights = {}
    for term in dict.fromkeys(terms):
        df = max(1, view.document_frequency(term)) if view.knows(term) else 1
        weights[term] = log(1.0 + (total - df + 0.5) / (df + 0.5))
    return weights


def rarest_idf(view: PackageView) -> float:
    """The specificity of a term one section in view holds (or none): ``specificity``'s top."""
    total = max(1, view.section_total)
    return log(1.0 + (total - 0.5) / 1.5)


def bm25_method(view: PackageView) -> str:
    """The BM25 variant the package was built with (its IDF is computed per query)."""
    return str(view.manifest.bm25.get("method", "lucene"))


def query_lists(
    view: PackageView,
    terms: Sequence[str],
    weights: Mapping[str, float],
    method: str,
    loaded: Loaded | None = None,
    term_weights: Mapping[str, float] | None = None,
) -> list[QueryList]:
    """The posting lists of a query over a view: per weighted block, per distinct term (counted
    as often as the query repeats it, bm25s semantics), one list per partition holding it; from
    the query's ``loaded`` shards when given (``ShardReads.shards``), else the isolate's cache.
    ``term_weights`` scales some terms (a synonym the corrective expansion added counts less
    than the user's own word); a term not in it weighs 1."""
    lists: list[QueryList] = []
    counts = Counter(terms)
    scale = term_weights or {}
    sections = view.section_total
    for name, weight in weights.items():
        for term, count in counts.items():
            found = view.posting_lists(term, name, loaded)
            if not found:
                continue
            dead = view.dead_frequency(term, name)  # a delta's old copies
            w = count * weight * lists_idf(found, dead, method, sections) * scale.get(term, 1.0)
            lists.extend((postings, term_id, w * postings.scale) for postings, term_id in found)
    return lists


def block_lists(
    blocks: Mapping[str, Postings], ids: Sequence[int], weights: Mapping[str, float]
) -> list[QueryList]:
    """The lists of term ids over named blocks, impacts taken as stored (no IDF): the scorer's
    own tests and benchmarks drive it this way."""
    counts = Counter(ids)
    return [
        (blocks[name], term, count * weight * blocks[name].scale)
        for name, weight in weights.items()
        for term, count in counts.items()
    ]


def max_impact(postings: Postings, term: int, cache: dict[tuple[int, int], float]) -> float:
    """Largest impact of a term in any section of one block (its upper bound): stored with a
    shard, else computed once and memoised."""
    if postings.maxima is not None:
        return postings.maxima[term]
    key = (id(postings), term)
    found = cache.get(key)
    if found is None:
        start, end = postings.indptr[term], postings.indptr[term + 1]
        found = max(postings.scores[start:end], default=0.0)
        cache[key] = found
    return found


# --- exhaustive scoring (the reference the pruned scorer is tested against) ----------------------


def block_weights(
    block_names: Iterable[str], field_weights: Mapping[str, float]
) -> dict[str, float]:
    """Weight of each posting block: the field's weight, or 1 for a compiled BM25F block."""
    weights = {
        name: 1.0 if name == BM25F_BLOCK else float(field_weights.get(name, 0.0))
        for name in block_names
    }
    return {name: w for name, w in weights.items() if w > 0}


def weighted_scores(lists: Sequence[QueryList]) -> dict[int, float]:
    """Σ over the lists of weight × impact, per section (every posting read)."""
    acc: dict[int, float] = {}
    for postings, term, weight in lists:
        accumulate(postings, postings.indptr[term], postings.indptr[term + 1], weight, acc)
    return acc


def top_k(
    scores: dict[int, float], k: int, allowed: Collection[int] | None = None
) -> list[tuple[int, float]]:
    """The k best (section, score) pairs, best first."""
    items = (
        scores.items() if allowed is None else [(s, v) for s, v in scores.items() if s in allowed]
    )
    return heapq.nlargest(k, items, key=_SCORE)


ACCUMULATE_STEP = 8192
"""Postings turned into Python lists at a time (bounds the transient memory of a long list)."""


def accumulate(
    postings: Postings, start: int, end: int, weight: float, acc: dict[int, float]
) -> None:
    """Add weight × the impacts of postings [start, end) to ``acc`` (the measured fastest form),
    ``ACCUMULATE_STEP`` postings at a time: a long list turned into Python lists at once cost
    ≈ 60 bytes a posting of transient memory (36 MB for a 600k-posting list at 1M sections), and
    a wasm heap keeps its peak."""
    for low in range(start, end, ACCUMULATE_STEP):
        high = min(end, low + ACCUMULATE_STEP)
        sections = postings.section_ids[low:high].tolist()  # type: ignore[attr-defined]
        impacts = postings.scores[low:high].tolist()  # type: ignore[attr-defined]
        if weight != 1:
            impacts = [impact * weight for impact in impacts]
        if not acc:
            acc.update(zip(sections, impacts, strict=True))
            continue
        get = acc.get
        for section, impact in zip(sections, impacts, strict=True):
            acc[section] = get(section, 0.0) + impact
