"""Vectorize (v2 indexes) through the REST API, as the :class:`~router.ports.VectorIndex` port.

Why NDJSON: ``POST /vectorize/v2/indexes/{index}/upsert`` takes one JSON vector per line
(``{"id", "values", "namespace", "metadata"}``, ``Content-Type: application/x-ndjson``), at most
1000 per request here. Upserts are idempotent by id, so a repeated request is harmless. They are
also asynchronous: the API answers a ``mutationId`` and the vectors become queryable seconds
later. Vectors are checked against Vectorize's limits (:mod:`router.vectors.vectorize_rules`)
before they leave, so a bad record fails locally with a message instead of a remote 400.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

from router.adapters.cloudflare_api.client import CloudflareAPI
from router.errors import ConfigError
from router.ports import VectorMatch, VectorRecord
from router.vectors.vectorize_rules import (
    MAX_UPSERT_BATCH,
    check_values,
    query_options,
    record_payload,
    vector_match,
)

__all__ = ["VectorizeIndex", "ndjson_lines"]


def ndjson_lines(records: Sequence[VectorRecord], dimensions: int) -> bytes:
    """The records as NDJSON, each checked against Vectorize's limits."""
    lines = [
        json.dumps(record_payload(record, dimensions), ensure_ascii=False, separators=(",", ":"))
        for record in records
    ]
    return ("\n".join(lines) + "\n").encode("utf-8")


class VectorizeIndex:
    """One Vectorize index of the account (by name); ``dimensions`` must be the index's."""

    def __init__(
        self,
        api: CloudflareAPI,
        index_name: str,
        dimensions: int,
        batch_size: int = MAX_UPSERT_BATCH,
    ) -> None:
        self.api = api
        self.index_name = index_name
        self.dimensions = dimensions
        self.batch_size = min(batch_size, MAX_UPSERT_BATCH)
        self.mutation_ids: list[str] = []

    def _path(self, operation: str = "") -> str:
        index = f"/vectorize/v2/indexes/{quote(self.index_name, safe='')}"
        return f"{index}/{operation}" if operation else index

    async def check_config(self) -> None:
        """ConfigError unless the index exists with ``dimensions`` and the cosine metric.

        Why before a publish: an index's dimensions and metric are fixed when it is created, and
        they must be the embedding model's (e.g. 1,024 for ``@cf/baai/bge-m3``); finding out at
        the Vectorize step would leave the blobs and rows of a version that cannot serve.
        """
        info = await self.api.call(
            "GET", self._path(), what=f"Vectorize index {self.index_name}", not_found_ok=True
        )
        create = (
            f"wrangler vectorize create {self.index_name} --dimensions={self.dimensions} "
            "--metric=cosine"
        )
        if info is None:
            raise ConfigError(f"there is no Vectorize index {self.index_name}: {create}")
        config = info.get("config") if isinstance(info, dict) else None
        dimensions = config.get("dimensions") if isinstance(config, dict) else None
        metric = config.get("metric") if isinstance(config, dict) else None
        if dimensions is not None and int(dimensions) != self.dimensions:
            raise ConfigError(
                f"Vectorize index {self.index_name} holds {dimensions}-dimensional vectors; this "
                f"package's have {self.dimensions} (its embedding model's). An index's dimensions "
                f"cannot change: create one for this model ({create}) and bind it as "
                "KNOWLEDGE_VECTORS in wrangler.toml, or build with a model of that size"
            )
        if metric is not None and metric != "cosine":
            raise ConfigError(
                f"Vectorize index {self.index_name} uses the {metric} metric; the router's "
                f"vector scores are cosine similarities ({create})"
            )

    async def upsert(self, records: Sequence[VectorRecord]) -> int:
        for start in range(0, len(records), self.batch_size):
            chunk = records[start : start + self.batch_size]
            result = await self.api.call(
                "POST",
                self._path("upsert"),
                what=f"Vectorize upsert of {len(chunk)} vectors into {self.index_name}",
                content=ndjson_lines(chunk, self.dimensions),
                params={"unparsable-behavior": "error"},
                headers={"Content-Type": "application/x-ndjson"},
            )
            if isinstance(result, dict) and result.get("mutationId"):
                self.mutation_ids.append(str(result["mutationId"]))
        return len(records)

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
        body = query_options(top_k, namespace, filter, return_metadata, return_values)
        body["vector"] = check_values(vector, self.dimensions, "query vector")
        result = await self.api.call(
            "POST",
            self._path("query"),
            what=f"Vectorize query of {self.index_name}",
            json_body=body,
        )
        matches = result.get("matches", []) if isinstance(result, dict) else []
        return [vector_match(m, namespace, return_metadata, return_values) for m in matches]

    async def delete_by_ids(self, ids: Sequence[str]) -> int:
        for start in range(0, len(ids), self.batch_size):
            chunk = list(ids[start : start + self.batch_size])
            await self.api.call(
                "POST",
                self._path("delete_by_ids"),
                what=f"Vectorize delete of {len(chunk)} vectors from {self.index_name}",
                json_body={"ids": chunk},
            )
        return len(ids)
