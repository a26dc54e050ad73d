"""On-disk cache of embeddings keyed by model, kind and text hash (build time, CPython).

Why: e5-small embeds ~2 abstracts/s on two cores, so a rebuild must only embed sections whose
text changed. Layout per model: ``keys.txt`` (one hex key per line) and ``vectors.f32`` (rows of
float32, same order). Rows are appended before their key, so an interrupted run loses at most the
batch in flight and never pairs a key with the wrong row.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from router.analysis.text import slugify

__all__ = ["DEFAULT_CACHE_DIR", "VectorCache", "text_key"]

DEFAULT_CACHE_DIR = Path(
    os.environ.get("KR_VECTOR_CACHE", Path.home() / ".cache" / "knowledge-router" / "vectors")
)


def text_key(kind: str, text: str) -> str:
    """Stable key of one text to embed as ``kind`` ("query" or "passage")."""
    return hashlib.sha256(f"{kind}\0{text}".encode()).hexdigest()[:32]


class VectorCache:
    """Append-only cache of one model's vectors."""

    def __init__(self, model_id: str, dimensions: int, root: Path | None = None) -> None:
        self.dimensions = dimensions
        self.folder = (root or DEFAULT_CACHE_DIR) / slugify(model_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._keys_path = self.folder / "keys.txt"
        self._rows_path = self.folder / "vectors.f32"
        self._index: dict[str, int] = {}
        self._rows = np.zeros((0, dimensions), dtype=np.float32)
        self._load()

    def _load(self) -> None:
        if not self._keys_path.exists() or not self._rows_path.exists():
            return
        keys = self._keys_path.read_text(encoding="ascii").split()
        rows = np.fromfile(self._rows_path, dtype=np.float32)
        count = min(len(keys), rows.size // self.dimensions)
        self._rows = rows[: count * self.dimensions].reshape(count, self.dimensions)
        self._index = {key: i for i, key in enumerate(keys[:count])}

    def __len__(self) -> int:
        return len(self._index)

    def get(self, kind: str, text: str) -> np.ndarray | None:
        row = self._index.get(text_key(kind, text))
        return None if row is None else self._rows[row]

    def embed(
        self,
        kind: str,
        texts: Sequence[str],
        encode: Callable[[list[str]], np.ndarray],
        batch_size: int = 16,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors for ``texts``: cached rows, the rest encoded in batches and appended."""
        missing = sorted({t for t in texts if text_key(kind, t) not in self._index}, key=len)
        for start in range(0, len(missing), batch_size):
            batch = missing[start : start + batch_size]
            self._append([text_key(kind, t) for t in batch], encode(batch))
            if progress:
                progress(len(batch))
        return (
            np.stack([self._rows[self._index[text_key(kind, t)]] for t in texts])
            if texts
            else (np.zeros((0, self.dimensions), dtype=np.float32))
        )

    def _append(self, keys: list[str], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        vectors = vectors.reshape(len(keys), self.dimensions)
        self._reconcile_rows()
        with self._rows_path.open("ab") as rows:
            rows.write(vectors.tobytes())
        with self._keys_path.open("a", encoding="ascii") as key_file:
            key_file.write("".join(f"{k}\n" for k in keys))
        base = len(self._rows)
        self._rows = np.concatenate([self._rows, vectors])
        for offset, key in enumerate(keys):
            self._index[key] = base + offset

    def _reconcile_rows(self) -> None:
        """Drop rows written without their keys by an interrupted run."""
        if self._rows_path.exists():
            expected = len(self._rows) * self.dimensions * 4
            if self._rows_path.stat().st_size != expected:
                with self._rows_path.open("r+b") as rows:
                    rows.truncate(expected)
