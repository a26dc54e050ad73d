"""Weighted fields of a section (PRD §11) and their BM25 postings: per field, or one BM25F block.

Why both: per-field scoring keeps one posting block per field so the weights stay query-time
configuration; BM25F folds the weights into the term frequencies before saturation, which is
better founded but bakes the weights into the package. docs/adr/0005 records the measured choice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

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


def bm25_block(
    tokens: Sequence[list[str]], vocabulary: Mapping[str, int], params: Any, first_section: int = 0
) -> CscBlock:
    """BM25 of one field: BM25F with that field alone at weight 1 (bm25s's own formula)."""
    return bm25f_block({"field": tokens}, {"field": 1.0}, vocabulary, params, first_section)


def bm25f_block(
    field_tokens: Mapping[str, Sequence[list[str]]],
    weights: Mapping[str, float],
    vocabulary: Mapping[str, int],
    params: Any,
    first_section: int = 0,
) -> CscBlock:
    """BM25F (Robertson et al. 2004): weighted term frequency and length summed over fields,
    one saturation — the term-frequency component bm25s applies to one field.

    Stored per posting is that saturated frequency ``tfn`` only: the IDF is applied at query
    time from the document frequencies of the partitions a query reads (docs/adr/0010), so one
    tenant's documents never shift another's scores. Section numbers start at ``first_section``.
    """
    num_sections = len(next(iter(field_tokens.values())))
    weighted_tf: list[dict[str, float]] = [{} for _ in range(num_sections)]
    lengths = [0.0] * num_sections
    for name, tokens in field_tokens.items():
        weight = weights.get(name, 0.0)
        if weight <= 0:
            continue
        for section, terms in enumerate(tokens):
            lengths[section] += weight * len(terms)
            counts = weighted_tf[section]
            for term in terms:
                counts[term] = counts.get(term, 0.0) + weight
    average = sum(lengths) / max(1, num_sections) or 1.0
    k1, b = params.k1, params.b
    boost = k1 + 1 if params.method == "atire" else 1.0  # ATIRE's tfc keeps the (k1 + 1)
    by_term: dict[int, list[tuple[int, float]]] = {}
    for section, counts in enumerate(weighted_tf):
        norm = k1 * (1 - b + b * lengths[section] / average)
        for term, tf in counts.items():
            by_term.setdefault(vocabulary[term], []).append(
                (first_section + section, boost * tf / (tf + norm))
            )
    return _csc(by_term, len(vocabulary))


def _csc(by_term: Mapping[int, list[tuple[int, float]]], num_terms: int) -> CscBlock:
    indptr, ids, impacts = [0], [], []
    for term in range(num_terms):
        for section, impact in sorted(by_term.get(term, ())):
            ids.append(section)
            impacts.append(impact)
        indptr.append(len(ids))
    return indptr, ids, impacts
