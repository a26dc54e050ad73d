"""SQL shared by the D1 adapter and the local SQLite adapter (tables of ``migrations/d1``).

Why statements as data: D1 is reached through ``prepare(sql).bind(...)`` and ``batch([...])``,
the local default through ``sqlite3``; building the statements once, here, keeps both adapters
writing the same rows with the same SQL, and keeps D1's limits (at most 100 bound parameters per
statement) in one place. Pure Python: it runs in the Worker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from router.package.version.manifest import Manifest

__all__ = [
    "CATALOG_TABLES",
    "MAX_BOUND_PARAMETERS",
    "QUERY_LOG_FREQUENT",
    "QUERY_LOG_PRUNE",
    "QUERY_LOG_RECORD",
    "QUESTION_LOG_COUNT",
    "QUESTION_LOG_GET",
    "QUESTION_LOG_PRUNE",
    "QUESTION_LOG_RECORD",
    "QUESTION_LOG_SELECT",
    "VERSIONS_NEWEST_FIRST",
    "Statement",
    "chunked",
    "drop_version_statements",
    "iter_version_statements",
    "version_statements",
]

MAX_BOUND_PARAMETERS = 100
"""D1's limit of bound parameters per statement (SQLite's own limit is far higher)."""

CATALOG_TABLES = ("documents", "sections", "links", "keywords", "records")
"""Tables ``knowledge_<name>`` holding one version's rows (children of ``knowledge_versions``)."""

Statement = tuple[str, list[Any]]
"""One SQL statement with its positional (``?``) parameters."""

_IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]*$")

QUERY_LOG_RECORD = (
    "INSERT INTO query_log (request_key, hour, request, hits, last_seen) VALUES (?, ?, ?, ?, ?) "
    "ON CONFLICT (request_key, hour) DO UPDATE SET hits = hits + excluded.hits, "
    "last_seen = max(last_seen, excluded.last_seen)"
)
"""Count ``hits`` more uses of one request in one hour (parameters: key, hour, JSON, hits, at)."""

QUERY_LOG_FREQUENT = (
    "SELECT request_key, MAX(request) AS request, SUM(hits) AS hits, MAX(last_seen) AS last_seen "
    "FROM query_log WHERE hour >= ? GROUP BY request_key "
    "ORDER BY hits DESC, last_seen DESC, request_key LIMIT ?"
)
"""The most used requests since an hour (parameters: first hour, limit), most used first."""

QUERY_LOG_PRUNE = "DELETE FROM query_log WHERE hour < ?"
"""Forget the hours before one (parameter: first hour kept)."""

