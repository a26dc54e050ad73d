"""Keyword index (PRD §8): keyword phrase → documents, sections and wikilink targets.

Why besides BM25: authors' keywords, aliases, titles, headings and wikilink labels are curated
names of a document or section; when a whole phrase appears in the question it points at that
target directly, whatever the BM25 statistics say. Compiled per partition at build time
(``router.package.format.keywords``) and read with the query's terms.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from router.config import DEFAULT_MAX_KEYWORD_PHRASES
from router.package.format.keywords import KEYWORD_KINDS
from router.package.view import PackageView
from router.trace import WorkLimit

__all__ = ["keyword_matches"]

# Curated names first: an author's keyword or alias beats a title, a heading or a link label.
_KIND_RANK = {"keyword": 0, "alias": 0, "title": 1, "heading": 2, "link": 3}
_RANKS = [_KIND_RANK[kind] for kind in KEYWORD_KINDS]


def keyword_matches(
    package: PackageView,
    terms: Sequence[str],
    allowed: Collection[int] | None,
    limit: WorkLimit | None = None,
) -> list[tuple[int, float]]:
    """Sections whose whole keyword phrase is in the question, longest phrase first.

    Score = share of the question's distinct terms the phrase explains (0..1]. The phrases are
    those filed under the question's terms in each partition's vocabulary chunks (loaded for
    this query); a phrase is filed under one of its terms, so each is met once. ``limit``: the
    phrases examined (``RetrievalBudget.max_keyword_phrases``), counted per term in sorted
    order; past it, the terms left are not examined (``limit.truncated``).
    """
    distinct = sorted(set(terms))
    if not distinct:
        return []
    limit = limit or WorkLimit(DEFAULT_MAX_KEYWORD_PHRASES)
    best: dict[int, tuple[float, int]] = {}
    for index in range(len(package.parts)):
        entries = [package.term_entries(t)[index] for t in distinct]
        asked = {entry.id: entry for entry in entries if entry is not None}
        for entry in asked.values():
            if not limit.take(len(entry.keywords)):
                break
            for phrase, section, kind in entry.keywords:
                if not all(t in asked for t in phrase):
                    continue
                if allowed is not None and section not in allowed:
                    continue
                score = len(phrase) / len(distinct)
                rank = _RANKS[kind]
                found = best.get(section)
                if found is None or (score, -rank) > (found[0], -found[1]):
                    best[section] = (score, rank)
    ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))
    return [(section, score) for section, (score, _) in ordered]
