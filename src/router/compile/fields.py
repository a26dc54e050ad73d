"""Weighted fields of a section (PRD §11) and their BM25 postings: per field, or one BM25F block.

Why both: per-field scoring keeps one posting block per field so the weights stay query-time
configuration; BM25F folds the weights into the term frequencies before saturation, which is
better founded but bakes the weights into the package. docs/adr/0005 records the measured choice.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from router.knowledge.model import Document, Section
from router.knowledge.parser import strip_wikilinks
from router.package.format.fields import BM25F_BLOCK, DEFAULT_FIELD_WEIGHTS, FIELD_NAMES
from router.package.format.shards import CscBlock  # indptr over the vocabulary, ids, impacts

__all__ = [
    "BM25F_BLOCK",
    "DEFAULT_FIELD_WEIGHTS",
    "FIELD_NAMES",
    "CscBlock",
    "SectionPostings",
    "bm25_block",
    "bm25f_block",
    "section_fields",
    "weighted_lengths",
]


def section_fields(doc: Document, section: Section, first: bool) -> dict[str, str]:
    """The text of each field of a section; document-level fields go to its first section only.

    The title belongs to every section (it names what the section is part of); description,
    keywords and aliases describe the document as a whole, so only its first section carries them.

    Questions (authored ``questions:``, or generated per section) join the description field.
    Why there: a question says what the section is about in a user's words, which is the
    description's role, at the description's weight — a paraphrase that matches a question still
    ranks below a section that uses the query's own words in its heading or keywords (a
    separate field would change the index format, docs/index-format.md, for one weight). Why
    not keywords: keyword phrases also resolve exactly (``package/format/keywords.py``), and a
    question
    is not a name of the document.
    """
    described = [doc.description if first else "", *doc.questions_of(section, first)]
    first_only = {
        "keywords": " ".join([*doc.keywords, *doc.aliases]),
    }
    ids = {doc.semantic_id, section.section_id.replace("#", " ")}
    return {
        "title": doc.title,
        "semantic_id": " ".join(sorted(i for i in ids if i)),
        "heading": section.heading if section.heading != doc.title else "",
        "keywords": first_only["keywords"] if first else "",
        "description": " ".join(text for text in described if text),
        "body": strip_wikilinks(section.text),
        "wikilinks": " ".join(dict.fromkeys(link.target for link in section.links)),
    }


def bm25_block(
    tokens: Sequence[list[str]],
    vocabulary: Mapping[str, int],
    params: Any,
    first_section: int = 0,
    average: float | None = None,
) -> CscBlock:
    """BM25 of one field: BM25F with that field alone at weight 1 (bm25s's own formula)."""
    return bm25f_block(
        {"field": tokens}, {"field": 1.0}, vocabulary, params, first_section, average
    )


def weighted_lengths(
    field_tokens: Mapping[str, Sequence[list[str]]], weights: Mapping[str, float]
) -> tuple[list[float], float]:
    """Each section's weighted length ``dl~`` and their average ``avgdl~`` (1 when empty)."""
    weighted = _weighted(field_tokens, weights)
    num_sections = len(next(iter(field_tokens.values())))
    lengths = [0.0] * num_sections
    for tokens, weight in weighted:
        for section, terms in enumerate(tokens):
            lengths[section] += weight * len(terms)
    return lengths, sum(lengths) / max(1, num_sections) or 1.0


def _weighted(
    field_tokens: Mapping[str, Sequence[list[str]]], weights: Mapping[str, float]
) -> list[tuple[Sequence[list[str]], float]]:
    """(tokens, weight) of the fields that count: those of positive weight."""
    return [
        (tokens, w) for name, tokens in field_tokens.items() if (w := weights.get(name, 0.0)) > 0
    ]


def bm25f_block(
    field_tokens: Mapping[str, Sequence[list[str]]],
    weights: Mapping[str, float],
    vocabulary: Mapping[str, int],
    params: Any,
    first_section: int = 0,
    average: float | None = None,
) -> CscBlock:
    """BM25F (Robertson et al. 2004): weighted term frequency and length summed over fields,
    one saturation — the term-frequency component bm25s applies to one field.

    Stored per posting is that saturated frequency ``tfn`` only: the IDF is applied at query
    time from the document frequencies of the partitions a query reads (docs/adr/0010), so one
    tenant's documents never shift another's scores. Section numbers start at ``first_section``.

    Why flat arrays, one section at a time: a dict of term frequencies per section and a list
    of (section, impact) tuples per term cost ≈ 150 bytes a posting, most of the 9.6 GB a 1M
    build peaked at; a posting now costs 16 bytes while it is collected and 12 in the block.

    ``average`` replaces the sections' own average length: a delta partition normalises with
    its base partition's, so its impacts are on the base's scale (docs/adr/0020).
    """
    weighted = _weighted(field_tokens, weights)
    num_sections = len(next(iter(field_tokens.values())))
    lengths, own_average = weighted_lengths(field_tokens, weights)
    average = own_average if average is None else average
    k1, b = params.k1, params.b
    boost = k1 + 1 if params.method == "atire" else 1.0  # ATIRE's tfc keeps the (k1 + 1)
    terms_of = array("I")  # one entry per posting, in section order
    impacts_of = array("d")
    per_section = array("I")  # postings of each section
    for section in range(num_sections):
        counts: dict[str, float] = {}
        for tokens, weight in weighted:
            for term in tokens[section]:
                counts[term] = counts.get(term, 0.0) + weight
        norm = k1 * (1 - b + b * lengths[section] / average)
        terms_of.extend(vocabulary[term] for term in counts)
        impacts_of.extend(boost * tf / (tf + norm) for tf in counts.values())
        per_section.append(len(counts))
    return _csc(terms_of, impacts_of, per_section, len(vocabulary), first_section)


def _csc(
    terms_of: array[int],
    impacts_of: array[float],
    per_section: array[int],
    num_terms: int,
    first_section: int,
) -> CscBlock:
    """The postings grouped by term (a counting sort): sections ascending within each term,
    since they were collected in section order."""
    indptr = [0] * (num_terms + 1)
    for term in terms_of:
        indptr[term + 1] += 1
    for term in range(num_terms):
        indptr[term + 1] += indptr[term]
    total = len(terms_of)
    ids = array("I", [0]) * total  # (from ``bytes(n)``, the zeros were held twice for a moment)
    impacts = array("d", [0.0]) * total
    free = indptr[:-1]
    posting = 0
    for section, count in enumerate(per_section, start=first_section):
        for _ in range(count):
            term = terms_of[posting]
            at = free[term]
            ids[at] = section
            impacts[at] = impacts_of[posting]
            free[term] = at + 1
            posting += 1
    return indptr, ids, impacts


class SectionPostings:
    """BM25F postings collected one section at a time, before the vocabulary is known: each
    section's weighted term frequencies and length go into flat arrays under a provisional term
    id (first seen), and its token lists are dropped at once.

    Why: a partition's token lists held all at once (a list of strings per field and section)
    were ≈ 1.4 GB of a 1M build's peak; the arrays hold 12 bytes a posting. The arithmetic is
    :func:`bm25f_block`'s, in the same order, so the block is the same to the bit
    (``tests/compile/test_streamed_build.py``)."""

    def __init__(self, weights: Mapping[str, float]) -> None:
        self._weights = weights
        self.ids: dict[str, int] = {}  # term → provisional id, then (``sorted_terms``) its rank
        self._terms_of = array("I")  # one entry per posting, in section order
        self._tfs = array("d")
        self._per_section = array("I")
        self._lengths = array("d")
        self._ranked = False

    @property
    def sections(self) -> int:
        return len(self._per_section)

    def add(self, field_tokens: Mapping[str, list[str]]) -> None:
        """One section's terms per field (every field: a term of a field of weight 0 is in
        the vocabulary without a posting)."""
        ids = self.ids
        counts: dict[str, float] = {}
        length = 0.0
        for name, terms in field_tokens.items():
            for term in terms:
                if term not in ids:
                    ids[term] = len(ids)
            weight = self._weights.get(name, 0.0)
            if weight <= 0:
                continue
            length += weight * len(terms)
            for term in terms:
                counts[term] = counts.get(term, 0.0) + weight
        self._terms_of.extend(ids[term] for term in counts)
        self._tfs.extend(counts.values())
        self._per_section.append(len(counts))
        self._lengths.append(length)

    def add_all(self, sections: Iterable[Mapping[str, list[str]]]) -> None:
        for field_tokens in sections:
            self.add(field_tokens)

    def average(self) -> float:
        """The sections' average weighted length (1 when empty), as ``weighted_lengths``."""
        return sum(self._lengths) / max(1, self.sections) or 1.0

    def sorted_terms(self) -> list[str]:
        """The vocabulary, sorted (term id = rank); ``ids`` then maps each term to its rank."""
        terms = sorted(self.ids)
        rank = array("I", [0]) * len(terms)
        for term_id, term in enumerate(terms):
            rank[self.ids[term]] = term_id
            self.ids[term] = term_id
        for posting, provisional in enumerate(self._terms_of):
            self._terms_of[posting] = rank[provisional]
        self._ranked = True
        return terms

    def block(self, params: Any, first_section: int = 0, average: float | None = None) -> CscBlock:
        """The BM25F block (``bm25f_block``'s), after ``sorted_terms``; frees the arrays."""
        if not self._ranked:
            raise ValueError("sorted_terms() first: postings carry provisional term ids")
        average = self.average() if average is None else average
        k1, b = params.k1, params.b
        boost = k1 + 1 if params.method == "atire" else 1.0  # ATIRE's tfc keeps the (k1 + 1)
        impacts_of = self._tfs  # turned into impacts in place, section by section
        posting = 0
        for section, count in enumerate(self._per_section):
            norm = k1 * (1 - b + b * self._lengths[section] / average)
            for at in range(posting, posting + count):
                tf = impacts_of[at]
                impacts_of[at] = boost * tf / (tf + norm)
            posting += count
        block = _csc(self._terms_of, impacts_of, self._per_section, len(self.ids), first_section)
        self._terms_of, self._tfs = array("I"), array("d")
        return block
