"""Python fakes of the Cloudflare binding objects, shaped like their JavaScript APIs.

Why fakes of the JS APIs (not of our ports): the adapters in ``router.adapters.cloudflare`` are
the code under test, so the fakes must look like what the Worker hands them — async ``get``/
``put`` with an options object on KV, R2 objects read with ``arrayBuffer()``, D1 statements built
with ``prepare().bind()`` and run with ``all()``/``run()``/``batch([...])``, Vectorize's
``query(vector, {topK, namespace, filter, returnValues, returnMetadata})`` with its limits, and
``AI.run(model, inputs)``. Each fake enforces the platform rule that a careless adapter would
break (KV's 60 s minimum TTL, D1's 100 bound parameters and ``undefined`` refusal, Vectorize's
topK caps and 1000-vector upserts, Workers AI's 100-text batches) by raising, as the platform
does. Calls are recorded so tests can assert batching. The fakes import nothing from
``router``: Vectorize's metadata filter, say, is implemented here again from Cloudflare's
reference, so the contract tests compare two implementations instead of one with itself.
"""

from __future__ import annotations

import hashlib
import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from tests.common import MIGRATIONS


class JsError(Exception):
    """What a rejected JS promise looks like from Python (Pyodide raises JsException)."""


# --- KV ---------------------------------------------------------------------------------------


class FakeKV:
    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.ttls: dict[str, int] = {}
        self.gets = 0
        self.fail_puts = False

    async def get(self, key: str) -> str | None:
        self.gets += 1
        return self.values.get(key)

    async def put(self, key: str, value: Any, options: dict[str, Any] | None = None) -> None:
        if self.fail_puts:
            raise JsError("KV put failed: 429 Too Many Requests")
        if not isinstance(value, str):
            raise JsError("KV put: value must be a string in this fake")
        ttl = (options or {}).get("expirationTtl")
        if ttl is not None and ttl < 60:
            raise JsError(f"KV PUT failed: 400 Invalid expiration_ttl of {ttl}: must be >= 60")
        self.values[key] = value
        if ttl is not None:
            self.ttls[key] = ttl


# --- R2 ---------------------------------------------------------------------------------------


class FakeR2Object:
    def __init__(self, key: str, data: bytes) -> None:
        self.key = key
        self.size = len(data)
        self._data = data

    async def arrayBuffer(self) -> memoryview:
        return memoryview(bytearray(self._data))


class FakeR2:
    def __init__(self) -> None:
        self.objects: dict[str, bytes] = {}
        self.gets: list[str] = []
        self.fail_gets = False

    async def get(self, key: str) -> FakeR2Object | None:
        self.gets.append(key)
        if self.fail_gets:
            raise JsError("R2 get: network connection lost")
        data = self.objects.get(key)
        return None if data is None else FakeR2Object(key, data)

    async def head(self, key: str) -> FakeR2Object | None:
        data = self.objects.get(key)
        return None if data is None else FakeR2Object(key, data)

    async def list(self, options: dict[str, Any]) -> SimpleNamespace:
        """One page of two keys at most (so the adapter's paging is exercised)."""
        keys = sorted(k for k in self.objects if k.startswith(options.get("prefix", "")))
        start = int(options.get("cursor") or 0)
        page = [SimpleNamespace(key=k) for k in keys[start : start + 2]]
        more = start + 2 < len(keys)
        return SimpleNamespace(objects=page, truncated=more, cursor=str(start + 2) if more else "")

    async def delete(self, key: str) -> None:
        self.objects.pop(key, None)

    async def put(self, key: str, value: Any) -> FakeR2Object:
        if not isinstance(value, bytes | bytearray | memoryview):
            raise JsError(f"R2 put: unsupported body type {type(value).__name__}")
        self.objects[key] = bytes(value)
        return FakeR2Object(key, bytes(value))


# --- D1 ---------------------------------------------------------------------------------------

_D1_TYPES = (type(None), int, float, str, bytes)


