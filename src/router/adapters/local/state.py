"""Local state folder: R2 as files, D1 as SQLite built from migrations/d1, KV as a SQLite table.

Why SQLite for KV too: a single-row UPDATE in a SQLite transaction is atomic, which is what the
activation switch needs; readers see the old value or the new one. The D1 stand-in runs the same
statements as the D1 adapter (:mod:`router.sql`), so both write the same rows.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from router.errors import BindingError
from router.ops.query_log import hour_of, logged_params, row_to_logged
from router.ops.questions import LoggedQuestion, question_params, row_to_question
from router.ports import LoggedQuery
from router.sql import (
    QUERY_LOG_FREQUENT,
    QUERY_LOG_PRUNE,
    QUERY_LOG_RECORD,
    QUESTION_LOG_COUNT,
    QUESTION_LOG_GET,
    QUESTION_LOG_PRUNE,
    QUESTION_LOG_RECORD,
    QUESTION_LOG_SELECT,
    VERSIONS_NEWEST_FIRST,
    drop_version_statements,
    iter_version_statements,
)

__all__ = [
    "DEFAULT_STATE_DIR",
    "LOCAL_CACHE_ENTRIES",
    "LOCAL_CACHE_TTL_S",
    "SQLITE_TIMEOUT_S",
    "FolderBlobStore",
    "LocalState",
    "SqliteKeyValueStore",
    "SqliteQueryLog",
    "SqliteQuestionLog",
    "SqliteRelationalStore",
    "default_state_dir",
    "migrations_dir",
    "sqlite_call",
]

DEFAULT_STATE_DIR = ".kr-state"
SQLITE_TIMEOUT_S = 2.0
"""How long a local store waits for a locked SQLite file before the call fails (a 503 or a
degraded answer, never a stalled server)."""
LOCAL_CACHE_TTL_S = 24 * 3600.0
"""Seconds a locally cached answer lives (a new version's answers have other keys anyway)."""
LOCAL_CACHE_ENTRIES = 4_096
"""Cached answers the local KV keeps at most (≈ 10–20 KB each: ≤ ~80 MB)."""

T = TypeVar("T")


def default_state_dir() -> Path:
    return Path(os.environ.get("KR_STATE") or DEFAULT_STATE_DIR)


def migrations_dir() -> Path:
    """``migrations/d1`` of the project (override with ``KR_MIGRATIONS``)."""
    override = os.environ.get("KR_MIGRATIONS")
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[4] / "migrations" / "d1"


class FolderBlobStore:
    """R2 stand-in: one file per key; writes go to a temp file then an atomic rename. A key
    that would leave the folder, or a file that cannot be read, is a ``BindingError``. Also
    :class:`~router.ports.BlobPresence` (``stat``) and :class:`~router.ports.BlobListing`
    (a walk of the folder), for delta publishing and ``kr gc``."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def _path(self, key: str) -> Path:
        path = (self.root / key).resolve()
        if self.root.resolve() not in path.parents:
            raise BindingError(f"blob key escapes the store: {key[:200]!r}")
        return path

    async def get(self, key: str) -> bytes | None:
        path = self._path(key)
        try:
            return path.read_bytes() if path.is_file() else None
        except OSError as exc:
            raise BindingError(f"local blob {key[:200]!r}: {exc.strerror or exc}") from exc

    async def put(self, key: str, data: bytes) -> None:
        path = self._path(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)

    async def size(self, key: str) -> int | None:
        path = self._path(key)
        try:
            return path.stat().st_size if path.is_file() else None
        except OSError as exc:
            raise BindingError(f"local blob {key[:200]!r}: {exc.strerror or exc}") from exc

    async def list_keys(self, prefix: str) -> list[str]:
        """Keys under ``prefix`` (temp files of unfinished writes left out), sorted."""
        folder, _, _ = prefix.rpartition("/")
        start = self._path(folder) if folder else self.root.resolve()
        if not start.is_dir():
            return []
        root = self.root.resolve()
        keys = []
        for dirpath, _, filenames in os.walk(start):
            for filename in filenames:
                if filename.startswith(".tmp-"):
                    continue
                key = (Path(dirpath) / filename).relative_to(root).as_posix()
                if key.startswith(prefix):
                    keys.append(key)
        return sorted(keys)

    async def delete(self, key: str) -> None:
        """Remove the file, and its folder once empty (a dropped version leaves no folder)."""
        path = self._path(key)
        try:
            path.unlink(missing_ok=True)
            if path.parent != self.root.resolve() and not any(path.parent.iterdir()):
                path.parent.rmdir()
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise BindingError(f"local blob {key[:200]!r}: {exc.strerror or exc}") from exc


class SqliteKeyValueStore:
    """KV stand-in: table ``kv(key, value, expires_at)`` in ``kv.sqlite``.

    Why each call runs in a thread with a short lock timeout: ``kr serve`` answers on one event
    loop, and a locked or slow SQLite file must delay only the request that needs it, not every
    other. Why every ``sqlite3`` error becomes a ``BindingError``: a damaged ``kv.sqlite`` is a
    backend outage (the service keeps serving what it holds, ``/v1/health`` says so), never a
    500. ``expiration_ttl_s`` and ``max_entries`` bound what the query cache keeps (Workers KV
    expires entries by TTL; locally the cap evicts the entries that expire first).
    """

    def __init__(
        self,
        path: Path,
        expiration_ttl_s: float | None = None,
        max_entries: int | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = path
        self.expiration_ttl_s = expiration_ttl_s
        self.max_entries = max_entries
        self.clock = clock
        self._ready = False

    def with_limits(
        self, expiration_ttl_s: float | None, max_entries: int | None
    ) -> SqliteKeyValueStore:
        """The same file, written with a TTL and a cap (the query cache's view of KV)."""
        return SqliteKeyValueStore(self.path, expiration_ttl_s, max_entries, self.clock)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=SQLITE_TIMEOUT_S)
        if not self._ready:
            db.execute(
                "CREATE TABLE IF NOT EXISTS kv (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                "expires_at REAL)"
            )
            columns = {row[1] for row in db.execute("PRAGMA table_info(kv)")}
            if "expires_at" not in columns:  # a state folder of an earlier version
                db.execute("ALTER TABLE kv ADD COLUMN expires_at REAL")
            self._ready = True
        return db

    async def get(self, key: str) -> str | None:
        return await sqlite_call(self._get, key, where=f"local KV ({self.path.name})")

    async def put(self, key: str, value: str) -> None:
        await sqlite_call(self._put, key, value, where=f"local KV ({self.path.name})")

    def _get(self, key: str) -> str | None:
        with closing(self._connect()) as db, db:
            row = db.execute(
                "SELECT value FROM kv WHERE key = ? AND (expires_at IS NULL OR expires_at > ?)",
                (key, self.clock()),
            ).fetchone()
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str) -> None:
        now = self.clock()
        expires = None if self.expiration_ttl_s is None else now + self.expiration_ttl_s
        with closing(self._connect()) as db, db:
            db.execute(
                "INSERT INTO kv (key, value, expires_at) VALUES (?, ?, ?) ON CONFLICT(key) "
                "DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at",
                (key, value, expires),
            )
            if self.max_entries is not None:
                self._evict(db, now, self.max_entries)

    @staticmethod
    def _evict(db: sqlite3.Connection, now: float, max_entries: int) -> None:
        """Drop expired entries, then those expiring first beyond ``max_entries`` of them
        (entries without a TTL — the active version — are never evicted)."""
        db.execute("DELETE FROM kv WHERE expires_at IS NOT NULL AND expires_at <= ?", (now,))
        db.execute(
            "DELETE FROM kv WHERE key IN (SELECT key FROM kv WHERE expires_at IS NOT NULL "
            "ORDER BY expires_at DESC LIMIT -1 OFFSET ?)",
            (max_entries,),
        )


