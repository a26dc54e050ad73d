"""Weighted fields of a section (PRD §11) and their BM25 impacts: per field, or one BM25F block.

Why both: per-field scoring keeps one posting block per field so the weights stay query-time
configuration; BM25F folds the weights into the term frequencies before saturation, which is
better founded but bakes the weights into the package. docs/adr/0005 records the measured choice.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from math import log
from typing import Any

import bm25s

from router.knowledge.model import Document, Section
from router.knowledge.parser import strip_wikilinks
from router.package.fields import BM25F_BLOCK, DEFAULT_FIELD_WEIGHTS, FIELD_NAMES

__all__ = [
    "BM25F_BLOCK",
    "DEFAULT_FIELD_WEIGHTS",
    "FIELD_NAMES",
    "CscBlock",
    "bm25_block",
    "bm25f_block",
    "section_fields",
]

CscBlock = tuple[list[int], list[int], list[float]]  # indptr over the vocabulary, ids, impacts


def section_fields(doc: Document, section: Section, first: bool) -> dict[str, str]:
    """The text of each field of a section; document-level fields go to its first section only.

    The title belongs to every section (it names what the section is part of); description,
    keywords and aliases describe the document as a whole, so only its first section carries them.
    """
    first_only = {
        "keywords": " ".join([*doc.keywords, *doc.aliases]),
        "description": doc.description,
    }
    ids = {doc.semantic_id, section.section_id.replace("#", " ")}
    return {
        "title": doc.title,
        "semantic_id": " ".join(sorted(i for i in ids if i)),
        "heading": section.heading if section.heading != doc.title else "",
        "keywords": first_only["keywords"] if first else "",
        "description": first_only["description"] if first else "",
        "body": strip_wikilinks(section.text),
        "wikilinks": " ".join(dict.fromkeys(link.target for link in section.links)),
    }


def bm25_block(tokens: Sequence[list[str]], vocabulary: Mapping[str, int], params: Any) -> CscBlock:
    """bm25s impacts of one field, re-indexed on the package's shared vocabulary."""
    by_term: dict[int, list[tuple[int, float]]] = {}
    if any(tokens):
        retriever = bm25s.BM25(method=params.method, k1=params.k1, b=params.b)
        retriever.index([list(t) for t in tokens], show_progress=False)
        scores = retriever.scores
        indptr, ids, data = scores["indptr"], scores["indices"], scores["data"]
        for term, local in retriever.vocab_dict.items():
            if term in vocabulary and local + 1 < len(indptr):
                start, end = int(indptr[local]), int(indptr[local + 1])
                by_term[vocabulary[term]] = [
                    (int(ids[i]), float(data[i])) for i in range(start, end)
                ]
    return _csc(by_term, len(vocabulary))


def bm25f_block(
    field_tokens: Mapping[str, Sequence[list[str]]],
    weights: Mapping[str, float],
    vocabulary: Mapping[str, int],
    params: Any,
) -> CscBlock:
    """BM25F (Robertson et al. 2004): weighted term frequency and length summed over fields,
    one saturation, Lucene IDF over sections — the same formula bm25s applies to one field."""
    num_sections = len(next(iter(field_tokens.values())))
    weighted_tf: list[dict[str, float]] = [{} for _ in range(num_sections)]
    lengths = [0.0] * num_sections
    for name, tokens in field_tokens.items():
        weight = weights.get(name, 0.0)
        if weight <= 0:
            continue
        for section, terms in enumerate(tokens):
            lengths[section] += weight * len(terms)
            for term in terms:
                weighted_tf[section][term] = weighted_tf[section].get(term, 0.0) + weight
    average = sum(lengths) / max(1, num_sections) or 1.0
    df = Counter(term for counts in weighted_tf for term in counts)
    by_term: dict[int, list[tuple[int, float]]] = {}
    for section, counts in enumerate(weighted_tf):
        norm = params.k1 * (1 - params.b + params.b * lengths[section] / average)
        for term, tf in counts.items():
            idf = log(1 + (num_sections - df[term] + 0.5) / (df[term] + 0.5))
            by_term.setdefault(vocabulary[term], []).append((section, idf * tf / (tf + norm)))
    return _csc(by_term, len(vocabulary))


def _csc(by_term: Mapping[int, list[tuple[int, float]]], num_terms: int) -> CscBlock:
    indptr, ids, impacts = [0], [], []
    for term in range(num_terms):
        for section, impact in sorted(by_term.get(term, ())):
            ids.append(section)
            impacts.append(impact)
        indptr.append(len(ids))
    return indptr, ids, impacts
