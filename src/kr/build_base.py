"""The last full build's facts, kept for incremental builds: ``<state>/build/base.sqlite``.

Why a file of its own (docs/adr/0020): a delta is compiled against the base version without
reading the base's documents again — at a million sections, loading them alone takes longer
than the 10 s an edit may cost. What a delta needs is small per document and is looked up,
not loaded: each file's size, mtime and digest (which files changed), its partition, local
index and sections' ids with their view numbers (tombstones and redirects), the link targets
by id (wikilinks of the changed documents), and per partition its average lengths and accent
lexicon. Written after every full build, never by an incremental one.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from router.compile.corpus import Diagnostic
from router.compile.delta import BasePartition, Placement, placements
from router.compile.indexer import CompiledPackage, group_partitions, link_targets
from router.knowledge.model import Document
from router.package.version.manifest import Manifest
from router.package.version.partitions import partition_key

__all__ = ["BASE_FILE", "BuildBase", "FileState", "file_digest"]

BASE_FILE = Path("build") / "base.sqlite"

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value BLOB)",
    "CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, size INTEGER, mtime_ns INTEGER,"
    " digest BLOB, partition TEXT, doc_index INTEGER, sections BLOB)",
    "CREATE TABLE IF NOT EXISTS targets (partition TEXT, kind TEXT, id TEXT, folded TEXT,"
    " path TEXT, section INTEGER, PRIMARY KEY (partition, kind, id))",
    "CREATE INDEX IF NOT EXISTS targets_folded ON targets (kind, folded)",
    "CREATE TABLE IF NOT EXISTS warnings (path TEXT, line INTEGER, message TEXT)",
)


def file_digest(raw: bytes) -> bytes:
    """The digest that says a file's bytes changed."""
    return hashlib.sha256(raw).digest()


@dataclass(frozen=True)
class FileState:
    """What the base saw of one file."""

    size: int
    mtime_ns: int
    digest: bytes


class _Targets(Mapping[str, int]):
    """One partition's link targets of one kind (``s`` section ids, ``d`` semantic ids), looked
    up in the base file by id (a delta resolves a handful)."""

    def __init__(self, db: sqlite3.Connection, partition: str, kind: str) -> None:
        self._db, self._partition, self._kind = db, partition, kind

    def __getitem__(self, key: object) -> int:
        row = self._db.execute(
            "SELECT section FROM targets WHERE partition = ? AND kind = ? AND id = ?",
            (self._partition, self._kind, key),
        ).fetchone()
        if row is None:
            raise KeyError(key)
        return int(row[0])

    def __iter__(self) -> Iterator[str]:
        rows = self._db.execute(
            "SELECT id FROM targets WHERE partition = ? AND kind = ?", (self._partition, self._kind)
        )
        return (str(row[0]) for row in rows)

    def __len__(self) -> int:
        row = self._db.execute(
            "SELECT count(*) FROM targets WHERE partition = ? AND kind = ?",
            (self._partition, self._kind),
        ).fetchone()
        return int(row[0])


