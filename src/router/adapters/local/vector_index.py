"""Local exact vector index with Cloudflare Vectorize's semantics (CPython only, numpy).

Why exact and why Vectorize-shaped: locally the router must return what it would return on
Cloudflare, so this index enforces the same limits and errors (topK 1..100, or at most 20 when
values or metadata are returned; ids and namespaces of at most 64 bytes; the index's dimension;
10 KiB of metadata per vector) and the same filter language (:mod:`router.vectors.metadata_filter`).
Brute-force cosine over a few thousand sections costs well under a millisecond, and being exact
makes it the reference the approximate hosted index can be measured against.

Layout: ids are unique across the whole index, as in Vectorize, so upserting an existing id
replaces it, even when that moves it to another namespace. Each namespace (``None`` included) is
a shard holding a float32 matrix of the vectors as upserted plus the inverse of each row's norm,
computed once at upsert; scoring multiplies by it, which equals scoring against normalised rows
while ``return_values`` still returns the stored float32 values, as Vectorize does.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from router.errors import ConfigError, InvalidRequestError
from router.ports import VectorMatch, VectorRecord
from router.vectors.metadata_filter import matches, validate_filter
from router.vectors.vectorize_rules import (
    MAX_DIMENSIONS,
    MAX_ID_BYTES,
    MAX_METADATA_BYTES,
    MAX_NAMESPACE_BYTES,
    MAX_TOP_K,
    MAX_TOP_K_WITH_PAYLOAD,
)
from router.vectors.vectorize_rules import check_metadata as _metadata_copy
from router.vectors.vectorize_rules import check_text as _check_text
from router.vectors.vectorize_rules import check_top_k as _check_top_k

__all__ = [
    "MAX_DIMENSIONS",
    "MAX_ID_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_NAMESPACE_BYTES",
    "MAX_TOP_K",
    "MAX_TOP_K_WITH_PAYLOAD",
    "LocalVectorIndex",
]

_FLOAT32_MAX = float(np.finfo(np.float32).max)

_Prepared = tuple[str, str | None, np.ndarray, dict[str, Any]]
"""A validated record: id, namespace, float32 values, a private copy of the metadata."""


class _Shard:
    """The vectors of one namespace: float32 rows grown by doubling, ids and metadata by row."""

    def __init__(self, dimensions: int) -> None:
        self.rows = np.zeros((0, dimensions), dtype=np.float32)
        self.inverse_norms = np.zeros(0, dtype=np.float32)
        self.ids: list[str] = []
        self.metadata: list[dict[str, Any]] = []
        self.row_of: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def put(self, vector_id: str, values: np.ndarray, metadata: dict[str, Any]) -> None:
        """Insert or overwrite in place, so a replaced id keeps its row."""
        row = self.row_of.get(vector_id)
        if row is None:
            row = len(self.ids)
            self._reserve(row + 1)
            self.ids.append(vector_id)
            self.metadata.append(metadata)
            self.row_of[vector_id] = row
        else:
            self.metadata[row] = metadata
        self.rows[row] = values
        norm = float(np.linalg.norm(values.astype(np.float64)))
        self.inverse_norms[row] = 1.0 / norm if norm > 0.0 else 0.0

    def remove(self, vector_id: str) -> None:
        """Move the last row into the hole, so rows stay dense without shifting the matrix."""
        row = self.row_of.pop(vector_id)
        last = len(self.ids) - 1
        if row != last:
            moved = self.ids[last]
            self.rows[row] = self.rows[last]
            self.inverse_norms[row] = self.inverse_norms[last]
            self.ids[row] = moved
            self.metadata[row] = self.metadata[last]
            self.row_of[moved] = row
        self.ids.pop()
        self.metadata.pop()

    def scores(self, unit_query: np.ndarray) -> np.ndarray:
        """Cosine similarity of every row with an already normalised query."""
        count = len(self.ids)
        raw = (self.rows[:count] @ unit_query) * self.inverse_norms[:count]
        return np.clip(raw, -1.0, 1.0)

    def _reserve(self, needed: int) -> None:
        capacity = self.rows.shape[0]
        if needed <= capacity:
            return
        capacity = max(needed, 2 * capacity, 16)
        rows = np.zeros((capacity, self.rows.shape[1]), dtype=np.float32)
        rows[: len(self.ids)] = self.rows[: len(self.ids)]
        norms = np.zeros(capacity, dtype=np.float32)
        norms[: len(self.ids)] = self.inverse_norms[: len(self.ids)]
        self.rows, self.inverse_norms = rows, norms


class LocalVectorIndex:
    """In-process :class:`router.ports.VectorIndex`: exact cosine search, Vectorize's rules."""

    def __init__(self, dimensions: int) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise ConfigError(f"dimensions must be an integer, got {dimensions!r}")
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise ConfigError(f"dimensions must be between 1 and {MAX_DIMENSIONS}")
        self.dimensions = dimensions
        self._shards: dict[str | None, _Shard] = {}
        self._namespace_of: dict[str, str | None] = {}

    @property
    def size(self) -> int:
        """Number of vectors across all namespaces."""
        return len(self._namespace_of)

    def upsert_many(self, records: Iterable[VectorRecord]) -> int:
        """Synchronous bulk load; validates every record before changing anything."""
        prepared = [self._prepare(record) for record in records]
        for vector_id, namespace, values, metadata in prepared:
            self._put(vector_id, namespace, values, metadata)
        return len(prepared)

    async def upsert(self, records: Sequence[VectorRecord]) -> int:
        """Insert or replace; an invalid record rejects the whole batch."""
        return self.upsert_many(records)

    async def query(
        self,
        vector: Sequence[float],
        *,
        top_k: int = 5,
        namespace: str | None = None,
        filter: dict[str, Any] | None = None,
        return_metadata: bool = False,
        return_values: bool = False,
    ) -> list[VectorMatch]:
        """The ``top_k`` best matches among vectors passing the filter, best first.

        Why filter first: Vectorize applies the filter and then takes topK from the filtered
        set, so a selective filter still yields up to ``top_k`` matches.
        """
        _check_top_k(top_k, with_payload=return_metadata or return_values)
        unit_query = _unit(self._values(vector, "query vector"))
        if namespace is not None:
            _check_text(namespace, "namespace", MAX_NAMESPACE_BYTES)
        if filter is not None:
            validate_filter(filter)
        shards = self._searched(namespace)
        if not shards:
            return []
        return self._ranked(shards, unit_query, top_k, filter, return_metadata, return_values)

    async def delete_by_ids(self, ids: Sequence[str]) -> int:
        """Delete the given ids; returns how many of them existed."""
        if isinstance(ids, str):
            raise InvalidRequestError("delete_by_ids takes a list of ids, not a single string")
        deleted = 0
        for vector_id in dict.fromkeys(ids):
            if vector_id in self._namespace_of:
                self._remove(vector_id)
                deleted += 1
        return deleted

    # --- internals ----------------------------------------------------------------------------

    def _prepare(self, record: VectorRecord) -> _Prepared:
        _check_text(record.id, "vector id", MAX_ID_BYTES)
        if record.namespace is not None:
            _check_text(record.namespace, "namespace", MAX_NAMESPACE_BYTES)
        values = self._values(record.values, f"vector {record.id!r}")
        return record.id, record.namespace, values, _metadata_copy(record.id, record.metadata)

    def _values(self, vector: Sequence[float], what: str) -> np.ndarray:
        """float32 row of the index's dimension, or InvalidRequestError saying what is wrong."""
        try:
            values = np.asarray(vector, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise InvalidRequestError(f"{what} must be a list of numbers") from exc
        if values.ndim != 1 or values.shape[0] != self.dimensions:
            length = values.shape[0] if values.ndim == 1 else "not a flat list"
            raise InvalidRequestError(
                f"{what} has {length} dimensions; this index has {self.dimensions}"
            )
        if not np.isfinite(values).all() or np.abs(values).max() > _FLOAT32_MAX:
            raise InvalidRequestError(f"{what} contains a value that is not a finite float32")
        return values.astype(np.float32)

    def _put(
        self, vector_id: str, namespace: str | None, values: np.ndarray, metadata: dict[str, Any]
    ) -> None:
        if vector_id in self._namespace_of and self._namespace_of[vector_id] != namespace:
            self._remove(vector_id)
        shard = self._shards.get(namespace)
        if shard is None:
            shard = self._shards[namespace] = _Shard(self.dimensions)
        shard.put(vector_id, values, metadata)
        self._namespace_of[vector_id] = namespace

    def _remove(self, vector_id: str) -> None:
        namespace = self._namespace_of.pop(vector_id)
        shard = self._shards[namespace]
        shard.remove(vector_id)
        if not shard:
            del self._shards[namespace]

    def _searched(self, namespace: str | None) -> list[tuple[str | None, _Shard]]:
        """``None`` searches every namespace; a name searches only that namespace."""
        if namespace is None:
            return list(self._shards.items())
        shard = self._shards.get(namespace)
        return [(namespace, shard)] if shard is not None else []

    def _ranked(
        self,
        shards: list[tuple[str | None, _Shard]],
        unit_query: np.ndarray,
        top_k: int,
        filter: dict[str, Any] | None,
        return_metadata: bool,
        return_values: bool,
    ) -> list[VectorMatch]:
        scores = np.concatenate([shard.scores(unit_query) for _, shard in shards])
        owner = np.repeat(np.arange(len(shards)), [len(shard) for _, shard in shards])
        starts = np.cumsum([0] + [len(shard) for _, shard in shards])
        rows = np.arange(scores.shape[0]) - starts[owner]

        def accept(position: int) -> bool:
            shard = shards[owner[position]][1]
            return filter is None or matches(shard.metadata[rows[position]], filter)

        def match(position: int) -> VectorMatch:
            namespace, shard = shards[owner[position]]
            row = int(rows[position])
            return VectorMatch(
                id=shard.ids[row],
                score=float(scores[position]),
                namespace=namespace,
                metadata=copy.deepcopy(shard.metadata[row]) if return_metadata else None,
                values=shard.rows[row].tolist() if return_values else None,
            )

        picked = [match(position) for position in _best(scores, top_k, accept)]
        picked.sort(key=lambda found: (-found.score, found.id))
        return picked[:top_k]


def _best(scores: np.ndarray, top_k: int, accept: Callable[[int], bool]) -> list[int]:
    """Accepted positions in descending score until ``top_k`` are found, plus any that tie
    with the last one, so the caller can break ties by id instead of by storage order."""
    picked: list[int] = []
    floor: float | None = None
    for position in np.argsort(-scores, kind="stable").tolist():
        score = float(scores[position])
        if floor is not None and score < floor:
            break
        if accept(position):
            picked.append(position)
            if len(picked) == top_k:
                floor = score
    return picked


def _unit(vector: np.ndarray) -> np.ndarray:
    """The query scaled to length 1; a zero query scores 0 against everything."""
    norm = float(np.linalg.norm(vector.astype(np.float64)))
    return vector / np.float32(norm) if norm > 0.0 else vector
