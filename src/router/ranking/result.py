"""What a top-k returns: the k best sections, and whether a budget or the deadline cut it short.

Why a module of its own: every scorer returns it — the pruned path (``ranking.pruning`` and the
searches it runs), the numpy backend and the front door (``ranking.top_k``) — and none of them
should import another only for its result type.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Ranking"]


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