QUESTION_LOG_RECORD = (
    "INSERT INTO question_log (at, tenant, caller, question, terms, context, outcome, level, "
    "reason, nearest, knowledge_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
"""One served question (parameters: ``router.ops.questions.question_params``)."""

_QUESTION_SCOPE = "at >= ? AND at < ? AND (? = '*' OR tenant = ?)"
QUESTION_LOG_COUNT = f"SELECT COUNT(*) AS n FROM question_log WHERE {_QUESTION_SCOPE}"
"""Questions in a period and scope (parameters: since, until, tenant or '*', the same again)."""
QUESTION_LOG_SELECT = (
    f"SELECT * FROM question_log WHERE {_QUESTION_SCOPE} AND id > ? ORDER BY id LIMIT ?"
)
"""One page of them in id order (parameters: since, until, scope, scope, after id, limit)."""
QUESTION_LOG_GET = "SELECT * FROM question_log WHERE id = ? AND (? = '*' OR tenant = ?)"
"""One question by id, within a scope (parameters: id, scope, scope)."""
QUESTION_LOG_PRUNE = "DELETE FROM question_log WHERE at < ?"
"""Forget the questions served before a moment (parameter: unix time)."""


VERSIONS_NEWEST_FIRST = (
    "SELECT version FROM knowledge_versions ORDER BY published_at DESC, rowid DESC"
)
"""Versions with rows, the most recently published first (``kr gc``'s notion of recent):
``published_at`` has whole seconds, so ties go to the later insert (a republish inserts anew)."""


def drop_version_statements(version: str) -> list[Statement]:
    """Statements that remove every row of ``version`` (children first, as
    :func:`version_statements` does, so it does not depend on foreign-key enforcement)."""
    statements: list[Statement] = [
        (f"DELETE FROM knowledge_{table} WHERE version = ?", [version])
        for table in reversed(CATALOG_TABLES)
    ]
    statements.append(("DELETE FROM knowledge_versions WHERE version = ?", [version]))
    return statements


def chunked(items: Sequence[Any], size: int) -> Iterator[Sequence[Any]]:
    """``items`` in consecutive slices of at most ``size`` (none for an empty sequence)."""
    if size < 1:
        raise ValueError(f"chunk size must be positive, got {size}")
    for start in range(0, len(items), size):
        yield items[start : start + size]


def version_statements(
    version: str,
    manifest: bytes,
    rows: Mapping[str, Iterable[Mapping[str, Any]]],
    max_parameters: int = MAX_BOUND_PARAMETERS,
) -> list[Statement]:
    """Statements that replace every row of ``version`` (so re-publishing is idempotent).

    First the version's old rows are deleted (children explicitly, so it does not depend on
    foreign-key enforcement), then the version row is inserted, then the catalog rows as
    multi-row ``INSERT``s of at most ``max_parameters`` bound values each.
    """
    format_version = Manifest.from_bytes(manifest).format_version
    statements = drop_version_statements(version)
    statements.append(
        (
            "INSERT INTO knowledge_versions (version, format_version, manifest) VALUES (?, ?, ?)",
            [version, format_version, manifest.decode("utf-8")],
        )
    )
    for table, table_rows in rows.items():
        statements.extend(_insert_statements(table, version, table_rows, max_parameters))
    return statements


def iter_version_statements(
    version: str,
    manifest: bytes,
    rows: Mapping[str, Iterable[Mapping[str, Any]]],
    max_parameters: int = MAX_BOUND_PARAMETERS,
) -> Iterator[Statement]:
    """``version_statements`` one at a time, each table's rows read once as they are
    inserted (a local publish of a million sections: the rows never held at once). The same
    statements when each table's rows share their columns, as the catalog's do."""
    format_version = Manifest.from_bytes(manifest).format_version
    yield from drop_version_statements(version)
    yield (
        "INSERT INTO knowledge_versions (version, format_version, manifest) VALUES (?, ?, ?)",
        [version, format_version, manifest.decode("utf-8")],
    )
    for table, table_rows in rows.items():
        for names, run in _runs(table_rows, max_parameters):
            yield from _insert_group(table, version, names, run, max_parameters)


def _runs(
    rows: Iterable[Mapping[str, Any]], max_parameters: int
) -> Iterator[tuple[tuple[str, ...], list[Mapping[str, Any]]]]:
    """Consecutive rows of the same columns, 64 statements' worth at most a run (a whole
    number of statements, so the statements are ``_insert_statements``')."""
    names: tuple[str, ...] = ()
    run: list[Mapping[str, Any]] = []
    limit = 0
    for row in rows:
        columns = tuple(row)
        if run and (columns != names or len(run) >= limit):
            yield names, run
            run = []
        if columns != names or not limit:
            names = columns
            limit = 64 * max(1, max_parameters // (len(columns) + 1))
        run.append(row)
    if run:
        yield names, run


def _insert_statements(
    table: str, version: str, rows: Iterable[Mapping[str, Any]], max_parameters: int
) -> Iterator[Statement]:
    if table not in CATALOG_TABLES:
        raise ValueError(f"unknown catalog table {table!r}; expected one of {CATALOG_TABLES}")
    groups: dict[tuple[str, ...], list[Mapping[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(row), []).append(row)
    for names, group in groups.items():
        yield from _insert_group(table, version, names, group, max_parameters)


def _insert_group(
    table: str,
    version: str,
    names: tuple[str, ...],
    group: Sequence[Mapping[str, Any]],
    max_parameters: int,
) -> Iterator[Statement]:
    """The multi-row ``INSERT``s of rows that share ``names``."""
    if table not in CATALOG_TABLES:
        raise ValueError(f"unknown catalog table {table!r}; expected one of {CATALOG_TABLES}")
    columns = ["version", *names]
    for column in columns:
        if not _IDENTIFIER.match(column):
            raise ValueError(f"invalid column name {column!r} for knowledge_{table}")
    per_statement = max_parameters // len(columns)
    if per_statement < 1:
        raise ValueError(f"knowledge_{table} rows have more than {max_parameters} columns")
    placeholder = "(" + ", ".join("?" * len(columns)) + ")"
    for chunk in chunked(group, per_statement):
        sql = f"INSERT INTO knowledge_{table} ({', '.join(columns)}) VALUES " + ", ".join(
            [placeholder] * len(chunk)
        )
        params: list[Any] = []
        for row in chunk:
            params.append(version)
            params.extend(row[name] for name in names)
        yield sql, params
