"""The keyword phrases of a partition, compiled and filed under one of their terms each.

Why compiled (docs/adr/0010): the keyword stage matches whole curated phrases — keywords,
aliases, titles, headings, wikilink labels — against the question. Built at query time from the
catalog, its inverted index cost ~70 MiB at 100k sections; compiled, it is integer arrays over the
partition's own term ids, read without building anything.

An entry is one (phrase, section) pair: its distinct terms, the section it points at (in view
numbering: a tenant partition's own sections from ``first_section``, the shared partition's as
they are), and its kind. Curated kinds come first, and a phrase already entered for a section is
not entered again, so the kind kept is the best one.

Why filed under one term: a phrase matches only when every one of its terms is in the question,
so the query finds it through any one of them. Each is filed under its term that is in the fewest
phrases (the lowest id among equals), and travels in that term's vocabulary chunk
(``router.package.format.vocabulary``): a query reads only the phrases of its own terms.

Why at most ``MAX_PHRASE_TARGETS`` sections a phrase: a phrase shared by more sections of a
partition (a heading every document has, a word every title carries) names none of them. The
stage would tie them all and keep the lowest section numbers, which is arbitrary; BM25 ranks such
a common word instead. At a million sections a single-word heading could be filed for hundreds
of thousands of sections: one query read 30 MB of phrase entries, and the stage built a score
for each.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from router.knowledge.model import Document
from router.package.format.vocabulary import KeywordEntry

__all__ = ["KEYWORD_KINDS", "MAX_PHRASE_TARGETS", "filed_keywords"]

KEYWORD_KINDS = ("keyword", "alias", "title", "heading", "link")

MAX_PHRASE_TARGETS = 64
"""A phrase pointing at more sections of one partition is not filed (module docstring); the
sample knowledge's most shared phrase points at 9."""


def filed_keywords(
    documents: Sequence[Document],
    analyze: Callable[[str], list[str]],
    vocabulary: Mapping[str, int],
    first_section: int,
    target_section: Callable[[str], int | None],
) -> list[list[KeywordEntry]]:
    """The phrases filed under each term id of ``vocabulary``; ``target_section(id)`` is the
    view section a wikilink target names (this partition's, or the shared partition's), or None."""
    entries: list[KeywordEntry] = []
    # (term ids, section) of the entries: the ids stand for the phrase's distinct terms (a set
    # of strings per entry was ≈ 0.2 KB of a large build's peak), and share the entry's tuple
    seen: set[tuple[tuple[int, ...], int]] = set()

    def add(phrase: str, section: int, kind: str) -> None:
        words = set(analyze(phrase))
        if not words or not all(t in vocabulary for t in words):
            return  # (a term the partition does not index can never be asked of it)
        terms = tuple(sorted(vocabulary[t] for t in words))
        if (terms, section) in seen:
            return
        seen.add((terms, section))
        entries.append((terms, section, KEYWORD_KINDS.index(kind)))

    section = first_section
    for doc in documents:
        for kind, phrases in (
            ("keyword", doc.keywords),
            ("alias", doc.aliases),
            ("title", [doc.title]),
        ):
            for phrase in phrases:
                add(phrase, section, kind)
        section += len(doc.sections)
    section = first_section
    for doc in documents:
        for part in doc.sections:
            add(part.heading, section, "heading")
            for link in part.links:
                target = target_section(link.target)
                if target is not None and link.label and link.label != link.target:
                    add(link.label, target, "link")
            section += 1
    seen.clear()  # not needed past here: the rest is built with the entries alone
    targets = Counter(terms for terms, _, _ in entries)
    entries = [entry for entry in entries if targets[entry[0]] <= MAX_PHRASE_TARGETS]
    phrases_of = [0] * len(vocabulary)
    for terms, _, _ in entries:
        for term in terms:
            phrases_of[term] += 1
    filed: list[list[KeywordEntry]] = [[] for _ in range(len(vocabulary))]
    for entry in entries:
        filed[min(entry[0], key=lambda term: (phrases_of[term], term))].append(entry)
    return filed
