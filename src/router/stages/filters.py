"""Stage — contextual filters applied before ranking (PRD §23, §37, §38).

Why before ranking: a document another tenant owns, a deprecated page or a rule outside its
validity window must never compete for a place in the results, so the candidate set is cut first.
"""

from __future__ import annotations

from dataclasses import dataclass

from router.knowledge.model import Document
from router.package.view import PackageView

__all__ = ["Visibility", "visible_documents", "visible_sections"]

# Distinct (tenant, day, flags) visibilities remembered per package before the memo is reset.
VISIBILITY_CACHE_ENTRIES = 256


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


def visible_documents(package: PackageView, visibility: Visibility) -> frozenset[int]:
    """Indices of the documents this query may see (cached per package and visibility)."""
    cache = package.visible_docs
    found = cache.get(visibility)
    if found is None:
        found = frozenset(i for i, d in enumerate(package.documents) if visibility.admits(d))
        if len(cache) > VISIBILITY_CACHE_ENTRIES:
            cache.clear()
        cache[visibility] = found
    return found


def visible_sections(package: PackageView, visibility: Visibility) -> frozenset[int] | None:
    """Section indices the query may see, or None when every section is visible."""
    docs = visible_documents(package, visibility)
    if len(docs) == len(package.documents):
        return None
    return frozenset(s for s, d in enumerate(package.section_doc) if d in docs)
