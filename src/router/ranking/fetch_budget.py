"""Which query terms' posting lists one query may fetch (the fetch budget).

Why: a posting list is read whole (its binary searches need every section number), and at a
million sections a common word's list holds hundreds of thousands of postings, 6 bytes each:
the 1M benchmark's largest query read 11.9 MB of shards. What one request may cost must be
bounded whatever it asks, so a query fetches the lists of its rarest terms first, as long as
their postings fit ``RetrievalBudget.max_fetched_postings`` (sized to what the Worker's shard
arena holds, ``router.package.stores.arena``); the commonest terms — those whose idf is the lowest,
and
so the least able to change a ranking — are left out of BM25, and the trace says which
(``bm25.truncated``, ``bm25.terms_left_out``). The rarest term is always kept, so a query is
never left with nothing to rank. Measured at 1M sections: a budget of 600,000 postings cut 273
of 959 queries (top-10 overlap with the exact ranking 0.76), and did not keep the Worker's heap
down — the creep came from allocating multi-MB blocks, not from their size (the arena's
docstring) — so the default is a bound on the pathological, not a memory knob.

Long lists (those stored with a head page, ``router.package.format.shards``) have a budget of
their own, ``RetrievalBudget.max_whole_long_postings``: past it, a common term is not left out
but read as its head page, its largest impacts. It still scores the sections it weighs most in
(BM25's length normalisation gives them to the short sections the top k is made of), and a query
of common words at a million sections fetches a few pages of 192 KiB instead of lists of several
MB (docs/adr/0029). The ranking is then the exact one of the lists as read: a section outside a
page misses that term's share, at most the page's smallest impact (``bm25.head_pages`` in the
trace names those terms).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from router.package.format.shards import HEAD_PAGE_POSTINGS

if TYPE_CHECKING:
    from router.package.view import PackageView

__all__ = ["FetchPlan", "within_fetch_budget"]


@dataclass(frozen=True)
class FetchPlan:
    """Which of a query's terms are read whole, which as their head page, which not at all."""

    scored: list[str]  # the query's terms to score, in order and with their repeats
    heads: list[str]  # those of them read as their head page (long lists past their budget)
    left_out: list[str]  # the commonest first


def within_fetch_budget(
    package: PackageView, terms: Sequence[str], max_postings: int, max_whole_long: int | None = None
) -> FetchPlan:
    """The query's fetch plan, rarest terms first. A term's cost is its postings in every block
    of every partition in view (its document frequency, the largest list over the blocks, times
    the blocks: a bound); a long list past ``max_whole_long`` costs its head page instead."""
    blocks = max(1, len(package.block_names))
    known = sorted(
        {t for t in terms if package.knows(t)}, key=lambda t: (package.document_frequency(t), t)
    )
    spent = long_spent = 0
    heads: list[str] = []
    for rank, term in enumerate(known):
        cost = package.document_frequency(term) * blocks
        if max_whole_long is not None and package.has_head_page(term):
            if long_spent + cost > max_whole_long:
                heads.append(term)
                cost = min(cost, HEAD_PAGE_POSTINGS * blocks)
            else:
                long_spent += cost
        spent += cost
        if rank and spent > max_postings:
            left_out = list(reversed(known[rank:]))
            kept = [t for t in terms if t not in left_out]
            return FetchPlan(kept, [t for t in heads if t not in left_out], left_out)
    return FetchPlan(list(terms), heads, [])