class FakeD1Statement:
    def __init__(self, db: FakeD1, sql: str, params: tuple[Any, ...] = ()) -> None:
        self.db = db
        self.sql = sql
        self.params = params

    def bind(self, *params: Any) -> FakeD1Statement:
        if len(params) > 100:
            raise JsError(f"D1_ERROR: too many SQL variables ({len(params)} > 100)")
        for value in params:
            if isinstance(value, bool) or not isinstance(value, _D1_TYPES):
                raise JsError(f"D1_TYPE_ERROR: Type '{type(value).__name__}' not supported")
        return FakeD1Statement(self.db, self.sql, params)

    def _execute(self) -> dict[str, Any]:
        cursor = self.db.connection.execute(self.sql, self.params)
        rows = [dict(row) for row in cursor.fetchall()]
        return {"results": rows, "success": True, "meta": {"changes": cursor.rowcount}}

    async def all(self) -> dict[str, Any]:
        self.db.queries += 1
        with self.db.connection:
            return self._execute()

    async def run(self) -> dict[str, Any]:
        return await self.all()


class FakeD1:
    """sqlite3 with ``migrations/d1`` applied, as ``wrangler d1 migrations apply`` would."""

    def __init__(self, path: str = ":memory:") -> None:
        self.connection = sqlite3.connect(path)
        self.connection.row_factory = sqlite3.Row
        self.connection.execute("PRAGMA foreign_keys = ON")  # D1 enforces foreign keys
        for sql in sorted(MIGRATIONS.glob("*.sql")):
            self.connection.executescript(sql.read_text(encoding="utf-8"))
        self.batch_sizes: list[int] = []
        self.queries = 0
        self.fail_batches = False

    def prepare(self, sql: str) -> FakeD1Statement:
        return FakeD1Statement(self, sql)

    async def batch(self, statements: list[FakeD1Statement]) -> list[dict[str, Any]]:
        if self.fail_batches:
            raise JsError("D1_ERROR: database is unavailable")
        if not isinstance(statements, list):
            raise JsError("D1 batch expects an array of statements")
        self.batch_sizes.append(len(statements))
        self.queries += len(statements)
        with self.connection:  # one transaction: all or nothing, like D1
            return [statement._execute() for statement in statements]

    def rows(self, sql: str, *params: Any) -> list[dict[str, Any]]:
        return [dict(row) for row in self.connection.execute(sql, params).fetchall()]


# --- Vectorize --------------------------------------------------------------------------------


@dataclass
class _Stored:
    namespace: str | None
    values: list[float]
    metadata: dict[str, Any] = field(default_factory=dict)


