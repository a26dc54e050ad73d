"""Stage — contextual filters applied before ranking (PRD §23, §37, §38).

Why before ranking: a document another tenant owns, a deprecated page or a rule outside its
validity window must never compete for a place in the results, so the candidate set is cut first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from router.package.format.doc_columns import DocColumns
from router.package.view import PackageView
from router.results import Mask, Visibility, VisibleMasks

if TYPE_CHECKING:
    from router.package.partition import Partition

__all__ = [
    "visibility_masks",
    "visible_documents",
    "visible_sections",
]

VISIBILITY_CACHE_ENTRIES = 4
"""Distinct (day, deprecation) visibilities whose masks a partition keeps (most queries ask
about today; the masks cost a byte per section and per document each)."""


def visible_documents(package: PackageView, visibility: Visibility) -> Mask:
    """The documents this query may see, as a mask over the view's documents. The view holds
    only documents its caller may see (the shared partition and the caller's own), so the
    filter left is the day and deprecation, read from the resident columns."""
    return visibility_masks(package, visibility).documents


def visible_sections(package: PackageView, visibility: Visibility) -> Mask | None:
    """The sections the query may see, or None when it may see every section."""
    return visibility_masks(package, visibility).sections


def visibility_masks(package: PackageView, visibility: Visibility) -> VisibleMasks:
    """The view's masks: each partition's (built once per visibility and kept on the
    partition, so the shared partition's serve every view), joined for this view — once per
    query (``QueryState.masks``)."""
    parts = [_partition_masks(part.partition, visibility) for part in package.parts]
    if len(parts) == 1:
        return parts[0]
    if len(parts) > 2 or any(part.partition.amendments for part in package.parts):
        return _amended_masks(package, visibility, parts)  # deltas: a gap, tombstones
    docs = Mask(b"".join(p.documents for p in parts))
    if all(p.sections is None for p in parts):
        return VisibleMasks(docs, None)
    first = package.parts[1].partition.first_section
    sections = [
        p.sections if p.sections is not None else _RUNS[1] * n
        for p, n in zip(parts, (first, package.num_sections - first), strict=True)
    ]
    return VisibleMasks(docs, Mask(b"".join(sections)))


def _amended_masks(
    package: PackageView, visibility: Visibility, parts: list[VisibleMasks]
) -> VisibleMasks:
    """The masks of a view with deltas (docs/adr/0020): the gap between the caller's own
    partition and the deltas holds no section, and the tombstoned documents of the base
    partitions are hidden like deprecated ones. Kept on the view, per visibility."""
    key = (visibility.day, visibility.include_deprecated)
    cache: dict[tuple[str, bool], VisibleMasks] = package.derived.setdefault("visibility", {})
    found = cache.get(key)
    if found is not None:
        return found
    if len(cache) >= VISIBILITY_CACHE_ENTRIES:
        cache.clear()
    docs = bytearray(b"".join(p.documents for p in parts))
    sections = bytearray(package.num_sections)
    for part, masks in zip(package.parts, parts, strict=True):
        first, count = part.first_section, part.partition.section_count
        shown = masks.sections if masks.sections is not None else _RUNS[1] * count
        sections[first : first + count] = shown
    for doc in package.amended.documents:
        docs[doc] = 0
        hidden = package.doc_sections(doc)
        sections[hidden.start : hidden.stop] = bytes(len(hidden))
    found = cache[key] = VisibleMasks(Mask(docs), Mask(sections))
    return found


def _partition_masks(partition: Partition, visibility: Visibility) -> VisibleMasks:
    key = (visibility.day, visibility.include_deprecated)
    cache: dict[tuple[str, bool], VisibleMasks] = partition.derived.setdefault("visibility", {})
    found = cache.get(key)
    if found is None:
        if len(cache) >= VISIBILITY_CACHE_ENTRIES:
            cache.clear()
        found = cache[key] = _build_masks(partition.columns, visibility)
    return found


def _build_masks(columns: DocColumns, visibility: Visibility) -> VisibleMasks:
    """The partition's masks for one visibility. The section mask starts all visible and
    clears the hidden documents' ranges in place: only the result is allocated (at 1M
    sections, joining one piece per document cost 20 MB at once, and a wasm heap keeps it)."""
    shown = columns.visible(visibility.day_number, visibility.include_deprecated)
    hidden = shown.find(0)
    if hidden < 0:
        return VisibleMasks(Mask(shown), None)
    first = columns.first
    sections = bytearray(_RUNS[1]) * first[len(shown)]
    while hidden >= 0:
        start, end = first[hidden], first[hidden + 1]
        sections[start:end] = bytes(end - start)
        hidden = shown.find(0, hidden + 1)
    return VisibleMasks(Mask(shown), Mask(sections))


_RUNS = (b"\x00", b"\x01")
