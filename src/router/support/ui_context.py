"""What the UI context (focus, page, tab) points at: the exact stage's deictic lookup and the
context boost read it alike (PRD §12)."""

from __future__ import annotations

from router.analysis.text import fold
from router.package.view import ExactTarget, PackageView
from router.results import ExactHit

__all__ = ["resolve_context"]


def resolve_context(
    package: PackageView, focus: str | None, page: str | None, tab: str | None
) -> list[ExactHit]:
    """What a deictic question ("explique este campo") points at: the focus, else page+tab."""
    if focus:
        targets = package.exact_targets(fold(focus))
        hits = [ExactHit(t, focus, "context") for t in targets if t.kind in ("document", "section")]
        if hits:
            return hits
    if not page:
        return []
    page_key, tab_key = fold(page), fold(tab) if tab else None
    return [
        ExactHit(ExactTarget("document", part.first_doc + doc), page, "context")
        for part in package.parts
        for doc in part.partition.columns.in_scope(page_key, tab_key)
    ]
