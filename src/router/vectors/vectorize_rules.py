"""Cloudflare Vectorize's limits, checked in pure Python before a request leaves the Worker.

Why check locally what Vectorize checks anyway: the binding reports violations as opaque JS
errors after a network round trip; checking first turns them into the same
:class:`~router.errors.InvalidRequestError` the local index raises, with a message that says
what is wrong, so callers (and the shared contract tests) see one behaviour on both adapters.
The numbers are Vectorize's published limits (and those of ``LocalVectorIndex``).
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Iterable, Mapping
from typing import Any

from router.errors import InvalidRequestError
from router.ports import VectorMatch, VectorRecord
from router.vectors.metadata_filter import validate_filter

__all__ = [
    "MAX_DIMENSIONS",
    "MAX_ID_BYTES",
    "MAX_METADATA_BYTES",
    "MAX_NAMESPACE_BYTES",
    "MAX_TOP_K",
    "MAX_TOP_K_WITH_PAYLOAD",
    "MAX_UPSERT_BATCH",
    "check_metadata",
    "check_text",
    "check_top_k",
    "check_values",
    "query_options",
    "record_payload",
    "vector_match",
]

MAX_TOP_K = 100
MAX_TOP_K_WITH_PAYLOAD = 20
"""topK cap when values or all metadata are returned."""
MAX_ID_BYTES = 64
MAX_NAMESPACE_BYTES = 64
MAX_METADATA_BYTES = 10 * 1024
MAX_DIMENSIONS = 1536
MAX_UPSERT_BATCH = 1000
"""Vectors per ``upsert`` call through the Workers binding."""

_FLOAT32_MAX = 3.4028234663852886e38


def check_top_k(top_k: Any, *, with_payload: bool) -> None:
    if isinstance(top_k, bool) or not isinstance(top_k, int):
        raise InvalidRequestError(f"top_k must be an integer, got {top_k!r}")
    if not 1 <= top_k <= MAX_TOP_K:
        raise InvalidRequestError(f"top_k must be between 1 and {MAX_TOP_K}, got {top_k}")
    if with_payload and top_k > MAX_TOP_K_WITH_PAYLOAD:
        raise InvalidRequestError(
            f"top_k is at most {MAX_TOP_K_WITH_PAYLOAD} when values or metadata are returned, "
            f"got {top_k}"
        )


def check_text(value: Any, what: str, max_bytes: int) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidRequestError(f"{what} must be a non-empty string, got {value!r}")
    if len(value.encode("utf-8")) > max_bytes:
        raise InvalidRequestError(f"{what} {value!r} is longer than {max_bytes} bytes")


def check_values(vector: Any, dimensions: int, what: str) -> list[float]:
    """The vector as a list of floats of the index's dimension, or InvalidRequestError."""
    if isinstance(vector, str | bytes | Mapping) or not isinstance(vector, Iterable):
        raise InvalidRequestError(f"{what} must be a list of numbers")
    values: list[float] = []
    for value in vector:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise InvalidRequestError(f"{what} must be a list of numbers")
        number = float(value)
        if not math.isfinite(number) or abs(number) > _FLOAT32_MAX:
            raise InvalidRequestError(f"{what} contains a value that is not a finite float32")
        values.append(number)
    if len(values) != dimensions:
        raise InvalidRequestError(
            f"{what} has {len(values)} dimensions; this index has {dimensions}"
        )
    return values


def check_metadata(vector_id: str, metadata: Any) -> dict[str, Any]:
    """A JSON copy of the metadata, at most 10 KiB, or InvalidRequestError."""
    if not isinstance(metadata, dict):
        raise InvalidRequestError(f"metadata of {vector_id!r} must be an object")
    try:
        encoded = json.dumps(metadata, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"metadata of {vector_id!r} is not JSON: {exc}") from exc
    if len(encoded.encode("utf-8")) > MAX_METADATA_BYTES:
        raise InvalidRequestError(
            f"metadata of {vector_id!r} is larger than {MAX_METADATA_BYTES} bytes of JSON"
        )
    copied: dict[str, Any] = json.loads(encoded)
    return copied


def record_payload(record: VectorRecord, dimensions: int) -> dict[str, Any]:
    """One record as Vectorize takes it (binding or NDJSON line), checked against the limits."""
    check_text(record.id, "vector id", MAX_ID_BYTES)
    payload: dict[str, Any] = {
        "id": record.id,
        "values": check_values(record.values, dimensions, f"vector {record.id!r}"),
    }
    if record.namespace is not None:
        check_text(record.namespace, "namespace", MAX_NAMESPACE_BYTES)
        payload["namespace"] = record.namespace
    metadata = check_metadata(record.id, record.metadata)
    if metadata:
        payload["metadata"] = metadata
    return payload


def query_options(
    top_k: int,
    namespace: str | None,
    filter: dict[str, Any] | None,
    return_metadata: bool,
    return_values: bool,
) -> dict[str, Any]:
    """A query's options (``topK``, ``namespace``, ``filter``, what to return), checked."""
    check_top_k(top_k, with_payload=return_metadata or return_values)
    options: dict[str, Any] = {
        "topK": top_k,
        "returnValues": return_values,
        "returnMetadata": "all" if return_metadata else "none",
    }
    if namespace is not None:
        check_text(namespace, "namespace", MAX_NAMESPACE_BYTES)
        options["namespace"] = namespace
    if filter is not None:
        validate_filter(filter)
        options["filter"] = filter
    return options


def vector_match(
    found: Mapping[str, Any], namespace: str | None, return_metadata: bool, return_values: bool
) -> VectorMatch:
    """One match of a Vectorize answer; values and metadata only when they were asked for."""
    values = found.get("values") if return_values else None
    metadata = found.get("metadata") if return_metadata else None
    return VectorMatch(
        id=str(found["id"]),
        score=float(found["score"]),
        namespace=found.get("namespace") or namespace,
        metadata=dict(metadata or {}) if return_metadata else None,
        values=[float(v) for v in values] if values is not None else None,
    )
