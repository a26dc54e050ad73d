"""Stage — contextual filters applied before ranking (PRD §23, §37, §38).

Why before ranking: a document another tenant owns, a deprecated page or a rule outside its
validity window must never compete for a place in the results, so the candidate set is cut first.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise

from router.knowledge.model import Document
from router.package.doc_columns import day_number
from router.package.view import PackageView

__all__ = ["Mask", "Visibility", "visible_documents", "visible_sections"]

VISIBILITY_CACHE_BYTES = 8 * 1024 * 1024
"""Bytes of masks kept per view; one mask costs a byte per section and per document."""
VISIBILITY_CACHE_ENTRIES = 256
"""At most this many distinct (day, deprecation) visibilities per view, however small."""


class Mask(bytes):
    """One byte per item, 1 where it may be seen: ``item in mask`` is a C-level index, faster
    than a frozenset's lookup and a byte per item however many are hidden."""

    __slots__ = ()
    __contains__ = bytes.__getitem__  # type: ignore[assignment]


@dataclass(frozen=True)
class Visibility:
    """Who asks and when: the inputs of every filter."""

    tenant: str | None
    day: str  # ISO date the query is about
    include_deprecated: bool = False

    def admits(self, doc: Document) -> bool:
        if not doc.visible_to(self.tenant):
            return False
        if doc.deprecated and not self.include_deprecated:
            return False
        return doc.valid_on(self.day)

    @cached_property
    def day_number(self) -> int:
        return day_number(self.day)


@dataclass(frozen=True)
class _Masks:
    documents: Mask
    sections: Mask | None  # None: every section is visible


def visible_documents(package: PackageView, visibility: Visibility) -> Mask:
    """The documents this query may see, as a mask over the view's documents. The view holds
    only documents its caller may see (the shared partition and the caller's own), so the
    filter left is the day and deprecation, read from the resident columns."""
    return _masks(package, visibility).documents


def visible_sections(package: PackageView, visibility: Visibility) -> Mask | None:
    """The sections the query may see, or None when it may see every section."""
    return _masks(package, visibility).sections


def _masks(package: PackageView, visibility: Visibility) -> _Masks:
    key = (visibility.day, visibility.include_deprecated)
    cache = package.visible_docs
    found = cache.get(key)
    if found is None:
        found = _build_masks(package, visibility)
        per_entry = max(1, package.num_sections + package.doc_count)
        if len(cache) >= min(VISIBILITY_CACHE_ENTRIES, VISIBILITY_CACHE_BYTES // per_entry):
            cache.clear()
        cache[key] = found
    return found


def _build_masks(package: PackageView, visibility: Visibility) -> _Masks:
    docs = bytearray()
    sections = bytearray()
    for part in package.parts:
        columns = part.partition.columns
        shown = bytes(columns.visible(visibility.day_number, visibility.include_deprecated))
        docs += shown
        first = columns.first
        runs = zip(shown, pairwise(first), strict=True)
        sections += b"".join(_RUNS[v] * (b - a) for v, (a, b) in runs)
    return _Masks(Mask(docs), None if all(docs) else Mask(sections))


_RUNS = (b"\x00", b"\x01")