class BuildBase:
    """The base facts of one local state; ``record`` after a full build, read before a delta."""

    def __init__(self, state_root: Path) -> None:
        path = state_root / BASE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path)
        for statement in _SCHEMA:
            self._db.execute(statement)

    def close(self) -> None:
        self._db.close()

    # -- written after a full build ----------------------------------------------------------

    def record(
        self,
        root: Path,
        package: CompiledPackage,
        documents: Sequence[Document],
        fingerprint: str,
        warnings: Sequence[Diagnostic] = (),
    ) -> None:
        """Remember the full build of ``root`` (``documents``: its input, in order; its
        ``warnings``, which a delta build repeats for the files it did not parse again)."""
        placed = placements(package.manifest, documents)
        with self._db:
            for table in ("meta", "files", "targets", "warnings"):
                self._db.execute(f"DELETE FROM {table}")
            self._db.executemany(
                "INSERT INTO files VALUES (?, ?, ?, ?, ?, ?, ?)",
                self._file_rows(root, placed),
            )
            self._db.executemany(
                "INSERT OR REPLACE INTO targets VALUES (?, ?, ?, ?, ?, ?)",
                self._target_rows(package.manifest, documents),
            )
            partitions = {
                key: (compiled.averages, compiled.lexicon)
                for key, compiled in package.partitions.items()
            }
            meta = {
                "version": package.knowledge_version.encode(),
                "fingerprint": fingerprint.encode(),
                "manifest": package.manifest.to_bytes(),
                "partitions": pickle.dumps(partitions, protocol=pickle.HIGHEST_PROTOCOL),
            }
            self._db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
            self._db.executemany(
                "INSERT INTO warnings VALUES (?, ?, ?)",
                [(d.path, d.line, d.message) for d in warnings if d.level == "warning"],
            )

    @staticmethod
    def _file_rows(root: Path, placed: Mapping[str, Placement]) -> Iterable[tuple[object, ...]]:
        for path, where in placed.items():
            full = root / path
            stat = os.stat(full)
            yield (
                path,
                stat.st_size,
                stat.st_mtime_ns,
                file_digest(full.read_bytes()),
                where.key,
                where.index,
                pickle.dumps(where.sections, protocol=pickle.HIGHEST_PROTOCOL),
            )

    @staticmethod
    def _target_rows(
        manifest: Manifest, documents: Sequence[Document]
    ) -> Iterable[tuple[object, ...]]:
        firsts = {entry.key: entry.first_section for entry in manifest.partitions}
        for tenant, members in group_partitions(documents):
            key = partition_key(tenant)
            sections, docs = link_targets(members, firsts[key])
            owners = _owners(members)
            for kind, found in (("s", sections), ("d", docs)):
                for target, section in found.items():
                    yield key, kind, target, target.casefold(), owners[kind, target], section

    # -- read before a delta -----------------------------------------------------------------

    def _meta(self, name: str) -> bytes | None:
        row = self._db.execute("SELECT value FROM meta WHERE name = ?", (name,)).fetchone()
        return None if row is None else bytes(row[0])

    @property
    def fingerprint(self) -> str | None:
        found = self._meta("fingerprint")
        return None if found is None else found.decode()

    @property
    def version(self) -> str | None:
        found = self._meta("version")
        return None if found is None else found.decode()

    def manifest(self) -> Manifest:
        blob = self._meta("manifest")
        if blob is None:
            raise LookupError("no full build is recorded")
        return Manifest.from_bytes(blob)

    def files(self) -> dict[str, FileState]:
        rows = self._db.execute("SELECT path, size, mtime_ns, digest FROM files")
        return {str(p): FileState(int(s), int(m), bytes(d)) for p, s, m, d in rows}

    def placements(self, paths: Iterable[str]) -> dict[str, Placement]:
        """The placements of those of ``paths`` the base holds."""
        found: dict[str, Placement] = {}
        for path in paths:
            row = self._db.execute(
                "SELECT partition, doc_index, sections FROM files WHERE path = ?", (path,)
            ).fetchone()
            if row is not None:
                found[path] = Placement(str(row[0]), int(row[1]), pickle.loads(row[2]))
        return found

    def partitions(self) -> dict[str, BasePartition]:
        blob = self._meta("partitions")
        if blob is None:
            raise LookupError("no full build is recorded")
        stored = pickle.loads(blob)
        entries = {entry.key: entry for entry in self.manifest().partitions}
        return {
            key: BasePartition(
                entries[key],
                averages,
                lexicon,
                (_Targets(self._db, key, "s"), _Targets(self._db, key, "d")),
            )
            for key, (averages, lexicon) in stored.items()
        }

    def warnings(self, skip: Iterable[str]) -> list[Diagnostic]:
        """The full build's warnings, but those of the files in ``skip`` (parsed again)."""
        skipped = set(skip)
        rows = self._db.execute("SELECT path, line, message FROM warnings ORDER BY rowid")
        return [
            Diagnostic("warning", str(path), int(line), str(message))
            for path, line, message in rows
            if path not in skipped
        ]

    def owners(self, kind: str, folded: str) -> list[tuple[str, str]]:
        """(partition, path) of the base documents defining a target id (casefolded)."""
        rows = self._db.execute(
            "SELECT partition, path FROM targets WHERE kind = ? AND folded = ?", (kind, folded)
        )
        return [(str(key), str(path)) for key, path in rows]


def _owners(members: Sequence[Document]) -> dict[tuple[str, str], str]:
    """The path that defines each target id (the later document, as ``link_targets`` keeps)."""
    owners: dict[tuple[str, str], str] = {}
    for doc in members:
        owners["d", doc.semantic_id] = doc.path
        for section in doc.sections:
            owners["s", section.section_id] = doc.path
    return owners
