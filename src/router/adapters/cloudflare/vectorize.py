"""Vectorize index binding as the :class:`~router.ports.VectorIndex` port.

Why it validates before calling: Vectorize reports a bad topK, id or dimension as an opaque JS
error after a round trip; :mod:`router.vectors.vectorize_rules` raises the same
:class:`~router.errors.InvalidRequestError` the local index raises, so both adapters pass one
contract suite. Filters are validated by :mod:`router.vectors.metadata_filter` for the same
reason. Differences from the local index that no check can hide: Vectorize (V2) applies upserts
and deletes asynchronously (a few seconds before they are queryable), reports a mutation id
instead of counts (``upsert`` and ``delete_by_ids`` return the number of ids sent), is
approximate, and filters only on properties that have a metadata index — create one for
``version`` (``wrangler vectorize create-metadata-index <index> --property-name=version
--type=string``), which every router query filters on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from router.adapters.cloudflare.jsconv import to_js, to_py
from router.errors import BindingError, ConfigError, InvalidRequestError
from router.ports import VectorMatch, VectorRecord
from router.sql import chunked
from router.vectors.vectorize_rules import (
    MAX_DIMENSIONS,
    MAX_ID_BYTES,
    MAX_UPSERT_BATCH,
    check_text,
    check_values,
    query_options,
    record_payload,
    vector_match,
)

__all__ = ["VectorizeIndex"]


class VectorizeIndex:
    """Queries one namespace at a time, with an optional metadata filter; upserts in chunks."""

    def __init__(self, binding: Any, dimensions: int, batch_size: int = MAX_UPSERT_BATCH) -> None:
        if isinstance(dimensions, bool) or not isinstance(dimensions, int):
            raise ConfigError(f"dimensions must be an integer, got {dimensions!r}")
        if not 1 <= dimensions <= MAX_DIMENSIONS:
            raise ConfigError(f"dimensions must be between 1 and {MAX_DIMENSIONS}")
        self.binding = binding
        self.dimensions = dimensions
        self.batch_size = min(batch_size, MAX_UPSERT_BATCH)

    async def upsert(self, records: Sequence[VectorRecord]) -> int:
        """Insert or replace; every record is checked before any is sent."""
        payload = [record_payload(record, self.dimensions) for record in records]
        for chunk in chunked(payload, self.batch_size):
            try:
                await self.binding.upsert(to_js(list(chunk)))
            except Exception as exc:
                raise BindingError(f"Vectorize upsert failed: {exc}") from exc
        return len(payload)

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
        options = query_options(top_k, namespace, filter, return_metadata, return_values)
        values = check_values(vector, self.dimensions, "query vector")
        try:
            result = to_py(await self.binding.query(to_js(values), to_js(options)))
        except Exception as exc:
            raise BindingError(f"Vectorize query failed: {exc}") from exc
        matches = [
            vector_match(found, namespace, return_metadata, return_values)
            for found in (result or {}).get("matches") or []
        ]
        matches.sort(key=lambda found: (-found.score, found.id))
        return matches[:top_k]

    async def delete_by_ids(self, ids: Sequence[str]) -> int:
        """Delete the given ids; returns how many distinct ids were sent (Vectorize V2 does
        not say how many existed)."""
        if isinstance(ids, str):
            raise InvalidRequestError("delete_by_ids takes a list of ids, not a single string")
        unique = list(dict.fromkeys(ids))
        for vector_id in unique:
            check_text(vector_id, "vector id", MAX_ID_BYTES)
        deleted = 0
        for chunk in chunked(unique, self.batch_size):
            try:
                result = to_py(await self.binding.deleteByIds(to_js(list(chunk))))
            except Exception as exc:
                raise BindingError(f"Vectorize deleteByIds failed: {exc}") from exc
            count = result.get("count") if isinstance(result, dict) else None
            deleted += int(count) if isinstance(count, int) else len(chunk)
        return deleted
