"""Upper bounds of posting lists' impacts, memoised per package: what lets pruning skip sections.

Why apart from the search (``ranking.maxscore``): the bounds outlive a query — the lexical stage
keeps one ``ScoreBounds`` per package (``PackageView.shared_memo``) and the numpy backend asks it
for list maxima — while a search lives for one query. A long list's per-section bytes hold its
impacts quantised upwards on ``LEVELS`` levels, so a byte times the list's step bounds an impact.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from router.package.format.postings import Postings
from router.package.stores.budget import ReaderBudget
from router.ranking.bm25 import ACCUMULATE_STEP, max_impact

__all__ = ["LEVELS", "LONG_LIST_FRACTION", "ScoreBounds"]


LONG_LIST_FRACTION = 32
"""A posting list is long — worth a byte per section of bounds — when it holds at least 1/32 of
the block's sections."""

LEVELS = 254.0  # quantised impacts are 1..255, 0 meaning "absent"


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
        scale = LEVELS / self.maximum(postings, term)
        for low in range(start, end, ACCUMULATE_STEP):  # in steps: bounded transient memory
            high = min(end, low + ACCUMULATE_STEP)
            sections = postings.section_ids[low:high].tolist()  # type: ignore[attr-defined]
            impacts = postings.scores[low:high].tolist()  # type: ignore[attr-defined]
            for section, impact in zip(sections, impacts, strict=True):
                levels[section] = int(impact * scale) + 1
        found = self._sections[(postings.key or id(postings), term)] = bytes(levels)
        self._bytes += size
        return found