async def sqlite_call(work: Callable[..., T], *args: Any, where: str) -> T:
    """Run blocking SQLite work off the event loop; its errors become ``BindingError``.
    Driven without a loop (``router.sync.run_sync``), there is no loop to keep free: inline."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        running = False
    else:
        running = True
    try:
        return await asyncio.to_thread(work, *args) if running else work(*args)
    except sqlite3.Error as exc:
        raise BindingError(f"{where}: {exc}") from exc


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
        self, version: str, manifest: bytes, rows: Mapping[str, Iterable[dict[str, Any]]]
    ) -> None:
        """Replace the version's rows in one transaction (so re-publishing is idempotent),
        each table's rows read once as they are inserted."""
        with self._connect() as db:
            for sql, params in iter_version_statements(version, manifest, rows):
                db.execute(sql, params)

    async def versions(self) -> list[str]:
        """Versions with rows, newest first (:class:`~router.ports.VersionRows`)."""
        with closing(self._connect()) as db:
            return [str(row[0]) for row in db.execute(VERSIONS_NEWEST_FIRST)]

    async def drop_version(self, version: str) -> None:
        with closing(self._connect()) as db, db:
            for sql, params in drop_version_statements(version):
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

    async def record_with_questions(
        self, queries: Sequence[LoggedQuery], questions: Sequence[LoggedQuestion]
    ) -> None:
        """Counts and questions in one transaction (``SharedLogWriter``: one SQLite file)."""
        try:
            with closing(self._connect()) as db, db:
                db.executemany(QUERY_LOG_RECORD, [logged_params(q) for q in queries])
                db.executemany(QUESTION_LOG_RECORD, [question_params(q) for q in questions])
        except sqlite3.Error as exc:
            raise BindingError(f"query log {self.path}: {exc}") from exc

    async def frequent(self, limit: int, since: float) -> list[LoggedQuery]:
        with self._connect() as db:
            rows = db.execute(QUERY_LOG_FREQUENT, (hour_of(since), limit)).fetchall()
        return [row_to_logged(dict(row)) for row in rows]

    async def prune(self, before: float) -> int:
        with closing(self._connect()) as db, db:
            return db.execute(QUERY_LOG_PRUNE, (hour_of(before),)).rowcount


