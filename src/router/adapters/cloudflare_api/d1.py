"""D1 through the REST API (``POST /d1/database/{id}/query``) as the relational store port.

Why batches: a version's rows are hundreds of multi-row ``INSERT``s
(:func:`router.sql.version_statements`, at most 100 bound parameters each, D1's limit); the
endpoint takes ``{"batch": [{"sql", "params"}, ...]}``, so they travel a few dozen per request.

Why a whole-step retry instead of per-request retries: an ``INSERT`` repeated after a lost
response would duplicate rows (links and keywords have no key). So a query request is repeated
only when it surely never reached D1, and any other transient failure (429, 5xx, a dropped
connection) restarts :meth:`D1RelationalStore.record_version` from its first request, which
deletes the version's rows — the whole step is idempotent, each request need not be.

Why parameters as strings: the API documents ``params`` as an array of strings, so integers are
sent as their decimal text (the columns' INTEGER affinity stores them as integers again) and a
``None`` becomes a literal ``NULL`` in the statement (its ``?`` is replaced; the statements built
by :mod:`router.sql` carry every value as a parameter, never as a quoted literal).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote

from router.adapters.cloudflare_api.client import CloudflareAPI, CloudflareAPIError
from router.sql import (
    VERSIONS_NEWEST_FIRST,
    Statement,
    drop_version_statements,
    version_statements,
)

__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_BATCH_STATEMENTS",
    "D1Database",
    "D1RelationalStore",
    "batches",
    "string_params",
]

MAX_BATCH_STATEMENTS = 50
"""Statements per request (D1 executes a batch as one unit; small requests retry cheaply)."""
MAX_BATCH_BYTES = 512 * 1024
"""JSON bytes per request, well under any request-size limit."""


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int | float | str):
        return str(value)
    raise TypeError(f"cannot send a {type(value).__name__} as a D1 parameter")


def string_params(sql: str, params: Sequence[Any]) -> tuple[str, list[str | None]]:
    """``sql`` and its parameters as strings, each ``None`` inlined as ``NULL``.

    Only statements whose ``?`` are all placeholders (no quoted text) are rewritten; in others a
    ``None`` stays a JSON ``null``.
    """
    if "'" in sql or '"' in sql or sql.count("?") != len(params):
        return sql, [p if p is None else _text(p) for p in params]
    pieces = sql.split("?")
    out = [pieces[0]]
    values: list[str | None] = []
    for value, piece in zip(params, pieces[1:], strict=True):
        if value is None:
            out.append("NULL")
        else:
            out.append("?")
            values.append(_text(value))
        out.append(piece)
    return "".join(out), values


def batches(
    statements: Sequence[Statement],
    max_statements: int = MAX_BATCH_STATEMENTS,
    max_bytes: int = MAX_BATCH_BYTES,
) -> list[list[dict[str, Any]]]:
    """The statements as request bodies' ``batch`` lists, in order, each within both limits."""
    out: list[list[dict[str, Any]]] = []
    current: list[dict[str, Any]] = []
    size = 0
    for sql, params in statements:
        text, values = string_params(sql, params)
        item = {"sql": text, "params": values}
        item_size = len(json.dumps(item, ensure_ascii=False).encode("utf-8"))
        if current and (len(current) >= max_statements or size + item_size > max_bytes):
            out.append(current)
            current, size = [], 0
        current.append(item)
        size += item_size
    if current:
        out.append(current)
    return out


class D1Database:
    """One D1 database of the account (by id)."""

    def __init__(self, api: CloudflareAPI, database_id: str) -> None:
        self.api = api
        self.database_id = database_id

    @property
    def _path(self) -> str:
        return f"/d1/database/{quote(self.database_id, safe='')}/query"

    async def query(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        """Rows of one statement (or of the last of several joined by ``;``)."""
        text, values = string_params(sql, params)
        results = await self._post({"sql": text, "params": values}, "D1 query")
        return list(results[-1].get("results") or []) if results else []

    async def batch(
        self, items: Sequence[Mapping[str, Any]], what: str = "D1 batch"
    ) -> list[dict[str, Any]]:
        """Run ``[{"sql", "params"}, ...]`` in one request; one result per statement."""
        return await self._post({"batch": list(items)}, what)

    async def _post(self, body: dict[str, Any], what: str) -> list[dict[str, Any]]:
        result = await self.api.call(
            "POST", self._path, what=what, json_body=body, idempotent=False
        )
        if not isinstance(result, list):
            raise CloudflareAPIError(f"{what}: D1 answered no list of results")
        failed = [r for r in result if isinstance(r, dict) and r.get("success") is False]
        if failed:
            raise CloudflareAPIError(f"{what}: D1 reports a failed statement: {failed[0]}")
        return [r for r in result if isinstance(r, dict)]


class D1RelationalStore:
    """The catalog tables of one D1 database (``migrations/d1`` must have been applied)."""

    def __init__(
        self,
        db: D1Database,
        *,
        max_statements: int = MAX_BATCH_STATEMENTS,
        max_bytes: int = MAX_BATCH_BYTES,
    ) -> None:
        self.db = db
        self.max_statements = max_statements
        self.max_bytes = max_bytes

    async def record_version(
        self, version: str, manifest: bytes, rows: Mapping[str, Iterable[dict[str, Any]]]
    ) -> None:
        """Replace the version's rows; the first request deletes the old ones, so a failure
        anywhere restarts the whole sequence (see the module docstring)."""
        requests = batches(
            version_statements(version, manifest, rows), self.max_statements, self.max_bytes
        )
        policy = self.db.api.retry
        attempts = max(1, policy.attempts)
        for attempt in range(attempts):
            try:
                for number, items in enumerate(requests, start=1):
                    await self.db.batch(
                        items, f"D1 rows of {version} (request {number}/{len(requests)})"
                    )
                return
            except CloudflareAPIError as exc:
                if not exc.retryable or attempt == attempts - 1:
                    raise
                await self.db.api.sleep(policy.delay(attempt))

    async def versions(self) -> list[str]:
        """Versions with rows, newest first (:class:`~router.ports.VersionRows`, ``kr gc``)."""
        rows = await self.db.query(VERSIONS_NEWEST_FIRST)
        return [str(row["version"]) for row in rows]

    async def drop_version(self, version: str) -> None:
        """Every row of ``version`` in one batch (deletes only: repeating it is harmless)."""
        items = [{"sql": sql, "params": params} for sql, params in drop_version_statements(version)]
        await self.db.batch(items, f"D1 rows of {version} (drop)")
