"""Local state folder: R2 as files, D1 as SQLite built from migrations/d1, KV as a SQLite table.

Why SQLite for KV too: a single-row UPDATE in a SQLite transaction is atomic, which is what the
activation switch needs; readers see the old value or the new one. The D1 stand-in runs the same
statements as the D1 adapter (:mod:`router.sql`), so both write the same rows.
"""

from __future__ import annotations

import os
import sqlite3
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from router.ops.query_log import hour_of, logged_params, row_to_logged
from router.ports import LoggedQuery
from router.sql import (
    QUERY_LOG_FREQUENT,
    QUERY_LOG_PRUNE,
    QUERY_LOG_RECORD,
    version_statements,
)

__all__ = [
    "DEFAULT_STATE_DIR",
    "FolderBlobStore",
    "LocalState",
    "SqliteKeyValueStore",
    "SqliteQueryLog",
    "SqliteRelationalStore",
    "default_state_dir",
    "migrations_dir",
]

DEFAULT_STATE_DIR = ".kr-state"


def default_state_dir() -> Path:
    return Path(os.environ.get("KR_STATE") or DEFAULT_STATE_DIR)


def migrations_dir() -> Path:
    """``migrations/d1`` of the project (override with ``KR_MIGRATIONS``)."""
    override = os.environ.get("KR_MIGRATIONS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[4] / "migrations" / "d1"


class FolderBlobStore:
    """R2 stand-in: one file per key; writes go to a temp file then an atomic rename."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise ValueError(f"blob key escapes the store: {key!r}")
        return path

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)
        return path.read_bytes() if path.is_file() else None

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)


class SqliteKeyValueStore:
    """KV stand-in: table ``kv(key, value)`` in ``kv.sqlite``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10)

    async def get(self, key: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT value FROM kv WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    async def put(self, key: str, value: str) -> None:
        with self._connect() as db:
            db.execute(
                "INSERT INTO kv (key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                (key, value),
            )


class SqliteRelationalStore:
    """D1 stand-in: SQLite with the ``migrations/d1`` files applied in order (like wrangler)."""

    def __init__(self, path: Path, migrations: Path | None = None) -> None:
        self.path = path
        self.apply_migrations(migrations or migrations_dir())

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.execute("PRAGMA foreign_keys = ON")
        return db

    def apply_migrations(self, folder: Path) -> list[str]:
        applied: list[str] = []
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS d1_migrations (id INTEGER PRIMARY KEY AUTOINCREMENT, "
                "name TEXT UNIQUE, applied_at TEXT DEFAULT CURRENT_TIMESTAMP)"
            )
            done = {row[0] for row in db.execute("SELECT name FROM d1_migrations")}
            for sql in sorted(folder.glob("*.sql")):
                if sql.name in done:
                    continue
                db.executescript(sql.read_text(encoding="utf-8"))
                db.execute("INSERT INTO d1_migrations (name) VALUES (?)", (sql.name,))
                applied.append(sql.name)
        return applied

    async def record_version(
        self, version: str, manifest: bytes, rows: dict[str, list[dict[str, Any]]]
    ) -> None:
        """Replace the version's rows in one transaction (so re-publishing is idempotent)."""
        with self._connect() as db:
            for sql, params in version_statements(version, manifest, rows):
                db.execute(sql, params)

    def count(self, table: str, version: str) -> int:
        with self._connect() as db:
            row = db.execute(
                f"SELECT COUNT(*) FROM knowledge_{table} WHERE version = ?", (version,)
            ).fetchone()
        return int(row[0])


class SqliteQueryLog:
    """Query log stand-in: table ``query_log`` (migrations/d1/0002) in the D1 SQLite file.

    The migrations are applied by :class:`SqliteRelationalStore` on the same file.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=10)
        db.row_factory = sqlite3.Row
        return db

    async def record(self, queries: Sequence[LoggedQuery]) -> None:
        with self._connect() as db:
            db.executemany(QUERY_LOG_RECORD, [logged_params(q) for q in queries])

    async def frequent(self, limit: int, since: float) -> list[LoggedQuery]:
        with self._connect() as db:
            rows = db.execute(QUERY_LOG_FREQUENT, (hour_of(since), limit)).fetchall()
        return [row_to_logged(dict(row)) for row in rows]

    async def prune(self, before: float) -> None:
        with self._connect() as db:
            db.execute(QUERY_LOG_PRUNE, (hour_of(before),))


@dataclass
class LocalState:
    """The local stores under one folder."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.blobs = FolderBlobStore(self.root / "r2")
        self.kv = SqliteKeyValueStore(self.root / "kv.sqlite")
        self.relational = SqliteRelationalStore(self.root / "d1.sqlite")
        self.query_log = SqliteQueryLog(self.root / "d1.sqlite")
