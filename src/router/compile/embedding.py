"""Section vectors for a package, computed through a cache (build time, CPython).

Why a cache keyed by text: embedding is the slow part of a build (e5-small: a few long
sections per second on two cores), and most sections do not change between two builds.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from router.compile.indexer import SectionEmbeddings
from router.compile.vector_cache import VectorCache
from router.knowledge.model import Document
from router.vectors.passages import passage_text

__all__ = ["PassageEncoder", "embed_sections"]


class PassageEncoder(Protocol):
    """What the build needs from an embedder: a synchronous batch encode."""

    model_id: str
    dimensions: int

    def encode(self, texts: Sequence[str], kind: str) -> Any: ...


def embed_sections(
    documents: Sequence[Document], encoder: PassageEncoder, cache_root: Path | None = None
) -> SectionEmbeddings:
    texts = [passage_text(doc, section) for doc in documents for section in doc.sections]
    cache = VectorCache(encoder.model_id, encoder.dimensions, cache_root)
    rows = cache.embed("passage", texts, lambda batch: np.asarray(encoder.encode(batch, "passage")))
    return SectionEmbeddings(encoder.model_id, encoder.dimensions, rows.tolist())