class FakeVectorize:
    """Exact cosine search with Vectorize's request rules; mutations apply at once (the real
    index applies them a few seconds later) and answer with a mutation id, as V2 does."""

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.vectors: dict[str, _Stored] = {}
        self.upsert_sizes: list[int] = []
        self.queries: list[dict[str, Any]] = []
        self._mutations = 0

    def _mutation(self) -> dict[str, str]:
        self._mutations += 1
        return {"mutationId": f"m-{self._mutations}"}

    async def upsert(self, vectors: list[dict[str, Any]]) -> dict[str, str]:
        if len(vectors) > 1000:
            raise JsError("VECTOR_UPSERT_ERROR (code = 40007): too many vectors in one upsert")
        for vector in vectors:
            if len(vector["values"]) != self.dimensions:
                raise JsError("VECTOR_UPSERT_ERROR (code = 40012): dimension mismatch")
        self.upsert_sizes.append(len(vectors))
        for vector in vectors:
            self.vectors[vector["id"]] = _Stored(
                vector.get("namespace"), list(vector["values"]), dict(vector.get("metadata", {}))
            )
        return self._mutation()

    async def query(self, vector: list[float], options: dict[str, Any]) -> dict[str, Any]:
        self.queries.append(dict(options))
        top_k = options.get("topK", 5)
        payload = options.get("returnValues") or options.get("returnMetadata") == "all"
        if top_k > (20 if payload else 100):
            raise JsError("VECTOR_QUERY_ERROR (code = 40025): topK too large")
        if len(vector) != self.dimensions:
            raise JsError("VECTOR_QUERY_ERROR (code = 40006): dimension mismatch")
        namespace = options.get("namespace")
        found = []
        for vector_id, stored in self.vectors.items():
            if namespace is not None and stored.namespace != namespace:
                continue
            if options.get("filter") and not _filter_matches(stored.metadata, options["filter"]):
                continue
            match: dict[str, Any] = {"id": vector_id, "score": _cosine(vector, stored.values)}
            if stored.namespace is not None:
                match["namespace"] = stored.namespace
            if options.get("returnValues"):
                match["values"] = list(stored.values)
            if options.get("returnMetadata") == "all":
                match["metadata"] = dict(stored.metadata)
            found.append(match)
        found.sort(key=lambda m: (-m["score"], m["id"]))
        return {"count": min(top_k, len(found)), "matches": found[:top_k]}

    async def deleteByIds(self, ids: list[str]) -> dict[str, str]:
        for vector_id in ids:
            self.vectors.pop(vector_id, None)
        return self._mutation()


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """JSON equality: booleans only equal booleans, numbers compare as numbers."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


def _ordered(a: Any, b: Any) -> bool:
    """Range operators compare a number with a number or a string with a string, nothing else."""
    numbers = isinstance(a, int | float) and isinstance(b, int | float)
    if numbers and not isinstance(a, bool) and not isinstance(b, bool):
        return True
    return isinstance(a, str) and isinstance(b, str)


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda value, operand: value is not _MISSING and _same(value, operand),
    "$ne": lambda value, operand: value is _MISSING or not _same(value, operand),
    "$in": lambda value, operand: value is not _MISSING and any(_same(value, x) for x in operand),
    "$nin": lambda value, operand: value is _MISSING or not any(_same(value, x) for x in operand),
    "$lt": lambda value, operand: _ordered(value, operand) and value < operand,
    "$lte": lambda value, operand: _ordered(value, operand) and value <= operand,
    "$gt": lambda value, operand: _ordered(value, operand) and value > operand,
    "$gte": lambda value, operand: _ordered(value, operand) and value >= operand,
}


def _filter_matches(metadata: dict[str, Any], filter: dict[str, Any]) -> bool:
    """Vectorize's metadata filter as its reference page states it, written for this fake alone
    (the router's own ``router.vectors.metadata_filter`` is code under test, not a reference):
    keys are ANDed, a dotted key reads nested metadata, a bare value means ``$eq``."""
    for key, condition in filter.items():
        value: Any = metadata
        for part in key.split("."):
            value = value.get(part, _MISSING) if isinstance(value, dict) else _MISSING
        conditions = condition if isinstance(condition, dict) else {"$eq": condition}
        for operator, operand in conditions.items():
            if operator not in _OPERATORS:
                raise JsError(f"VECTOR_QUERY_ERROR (code = 40003): unknown operator {operator}")
            if not _OPERATORS[operator](value, operand):
                return False
    return True


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# --- Workers AI -------------------------------------------------------------------------------


class FakeAI:
    """Embedding models answer ``{"shape", "data"}``; chat models ``{"response"}``; the
    reranker ``{"response": [{"id", "score"}]}``."""

    def __init__(
        self,
        dimensions: int = 1024,
        embed: Callable[[str], list[float]] | None = None,
        reply: str = "",
    ) -> None:
        self.dimensions = dimensions
        self.embed = embed or self._hash_vector
        self.reply = reply
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail = False

    def _hash_vector(self, text: str) -> list[float]:
        digest = hashlib.sha256(text.encode()).digest()
        return [((digest[i % 32] + i) % 17 - 8) / 8 for i in range(self.dimensions)]

    async def run(self, model: str, inputs: dict[str, Any]) -> dict[str, Any]:
        self.calls.append((model, inputs))
        if self.fail:
            raise JsError("AiError: 3040: Capacity temporarily exceeded")
        if "text" in inputs:
            texts = inputs["text"]
            if len(texts) > 100:
                raise JsError("AiError: 5006: too many texts in one batch")
            data = [self.embed(t) for t in texts]
            return {"shape": [len(data), self.dimensions], "data": data, "pooling": "cls"}
        if "messages" in inputs:
            return {"response": self.reply, "usage": {"prompt_tokens": 1}}
        if "contexts" in inputs:  # a reranker: query words each context holds, best first
            words = set(inputs["query"].lower().split())
            scored = [
                {"id": i, "score": float(len(words & set(c["text"].lower().split())))}
                for i, c in enumerate(inputs["contexts"])
            ]
            scored.sort(key=lambda row: -row["score"])
            return {"response": scored[: inputs.get("top_k", len(scored))]}
        raise JsError("AiError: 5006: unknown input")


def fake_env(**bindings: Any) -> SimpleNamespace:
    """A Worker ``env``: bindings as attributes (absent ones simply missing)."""
    return SimpleNamespace(**bindings)
