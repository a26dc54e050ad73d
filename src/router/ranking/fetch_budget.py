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
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from router.package.view import PackageView

__all__ = ["within_fetch_budget"]


def within_fetch_budget(
    package: PackageView, terms: Sequence[str], max_postings: int
) -> tuple[list[str], list[str]]:
    """(the query's terms to score, in order and with their repeats; the terms left out, the
    commonest first). A term's cost is its postings in every block of every partition in view
    (its document frequency, the largest list over the blocks, times the blocks: a bound)."""
    blocks = max(1, len(package.block_names))
    known = sorted(
        {t for t in terms if package.knows(t)}, key=lambda t: (package.document_frequency(t), t)
    )
    spent = 0
    for rank, term in enumerate(known):
        spent += package.document_frequency(term) * blocks
        if rank and spent > max_postings:
            left_out = list(reversed(known[rank:]))
            return [t for t in terms if t not in left_out], left_out
    return list(terms), []
