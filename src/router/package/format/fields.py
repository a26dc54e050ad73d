"""Names of the weighted fields (PRD §11) and of the BM25F block, shared by compiler and scorer."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = ["BM25F_BLOCK", "DEFAULT_FIELD_WEIGHTS", "FIELD_NAMES"]

FIELD_NAMES: tuple[str, ...] = (
    "title",
    "semantic_id",
    "heading",
    "keywords",
    "description",
    "body",
    "wikilinks",
)
BM25F_BLOCK = "bm25f"
DEFAULT_FIELD_WEIGHTS: Mapping[str, float] = MappingProxyType(
    {
        "title": 3.0,
        "semantic_id": 5.0,
        "heading": 2.5,
        "keywords": 3.0,
        "description": 1.5,
        "body": 1.0,
        "wikilinks": 2.0,
    }
)
