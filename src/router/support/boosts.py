"""Trust ordering and UI-context boost (PRD §12, §37), applied to each source's scores.

Why on the scores before fusion: filters already removed what the query may not see (tenant,
deprecated, validity); what remains is re-weighted — official > verified > generated > draft — and
sections of the page, tab or focus the user is looking at are lifted by ``context_boost``. Applied
to rank-fused scores instead, a 0.85 factor would outweigh any difference between ranks (RRF
scores of neighbouring ranks differ by ~2%), so the boost acts where score gaps are meaningful.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from router.package.view import PackageView
from router.support.ui_context import resolve_context

__all__ = ["boost_factors", "boosted", "context_targets"]


def context_targets(
    package: PackageView, page: str | None, tab: str | None, focus: str | None
) -> set[int]:
    """Sections of what the UI context names — the focused id, else the documents whose
    ``page``/``tab`` scope matches (the same resolution as the exact stage's deictic lookup)."""
    found: set[int] = set()
    for hit in resolve_context(package, focus, page, tab):
        if hit.target.section_index is not None:
            found.add(hit.target.section_index)
        else:
            found.update(package.doc_sections(hit.target.doc_index))
    return found


def boost_factors(
    package: PackageView,
    sections: Sequence[int],
    trust_weights: Mapping[str, float],
    in_context: set[int],
    context_boost: float,
) -> dict[int, float]:
    """Multiplier per section: trust weight × (1 + boost inside the UI context)."""
    factors = {}
    for section in sections:
        factor = trust_weights.get(package.doc_trust(package.section_doc[section]), 1.0)
        if section in in_context:
            factor *= 1.0 + context_boost
        factors[section] = factor
    return factors


def boosted(
    ranked: Sequence[tuple[int, float]], factors: Mapping[int, float]
) -> list[tuple[int, float]]:
    """The source's list re-scored by the factors and re-sorted (best first)."""
    rescored = [(section, score * factors.get(section, 1.0)) for section, score in ranked]
    return sorted(rescored, key=lambda item: (-item[1], item[0]))
