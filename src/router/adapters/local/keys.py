"""API keys in the local D1 stand-in (``d1.sqlite`` of the state folder, migrations/d1/0004).

Why here and not in :mod:`.state`: the keys table arrives with the migrations the state folder
already applies, so this store only needs the file; ``kr keys`` writes through it and
``kr serve`` reads through it. A lookup runs in a thread so it never blocks the event loop, waits
at most ``state.SQLITE_TIMEOUT_S`` for a locked file, and turns every ``sqlite3`` error (locked,
truncated, not a database) into a ``BindingError``: the authenticator then answers 503, never
500 and never "authenticated" (:class:`router.auth.KeyStoreUnavailableError`).
"""

from __future__ import annotations

import datetime as dt
import sqlite3
from contextlib import closing
from pathlib import Path

from router.adapters.local.state import SQLITE_TIMEOUT_S as READ_TIMEOUT_S
from router.adapters.local.state import sqlite_call
from router.auth.api_keys import (
    KEY_FIND,
    KEY_INSERT,
    KEY_LIST,
    KEY_REVOKE,
    ApiKey,
    new_key,
)

__all__ = ["READ_TIMEOUT_S", "SQLITE_TIMEOUT_S", "SqliteKeyStore", "utc_now"]

SQLITE_TIMEOUT_S = 5.0
"""How long ``kr keys`` (an operator at a terminal) waits for a locked file."""


def utc_now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class SqliteKeyStore:
    """The ``api_keys`` table of a D1 SQLite file whose migrations are applied."""

    def __init__(self, path: Path, read_timeout_s: float = READ_TIMEOUT_S) -> None:
        self.path = path
        self.read_timeout_s = read_timeout_s

    def _connect(self, timeout_s: float = SQLITE_TIMEOUT_S) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=timeout_s)

    def create(self, tenant: str) -> tuple[str, ApiKey]:
        """A new key for ``tenant``: the plaintext (to show once) and its stored row."""
        plaintext, record = new_key(tenant, utc_now())
        with self._connect() as db:
            db.execute(
                KEY_INSERT, (record.key_id, record.tenant, record.key_hash, record.created_at)
            )
        return plaintext, record

    def list(self) -> list[ApiKey]:
        with self._connect() as db:
            return [ApiKey(*row) for row in db.execute(KEY_LIST).fetchall()]

    def revoke(self, key_id: str) -> bool:
        """Revoke a key; False when no working key has that id."""
        with self._connect() as db:
            return db.execute(KEY_REVOKE, (utc_now(), key_id)).rowcount == 1

    def find_now(self, key_id: str) -> ApiKey | None:
        with closing(self._connect(self.read_timeout_s)) as db:
            row = db.execute(KEY_FIND, (key_id,)).fetchone()
        return None if row is None else ApiKey(*row)

    async def find(self, key_id: str) -> ApiKey | None:
        """The key's row; a ``BindingError`` when the file cannot say (locked, damaged)."""
        return await sqlite_call(self.find_now, key_id, where=f"local key store ({self.path.name})")
