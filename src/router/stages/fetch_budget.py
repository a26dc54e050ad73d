"""Stage helper — which query terms' posting lists one query may fetch (the fetch budget).

Why: a posting list is read whole (its binary searches need every section number), and at a
million sections a common word's list holds hundreds of thousands of postings, 6 bytes each.
Measured in the 1M Worker (bench/README.md, "session 8"): queries of four or five common words
fetched up to 11 MiB of shards at once, and a wasm heap keeps that peak and fragments around it
— the heap grew from 75 to 108 MiB on exactly those queries, while every query fetching under
6 MiB left it at 75. So a query fetches the lists of its rarest terms first, as long as their
postings fit ``RetrievalBudget.max_fetched_postings``; the commonest terms — those whose idf is
the lowest, and so the least able to change a ranking — are left out of BM25, and the trace
says which (``bm25.truncated``, ``bm25.terms_left_out``). The rarest term is always kept, so a
query is never left with nothing to rank. Knowledge bases up to hundreds of thousands of
sections never reach the default (SciFact's longest query holds about 50,000 postings).
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
