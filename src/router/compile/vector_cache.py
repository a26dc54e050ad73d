"""On-disk cache of embeddings keyed by model, kind and text hash (build time, CPython).

Why: e5-small embeds ~2 abstracts/s on two cores, so a rebuild must only embed sections whose
text changed. Layout per model: ``records.bin``, fixed-size records of a 16-byte key digest
followed by the float32 row. Each row carries its own key, so no interruption or concurrent
writer can pair a key with another text's row (an earlier layout kept keys and rows in two
files and was silently misaligned by two jobs appending at once). Appends take an exclusive
``flock`` and are one ``write``; a trailing partial record (a killed writer) is ignored.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np

from router.analysis.text import slugify

__all__ = ["DEFAULT_CACHE_DIR", "RECORDS_FILE", "VectorCache", "cache_id", "text_key"]

DEFAULT_CACHE_DIR = Path(
    os.environ.get("KR_VECTOR_CACHE", Path.home() / ".cache" / "knowledge-router" / "vectors")
)
RECORDS_FILE = "records.bin"
KEY_BYTES = 16


def text_key(kind: str, text: str) -> bytes:
    """Stable 16-byte key of one text to embed as ``kind`` ("query" or "passage")."""
    return hashlib.sha256(f"{kind}\0{text}".encode()).digest()[:KEY_BYTES]


def cache_id(encoder: Any) -> str:
    """What an encoder's vectors are cached under: its ``cache_id`` when it has one (a model
    called with options that change its vectors, e.g. Workers AI's pooling), else its model id."""
    return str(getattr(encoder, "cache_id", None) or encoder.model_id)


@contextlib.contextmanager
def _exclusive(handle: IO[bytes]) -> Iterator[None]:
    """Hold an exclusive advisory lock where the platform has one (POSIX)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows: single writer assumed
        yield
        return
    fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
    try:
        yield
    finally:
        fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


class VectorCache:
    """Append-only, multi-process-safe cache of one model's vectors."""

    def __init__(self, model_id: str, dimensions: int, root: Path | None = None) -> None:
        self.dimensions = dimensions
        self.folder = (root or DEFAULT_CACHE_DIR) / slugify(model_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = self.folder / RECORDS_FILE
        self._record_bytes = KEY_BYTES + 4 * dimensions
        self._read_upto = 0
        self._index: dict[bytes, np.ndarray] = {}
        self._refresh()

    def _refresh(self) -> None:
        """Read whole records appended since the last read (by this or another process)."""
        if not self.path.exists():
            return
        with self.path.open("rb") as handle:
            handle.seek(self._read_upto)
            data = handle.read()
        whole = len(data) // self._record_bytes
        if not whole:
            return
        records = np.frombuffer(data[: whole * self._record_bytes], dtype=np.uint8)
        records = records.reshape(whole, self._record_bytes)
        rows = records[:, KEY_BYTES:].copy().view(np.float32)
        for key, row in zip(records[:, :KEY_BYTES], rows, strict=True):
            self._index[key.tobytes()] = row
        self._read_upto += whole * self._record_bytes

    def __len__(self) -> int:
        return len(self._index)

    def get(self, kind: str, text: str) -> np.ndarray | None:
        return self._index.get(text_key(kind, text))

    def count_missing(self, kind: str, texts: Sequence[str]) -> int:
        """How many distinct ``texts`` :meth:`embed` would encode now (what a progress bar
        counts)."""
        self._refresh()
        return len({t for t in texts if text_key(kind, t) not in self._index})

    def embed(
        self,
        kind: str,
        texts: Sequence[str],
        encode: Callable[[list[str]], np.ndarray],
        batch_size: int = 16,
        progress: Callable[[int], None] | None = None,
    ) -> np.ndarray:
        """Vectors for ``texts``: cached rows, the rest encoded in batches and appended."""
        self._refresh()
        missing = sorted({t for t in texts if text_key(kind, t) not in self._index}, key=len)
        for start in range(0, len(missing), batch_size):
            batch = missing[start : start + batch_size]
            self._append([text_key(kind, t) for t in batch], encode(batch))
            if progress:
                progress(len(batch))
        if not texts:
            return np.zeros((0, self.dimensions), dtype=np.float32)
        return np.stack([self._index[text_key(kind, t)] for t in texts])

    def _append(self, keys: list[bytes], vectors: np.ndarray) -> None:
        rows = np.ascontiguousarray(vectors, dtype=np.float32).reshape(len(keys), self.dimensions)
        payload = b"".join(key + row.tobytes() for key, row in zip(keys, rows, strict=True))
        with self.path.open("ab") as handle, _exclusive(handle):
            size = handle.seek(0, os.SEEK_END)
            torn = size % self._record_bytes
            if torn:  # a writer was killed mid-record: cut its partial tail first
                handle.truncate(size - torn)
            handle.write(payload)
            handle.flush()  # inside the lock: buffered bytes written after it looked torn to
            # the other writer, which cut them (a record lost under load, seen in CI)
        for key, row in zip(keys, rows, strict=True):
            self._index[key] = row
