"""The D1 binding as the relational store and query-log ports (tables of ``migrations/d1``).

Why batches in chunks: ``batch([...])`` runs its statements in one transaction and one round
trip, but D1 bounds a statement to 100 bound parameters and an invocation to a limited number of
queries, so rows go as multi-row ``INSERT``s (:func:`router.sql.version_statements`) and the
statements as batches of at most ``max_batch`` each. Only the first batch (delete the version's
old rows, insert the version row) must be atomic; a publish that fails half way leaves a version
that was never activated, and publishing it again replaces its rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from router.adapters.cloudflare.jsconv import sql_params, to_js, to_py
from router.errors import BindingError
from router.ops.query_log import hour_of, logged_params, row_to_logged
from router.ops.questions import LoggedQuestion, question_params, row_to_question
from router.ports import LoggedQuery
from router.sql import (
    MAX_BOUND_PARAMETERS,
    QUERY_LOG_FREQUENT,
    QUERY_LOG_PRUNE,
    QUERY_LOG_RECORD,
    QUESTION_LOG_COUNT,
    QUESTION_LOG_GET,
    QUESTION_LOG_PRUNE,
    QUESTION_LOG_RECORD,
    QUESTION_LOG_SELECT,
    Statement,
    chunked,
    version_statements,
)

__all__ = [
    "DEFAULT_MAX_BATCH",
    "D1QueryLog",
    "D1QuestionLog",
    "D1RecordRows",
    "D1RelationalStore",
    "run_batches",
]

DEFAULT_MAX_BATCH = 50
"""Statements per ``batch`` call."""


async def run_batches(
    binding: Any, statements: Sequence[Statement], max_batch: int = DEFAULT_MAX_BATCH
) -> int:
    """Run ``statements`` in order as D1 batches of at most ``max_batch``; returns the count."""
    done = 0
    for chunk in chunked(statements, max_batch):
        prepared = [binding.prepare(sql).bind(*sql_params(params)) for sql, params in chunk]
        try:
            await binding.batch(to_js(prepared))
        except Exception as exc:
            raise BindingError(f"D1 batch failed after {done} statements: {exc}") from exc
        done += len(chunk)
    return done


async def _all(binding: Any, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    try:
        result = to_py(await binding.prepare(sql).bind(*sql_params(params)).all())
    except Exception as exc:
        raise BindingError(f"D1 query failed: {exc}") from exc
    rows = (result or {}).get("results") or []
    return [dict(row) for row in rows]


class D1RelationalStore:
    """Writes a version's catalog rows with the same statements as the local SQLite store."""

    def __init__(self, binding: Any, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.binding = binding
        self.max_batch = max_batch

    async def record_version(
        self, version: str, manifest: bytes, rows: Mapping[str, Iterable[dict[str, Any]]]
    ) -> None:
        await run_batches(self.binding, version_statements(version, manifest, rows), self.max_batch)

    async def count(self, table: str, version: str) -> int:
        """Rows of ``knowledge_<table>`` for ``version`` (checks and tests)."""
        if table not in {"versions", "documents", "sections", "links", "keywords"}:
            raise ValueError(f"unknown table {table!r}")
        rows = await _all(
            self.binding,
            f"SELECT COUNT(*) AS n FROM knowledge_{table} WHERE version = ?",
            [version],
        )
        return int(rows[0]["n"]) if rows else 0


class D1RecordRows:
    """Document records by id: one query for a response's records of a partition (instead of
    one R2 get per record chunk, six at a time: bench/records_read.py)."""

    def __init__(self, binding: Any) -> None:
        self.binding = binding

    async def read(self, version: str, partition: str, docs: Sequence[int]) -> dict[int, str]:
        found: dict[int, str] = {}
        for chunk in chunked(list(docs), MAX_BOUND_PARAMETERS - 2):
            marks = ", ".join("?" * len(chunk))
            sql = (
                "SELECT doc_index, record FROM knowledge_records "
                f"WHERE version = ? AND partition_key = ? AND doc_index IN ({marks})"
            )
            for row in await _all(self.binding, sql, [version, partition, *chunk]):
                found[int(row["doc_index"])] = str(row["record"])
        return found


class D1QueryLog:
    """The ``query_log`` table (migrations/d1/0002) through the D1 binding."""

    def __init__(self, binding: Any, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.binding = binding
        self.max_batch = max_batch

    async def record(self, queries: Sequence[LoggedQuery]) -> None:
        statements: list[Statement] = [(QUERY_LOG_RECORD, logged_params(q)) for q in queries]
        await run_batches(self.binding, statements, self.max_batch)

    async def record_with_questions(
        self, queries: Sequence[LoggedQuery], questions: Sequence[LoggedQuestion]
    ) -> None:
        """Counts and questions in one batch (``SharedLogWriter``: the tables share D1)."""
        statements: list[Statement] = [(QUERY_LOG_RECORD, logged_params(q)) for q in queries]
        statements.extend((QUESTION_LOG_RECORD, question_params(q)) for q in questions)
        await run_batches(self.binding, statements, self.max_batch)

    async def frequent(self, limit: int, since: float) -> list[LoggedQuery]:
        rows = await _all(self.binding, QUERY_LOG_FREQUENT, [hour_of(since), limit])
        return [row_to_logged(row) for row in rows]

    async def prune(self, before: float) -> None:
        await run_batches(self.binding, [(QUERY_LOG_PRUNE, [hour_of(before)])], self.max_batch)


class D1QuestionLog:
    """The ``question_log`` table (migrations/d1/0005) through the D1 binding."""

    def __init__(self, binding: Any, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.binding = binding
        self.max_batch = max_batch

    async def record(self, questions: Sequence[LoggedQuestion]) -> None:
        statements: list[Statement] = [(QUESTION_LOG_RECORD, question_params(q)) for q in questions]
        await run_batches(self.binding, statements, self.max_batch)

    async def count(self, since: float, until: float, tenant: str) -> int:
        rows = await _all(self.binding, QUESTION_LOG_COUNT, [since, until, tenant, tenant])
        return int(rows[0]["n"]) if rows else 0

    async def read(
        self, since: float, until: float, tenant: str, after_id: int, limit: int
    ) -> list[LoggedQuestion]:
        params = [since, until, tenant, tenant, after_id, limit]
        rows = await _all(self.binding, QUESTION_LOG_SELECT, params)
        return [row_to_question(row) for row in rows]

    async def get(self, question_id: int, tenant: str) -> LoggedQuestion | None:
        rows = await _all(self.binding, QUESTION_LOG_GET, [question_id, tenant, tenant])
        return row_to_question(rows[0]) if rows else None

    async def prune(self, before: float) -> int:
        return await _changes(self.binding, QUESTION_LOG_PRUNE, [before])


async def _changes(binding: Any, sql: str, params: Sequence[Any]) -> int:
    """Run one statement; the rows it changed (D1's ``meta.changes``; 0 when not reported)."""
    try:
        result = to_py(await binding.prepare(sql).bind(*sql_params(params)).run())
    except Exception as exc:
        raise BindingError(f"D1 statement failed: {exc}") from exc
    meta = (result or {}).get("meta") or {}
    return int(meta.get("changes") or 0)