class SqliteQuestionLog:
    """Question log stand-in: table ``question_log`` (migrations/d1/0005) in the D1 SQLite file
    (migrations applied by :class:`SqliteRelationalStore`, as for the query log). SQLite
    errors become :class:`BindingError` (a 503 on ``/v1/gaps``, never a 500)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=SQLITE_TIMEOUT_S)
        db.row_factory = sqlite3.Row
        return db

    def _run(self, work: Callable[[sqlite3.Connection], T]) -> T:
        try:
            with closing(self._connect()) as db, db:
                return work(db)
        except sqlite3.Error as exc:
            raise BindingError(f"question log {self.path}: {exc}") from exc

    async def record(self, questions: Sequence[LoggedQuestion]) -> None:
        params = [question_params(q) for q in questions]
        self._run(lambda db: db.executemany(QUESTION_LOG_RECORD, params))

    async def count(self, since: float, until: float, tenant: str) -> int:
        row = self._run(
            lambda db: db.execute(QUESTION_LOG_COUNT, (since, until, tenant, tenant)).fetchone()
        )
        return int(row[0])

    async def read(
        self, since: float, until: float, tenant: str, after_id: int, limit: int
    ) -> list[LoggedQuestion]:
        params = (since, until, tenant, tenant, after_id, limit)
        rows = self._run(lambda db: db.execute(QUESTION_LOG_SELECT, params).fetchall())
        return [row_to_question(dict(row)) for row in rows]

    async def get(self, question_id: int, tenant: str) -> LoggedQuestion | None:
        params = (question_id, tenant, tenant)
        row = self._run(lambda db: db.execute(QUESTION_LOG_GET, params).fetchone())
        return None if row is None else row_to_question(dict(row))

    async def prune(self, before: float) -> int:
        return self._run(lambda db: db.execute(QUESTION_LOG_PRUNE, (before,)).rowcount)


@dataclass
class LocalState:
    """The local stores under one folder."""

    root: Path

    def __post_init__(self) -> None:
        self.root = Path(self.root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.blobs = FolderBlobStore(self.root / "r2")
        self.kv = SqliteKeyValueStore(self.root / "kv.sqlite")
        self.cache_kv = self.kv.with_limits(LOCAL_CACHE_TTL_S, LOCAL_CACHE_ENTRIES)
        self.relational = SqliteRelationalStore(self.root / "d1.sqlite")
        self.query_log = SqliteQueryLog(self.root / "d1.sqlite")
        self.question_log = SqliteQuestionLog(self.root / "d1.sqlite")
