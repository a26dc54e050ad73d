"""Parsed documents of earlier builds, kept in the state folder and reused by content hash.

Why: parsing is about half of a large build (front matter, sections, links and the injection
scan of every field: ~53 s of 122 s for 100k sections), and an author's edit changes one file
of thousands. A file whose bytes, path and parser code are unchanged parses to the same
:class:`~router.knowledge.model.Document`, so ``kr build`` takes it from here instead. The key
covers the parser's own source files (``PARSER_MODULES``), so a new parser never reuses what an
old one made. Files that fail to parse are never stored (their error is reported every build).

One SQLite file (``<state>/build/documents.sqlite``): path → (key, pickled document). Pickle is
safe here because only this program writes the file, inside the operator's own state folder.
"""

from __future__ import annotations

import hashlib
import importlib.util
import pickle
import sqlite3
from collections.abc import Iterable
from functools import cache
from pathlib import Path

from router import __version__
from router.knowledge.model import Document

__all__ = ["CACHE_FILE", "PARSER_MODULES", "DocumentCache", "parser_digest"]

CACHE_FILE = Path("build") / "documents.sqlite"
PARSER_MODULES = (
    "router.knowledge.parser",
    "router.knowledge.front_matter",
    "router.knowledge.tenants",
    "router.knowledge.model",
    "router.safety.fields",
    "router.safety.injection",
    "router.analysis.text",
)
"""The modules a parsed document depends on: their sources are part of every key."""


@cache
def parser_digest() -> bytes:
    """sha256 over the router's version and the parser modules' sources."""
    digest = hashlib.sha256(__version__.encode())
    for name in PARSER_MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec is not None else None
        digest.update(name.encode() + b"\0")
        if origin:
            digest.update(Path(origin).read_bytes())
    return digest.digest()


class DocumentCache:
    """``get`` a file's document when its key matches, ``put`` a new one, ``keep`` the paths of
    this build (the others are dropped), ``close`` to commit."""

    def __init__(self, state_root: Path) -> None:
        path = state_root / CACHE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS documents (path TEXT PRIMARY KEY, key BLOB, doc BLOB)"
        )
        self.hits = 0
        self.misses = 0

    @staticmethod
    def key(path: str, raw: bytes) -> bytes:
        return hashlib.sha256(parser_digest() + path.encode() + b"\0" + raw).digest()

    def get(self, path: str, raw: bytes) -> Document | None:
        row = self._db.execute("SELECT key, doc FROM documents WHERE path = ?", (path,)).fetchone()
        if row is None or row[0] != self.key(path, raw):
            self.misses += 1
            return None
        try:
            doc = pickle.loads(row[1])
        except Exception:  # a damaged row: parse again
            self.misses += 1
            return None
        if not isinstance(doc, Document):
            self.misses += 1
            return None
        self.hits += 1
        return doc

    def put(self, path: str, raw: bytes, doc: Document) -> None:
        blob = pickle.dumps(doc, protocol=pickle.HIGHEST_PROTOCOL)
        self._db.execute(
            "INSERT OR REPLACE INTO documents (path, key, doc) VALUES (?, ?, ?)",
            (path, self.key(path, raw), blob),
        )

    def keep(self, paths: Iterable[str]) -> None:
        """Drop the entries of files that are gone."""
        wanted = set(paths)
        stored = [row[0] for row in self._db.execute("SELECT path FROM documents")]
        gone = [(path,) for path in stored if path not in wanted]
        self._db.executemany("DELETE FROM documents WHERE path = ?", gone)

    def close(self) -> None:
        self._db.commit()
        self._db.close()
