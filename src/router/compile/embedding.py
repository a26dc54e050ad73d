"""Section vectors for a package, computed through a cache (build time, CPython).

Why a cache keyed by text: embedding is the slow part of a build (e5-small: a few long
sections per second on two cores; Workers AI: a paid round trip per 100 sections), and most
sections do not change between two builds. The cache is filed per model (``cache_id``), so a
build with another model never reuses these vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from router.compile.corpus import BuildPhases
from router.compile.indexer import SectionEmbeddings
from router.compile.vector_cache import VectorCache, cache_id
from router.knowledge.model import Document
from router.vectors.passages import passage_text

__all__ = ["PassageEncoder", "embed_sections"]


DEFAULT_BATCH = 16
"""Texts per ``encode`` call when the encoder does not say (``batch_size``): each batch is
appended to the cache as it comes, so an interrupted build keeps what it paid for."""


class PassageEncoder(Protocol):
    """What the build needs from an embedder: a synchronous batch encode. Optional attributes:
    ``batch_size`` (texts per call) and ``cache_id`` (see ``vector_cache.cache_id``).
    """

    model_id: str
    dimensions: int

    def encode(self, texts: Sequence[str], kind: str) -> Any: ...


def embed_sections(
    documents: Sequence[Document],
    encoder: PassageEncoder,
    cache_root: Path | None = None,
    phases: BuildPhases | None = None,
) -> SectionEmbeddings:
    """Every section's vector, as the "embed" phase (counting only the sections not cached)."""
    texts = [passage_text(doc, section) for doc in documents for section in doc.sections]
    cache = VectorCache(cache_id(encoder), encoder.dimensions, cache_root)
    missing = cache.count_missing("passage", texts)
    advance = phases("embed", missing) if phases is not None and missing else None
    rows = cache.embed(
        "passage",
        texts,
        lambda batch: np.asarray(encoder.encode(batch, "passage")),
        batch_size=int(getattr(encoder, "batch_size", DEFAULT_BATCH)),
        progress=advance,
    )
    return SectionEmbeddings(encoder.model_id, encoder.dimensions, rows.tolist())
