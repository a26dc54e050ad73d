"""A small deterministic embedder: hashed character trigrams of the folded text.

Why: unit tests need vectors that are fast, reproducible and pure Python (it also runs in
Pyodide), with some real signal — texts sharing word fragments land close, so typos and
inflections still match. It is not a semantic model; the product default is e5-small.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from math import sqrt

from router.analysis.text import fold

__all__ = ["HASH_MODEL_ID", "HashEmbedder"]

HASH_MODEL_ID = "hash-trigram-256"


class HashEmbedder:
    model_id = HASH_MODEL_ID
    dimensions = 256

    def vector(self, text: str) -> list[float]:
        values = [0.0] * self.dimensions
        for word in fold(text).split():
            padded = f" {word} "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i : i + 3].encode(), digest_size=4).digest()
                bucket = int.from_bytes(digest, "little")
                values[bucket % self.dimensions] += 1.0 if bucket & 1 << 31 else -1.0
        norm = sqrt(sum(v * v for v in values)) or 1.0
        return [v / norm for v in values]

    def encode(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return [self.vector(t) for t in texts]

    async def embed(self, texts: Sequence[str], kind: str) -> list[list[float]]:
        return self.encode(texts, kind)
