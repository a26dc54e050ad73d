"""Stage — keyword index (PRD §8): keyword phrase → documents, sections and wikilink targets.

Why besides BM25: authors' keywords, aliases, titles, headings and wikilink labels are curated
names of a document or section; when a whole phrase appears in the question it points at that
target directly, whatever the BM25 statistics say. Built once per partition, lazily.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from router.package.view import PackageView, ViewPart

__all__ = ["KeywordEntry", "KeywordIndex", "keyword_matches"]

# Curated names first: an author's keyword or alias beats a title, a heading or a link label.
_KIND_RANK = {"keyword": 0, "alias": 0, "title": 1, "heading": 2, "link": 3}


@dataclass(frozen=True, slots=True)
class KeywordEntry:
    terms: frozenset[str]
    section: int
    kind: str


class KeywordIndex:
    """Inverted index from each term to the phrases (entries) that contain it, for the documents
    and sections of one partition (a layer of ``PackageView.layers``)."""

    def __init__(self, package: PackageView, part: ViewPart) -> None:
        self.by_term: dict[str, list[KeywordEntry]] = {}
        # One entry per (phrase, section): a document's title is usually its first heading too,
        # and SciFact's 5k duplicates cost 7 MiB of an isolate. Curated kinds are added first,
        # so the entry kept has the best kind.
        self._seen: set[tuple[frozenset[str], int]] | None = set()
        analyze = package.analyzer.terms
        for doc_index in part.doc_indices():
            doc = package.documents[doc_index]
            first = package.first_section(doc_index)
            for kind, phrases in (
                ("keyword", doc.keywords),
                ("alias", doc.aliases),
                ("title", [doc.title]),
            ):
                for phrase in phrases:
                    self._add(analyze(phrase), first, kind)
        for index in part.section_indices():
            section = package.sections[index]
            self._add(analyze(section.heading), index, "heading")
            for link in section.links:
                target = package.target_section(link.target)
                if target is not None and link.label and link.label != link.target:
                    self._add(analyze(link.label), target, "link")
        self._seen = None  # only needed while building

    def _add(self, terms: Sequence[str], section: int, kind: str) -> None:
        key = frozenset(terms)
        if not key or self._seen is None or (key, section) in self._seen:
            return
        self._seen.add((key, section))
        entry = KeywordEntry(key, section, kind)
        for term in key:
            self.by_term.setdefault(term, []).append(entry)


def keyword_matches(
    layers: Sequence[KeywordIndex], terms: Sequence[str], allowed: frozenset[int] | None
) -> list[tuple[int, float]]:
    """Sections whose whole keyword phrase is in the question, longest phrase first.

    Score = share of the question's distinct terms the phrase explains (0..1].
    """
    distinct = set(terms)
    if not distinct:
        return []
    best: dict[int, tuple[float, int]] = {}
    seen: set[int] = set()
    entries = (e for index in layers for term in distinct for e in index.by_term.get(term, ()))
    for entry in entries:
        if id(entry) in seen:
            continue
        seen.add(id(entry))
        if not entry.terms <= distinct:
            continue
        if allowed is not None and entry.section not in allowed:
            continue
        score = len(entry.terms) / len(distinct)
        rank = _KIND_RANK[entry.kind]
        found = best.get(entry.section)
        if found is None or (score, -rank) > (found[0], -found[1]):
            best[entry.section] = (score, rank)
    ordered = sorted(best.items(), key=lambda item: (-item[1][0], item[1][1], item[0]))
    return [(section, score) for section, (score, _) in ordered]
