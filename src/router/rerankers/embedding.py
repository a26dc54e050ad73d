"""A reranker over the embedder port: cosine similarity of the question and each passage.

Why: with the local e5 model and the vector cache, a passage is embedded once, at build time
(``router.vectors.passages.passage_text`` is the text of both, so the cache serves the
reranker's passages), and the reranker's cost is one query vector. Any embedder works (Workers
AI's bge-m3 too); a failure of the embedder is a :class:`~router.errors.RerankError`. What it is
worth next to the lexical reranker and without one: bench/README.md, "Reranking".
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from router.errors import RerankError, RouterError
from router.ports import Embedder

__all__ = ["EmbeddingReranker", "cosine"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class EmbeddingReranker:
    """Scores each passage by its cosine similarity with the question."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.model = f"cosine:{embedder.model_id}"

    async def rerank(self, question: str, passages: Sequence[str]) -> list[float]:
        if not passages:
            return []
        try:
            [asked] = await self.embedder.embed([question], "query")
            vectors = await self.embedder.embed(list(passages), "passage")
        except RouterError as exc:
            raise RerankError(f"{self.model}: {exc.message}") from exc
        if len(vectors) != len(passages):
            raise RerankError(f"{self.model}: {len(vectors)} vectors for {len(passages)} passages")
        return [round(cosine(asked, v), 6) for v in vectors]
